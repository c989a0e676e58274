"""How fast the numpy reference evaluator is, against ONNX Runtime's CPU provider with one thread
(issue 43), and what the per-pass numeric check costs (a benchmark that prints, not a test).

    python benchmarks/reference_speed.py [--models yolov10n,bert,...] [--repeat 5] [--skip-check]

Per exporter-style built-in model (a YOLOv10n-shaped detector, a BERT-style encoder, a GPT-2-style
decoder, a half-width ResNet-18, a bidirectional LSTM), in one process, on the same feeds:

* forward: median wall time of `compiler.ref.evaluate` and of `onnxruntime.InferenceSession.run`
  (CPUExecutionProvider, intra_op_num_threads=1, inter_op_num_threads=1), runs interleaved, and
  their ratio (target <= 3x);
* check: the per-pass numeric check of all five pipelines, in units of one reference forward
  (target <= 3x): the reading of every record's `numeric` after the trace, where checks wait
  to be asked for, else the trace with the check inline minus the trace without it; it counts
  everything the check costs, the reference outputs of the imported program included;
* goto(1): `Session.from_onnx(yolov10n.onnx).goto(1)` with the check on (target <= 0.5 s), and
  how long until the record's numeric result is there when it is asked for.

Times are CPU seconds of this process (time.process_time: every thread, so BLAS's and ORT's
threads count), with wall seconds beside them: on a machine shared with other work, wall time
measures the neighbours as much as the code. Both sides run one compute thread.

Targets: issue 43. Compare figures from one run, not across runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import onnx

from migx_explore.compiler import evaluate
from migx_explore.compiler.inputs import model_inputs
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.models.bert_encoder import bert_encoder
from migx_explore.models.bilstm import bilstm
from migx_explore.models.cnn import resnet18
from migx_explore.models.gpt2_decode import gpt2_decode
from migx_explore.models.yolov10n import yolov10n
from migx_explore.session import Session

FORWARD_RATIO_TARGET = 3.0
CHECK_RATIO_TARGET = 3.0
GOTO_TARGET_S = 0.5

# name -> (builder, input dims, what it stands for); sizes as issue 43's table measured them.
MODELS: dict[str, tuple[Callable[[], onnx.ModelProto], dict, str]] = {
    "yolov10n": (yolov10n, {}, "YOLOv10n-shaped detector, 640x640"),
    "bert": (lambda: bert_encoder(seq=128, d=256, heads=4, d_ff=1024), {}, "BERT-style encoder h256 L4 seq128"),
    "gpt2": (gpt2_decode, {"P": 1, "T": 128}, "GPT-2-style decoder d128 L4, 128 new tokens"),
    "resnet18": (lambda: resnet18(width=32), {}, "ResNet-18 at half width, 224x224"),
    "bilstm": (bilstm, {}, "2-layer bidirectional LSTM, seq 32, hidden 96"),
}


def ort_session(model: bytes):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


class Clock:
    """CPU and wall seconds since it was made (or last `lap`)."""

    def __init__(self) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def lap(self) -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        out = (cpu - self.cpu, wall - self.wall)
        self.cpu, self.wall = cpu, wall
        return out


def interleaved(fns: list[Callable[[], object]], repeat: int) -> list[tuple[float, float]]:
    """Median (CPU, wall) seconds of each fn, the runs interleaved so a busy moment hits all alike."""
    for fn in fns:
        fn()  # warm-up: caches, lazy imports, ORT's first-run allocations
    times: list[list[tuple[float, float]]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            c = Clock()
            fn()
            times[k].append(c.lap())
    return [(statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)) for ts in times]


def ms(t: tuple[float, float]) -> str:
    return f"{t[0] * 1e3:8.1f} ms (wall {t[1] * 1e3:7.1f})"


def forward_row(name: str, repeat: int) -> tuple[float, bytes, dict, dict]:
    build, dims, what = MODELS[name]
    data = build().SerializeToString()
    program = parse_onnx(data, input_dims=dims or None)
    feeds = model_inputs(program, 0)
    sess = ort_session(data)
    ours, theirs = interleaved([lambda: evaluate(program, feeds), lambda: sess.run(None, feeds)], repeat)
    ratio = ours[0] / theirs[0]
    verdict = "within target" if ratio <= FORWARD_RATIO_TARGET else f"OVER {FORWARD_RATIO_TARGET:g}x"
    print(
        f"forward  {name:9s} ours {ms(ours)}  ORT 1 thread {ms(theirs)}  "
        f"ratio {ratio:5.1f}x (wall {ours[1] / theirs[1]:5.1f}x)  {verdict}"
        f"   ({what}; {len(program.main)} instructions)"
    )
    sys.stdout.flush()
    return ours[0], data, dims, feeds


def check_row(name: str, forward_s: float, data: bytes, dims: dict, feeds: dict) -> None:
    """What the checks of a whole trace cost, in forwards: timed alone where they run after
    tracing, else the trace with the inline check minus the trace without it."""

    def trace(numeric: bool) -> tuple[float, float, float]:
        program = parse_onnx(data, input_dims=dims or None)
        s = Session(program, name=name, numeric=numeric, inputs=feeds if numeric else None)
        c = Clock()
        tr = s.trace
        traced = c.lap()
        for r in tr.top_level():  # a check left pending is paid here, where it is asked for
            _ = r.numeric
        read = c.lap()
        if tr.error:
            print(f"  ({name}: trace stopped: {tr.error})")
        return traced[0] + read[0], traced[1] + read[1], read[0]

    off = trace(False)
    on = trace(True)
    # Checks that run after tracing are timed alone; inline ones (main before issue 43) only as
    # the difference of two traces, which carries the noise of both.
    cost = on[2] if on[2] > 0.05 * on[0] else max(on[0] - off[0], 0.0)
    ratio = cost / forward_s
    verdict = "within target" if ratio <= CHECK_RATIO_TARGET else f"OVER {CHECK_RATIO_TARGET:g}x"
    print(
        f"check    {name:9s} trace with check {on[0]:7.2f} s (wall {on[1]:7.2f})  without {off[0]:7.2f} s "
        f"(wall {off[1]:7.2f})  check {cost:7.2f} s = {ratio:5.1f} forwards  {verdict}"
    )
    sys.stdout.flush()


def goto_row() -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "yolov10n.onnx")
        onnx.save(yolov10n(), path)
        c = Clock()
        s = Session.from_onnx(path)
        load = c.lap()
        rec = s.goto(1)
        goto = c.lap()
        numeric = rec.numeric
        check = c.lap()
    verdict = "within target" if goto[0] <= GOTO_TARGET_S else f"OVER the {GOTO_TARGET_S:g} s target"
    print(
        f"goto(1)  yolov10n  from_onnx {load[0]:5.2f} s (wall {load[1]:5.2f})  goto(1) {goto[0]:5.2f} s "
        f"(wall {goto[1]:5.2f})  {verdict}\n         then {check[0]:5.2f} s (wall {check[1]:5.2f}) until "
        f"{rec.path}'s numeric result: {numeric}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-check", action="store_true", help="forward ratios only")
    ap.add_argument("--skip-goto", action="store_true")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    print(f"numpy {np.__version__}, {os.cpu_count()} CPUs visible; medians of {args.repeat} interleaved runs")
    rows = {n: forward_row(n, args.repeat) for n in names}
    if not args.skip_check:
        for n in names:
            check_row(n, *rows[n])
    if not args.skip_goto:
        goto_row()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
