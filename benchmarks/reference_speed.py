"""How fast the numpy reference evaluator is, against ONNX Runtime's CPU provider with one thread
(issue 43), and what the per-pass numeric check costs (a benchmark that prints, not a test).

    python benchmarks/reference_speed.py [--models yolov10n,bert,...] [--repeat 5] [--skip-check]

Per exporter-style built-in model (a YOLOv10n-shaped detector, a BERT-style encoder, a GPT-2-style
decoder, a half-width ResNet-18, a bidirectional LSTM), in one process, on the same feeds:

* forward: median wall time of `compiler.ref.evaluate` and of `onnxruntime.InferenceSession.run`
  (CPUExecutionProvider, intra_op_num_threads=1, inter_op_num_threads=1), runs interleaved, and
  their ratio (target <= 3x);
* check: the trace of all five pipelines with the per-pass numeric check inline, minus the same
  trace with the check off, in units of one reference forward (target <= 3x); it counts
  everything the check costs, the reference outputs of the imported program included;
* goto(1): `Session.from_onnx(yolov10n.onnx).goto(1)` with the check on (target <= 0.5 s), and
  how long until the record's numeric result is there when it is asked for.

Targets: issue 43. The machine may be shared: compare figures from one run, not across runs.
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


def interleaved(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Median seconds of each fn, the runs interleaved so a busy moment hits all alike."""
    for fn in fns:
        fn()  # warm-up: caches, lazy imports, ORT's first-run allocations
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return [statistics.median(t) for t in times]


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def forward_row(name: str, repeat: int) -> tuple[float, bytes, dict, dict]:
    build, dims, what = MODELS[name]
    data = build().SerializeToString()
    program = parse_onnx(data, input_dims=dims or None)
    feeds = model_inputs(program, 0)
    sess = ort_session(data)
    ours, theirs = interleaved([lambda: evaluate(program, feeds), lambda: sess.run(None, feeds)], repeat)
    ratio = ours / theirs
    verdict = "within target" if ratio <= FORWARD_RATIO_TARGET else f"OVER {FORWARD_RATIO_TARGET:g}x"
    print(
        f"forward  {name:9s} ours {ours * 1e3:8.1f} ms  ORT 1 thread {theirs * 1e3:7.1f} ms  "
        f"ratio {ratio:6.1f}x  {verdict}   ({what}; {len(program.main)} instructions)"
    )
    sys.stdout.flush()
    return ours, data, dims, feeds


def check_row(name: str, forward_s: float, data: bytes, dims: dict, feeds: dict) -> None:
    """Whole trace with the inline check, minus the whole trace without it, in forwards."""

    def trace(numeric: bool) -> float:
        program = parse_onnx(data, input_dims=dims or None)
        s = Session(program, name=name, numeric=numeric, inputs=feeds if numeric else None)
        t = time.perf_counter()
        tr = s.trace
        for r in tr.top_level():  # a lazy check is paid here, where it is asked for
            _ = r.numeric
        elapsed = time.perf_counter() - t
        if tr.error:
            print(f"  ({name}: trace stopped: {tr.error})")
        return elapsed

    off = trace(False)
    on = trace(True)
    cost = max(on - off, 0.0)
    ratio = cost / forward_s
    verdict = "within target" if ratio <= CHECK_RATIO_TARGET else f"OVER {CHECK_RATIO_TARGET:g}x"
    print(
        f"check    {name:9s} trace with check {on:7.2f} s  without {off:7.2f} s  "
        f"check {cost:7.2f} s = {ratio:6.1f} forwards  {verdict}"
    )
    sys.stdout.flush()


def goto_row() -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "yolov10n.onnx")
        onnx.save(yolov10n(), path)
        t0 = time.perf_counter()
        s = Session.from_onnx(path)
        t1 = time.perf_counter()
        rec = s.goto(1)
        t2 = time.perf_counter()
        numeric = rec.numeric
        t3 = time.perf_counter()
    verdict = "within target" if t2 - t1 <= GOTO_TARGET_S else f"OVER the {GOTO_TARGET_S:g} s target"
    print(
        f"goto(1)  yolov10n  from_onnx {t1 - t0:6.2f} s  goto(1) {t2 - t1:6.2f} s  {verdict}  "
        f"(+ {t3 - t2:5.2f} s until {rec.path}'s numeric result: {numeric})"
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
