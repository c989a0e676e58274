"""Issue 28's whole table in one process on one GPU: every row at fp32 and fp16, our graph against
PyTorch's CUDA graph and torch.compile + CUDA graph of the same network, kernel counts, errors.

Rows (--rows picks some; the names below):
    resnet18   ResNet-18 layout at half width (32..256 channels), 224², the built-in ONNX graph
    convnext   HF ConvNextModel (widths 32..256, depths 1/1/3/1, 128²)      } gpu_transformers.py:
    bert       HF BertModel (hidden 256, 4 layers, seq 128, padding mask)   } built from configs
    gpt2       HF GPT2Model (d 128, 4 layers, seq 128)                      } and exported; torch
    llama      HF LlamaModel (hidden 128, 4 layers, GQA 4/2 heads, seq 64)  } runs the HF module
    vit        HF ViTModel (hidden 192, 4 layers, 224²)                     }
    whisper    HF WhisperEncoder (d 128, 2 layers, 80 x 512 frames)         }
    decode     gpt2_decode's step at P=127 (decode.py): ours the exact-P program and the bucketed
               decoder step (in-place cache); torch the plain module (decode.native_torch)
    bilstm     2-layer biLSTM, seq 32; torch: cuDNN nn.LSTM with the model's weights
    yolov10n   YOLOv10n-shaped detector with top-k post-processing; torch: OnnxTorch of the model

Phases: (A) per row, ours (gpu_vs_torch.ours) and PyTorch eager + CUDA graph at fp32 and fp16
(gpu_vs_torch.compare_row / add_fp16), every program and graph kept open; (B) torch.compile +
CUDA graph for every row (add_compile), its worker pool shut down after; (C) per row, our graph,
torch's graph and torch.compile's graph re-timed in interleaved rounds (issue28_report), the
headline; then the row's objects are freed. Results are written after every phase and row, so a
run cut short keeps what finished.

    python3 benchmarks/issue28_table.py --out results/ [--rows bert,yolov10n] [--rounds 10 --per-round 50]

--isolate runs each row in a process of its own (the same phases inside it) and merges their
results into one table. Two of our BLAS-using programs alive together, closed while torch is
loaded in the process, made the next program's first graph replay fail
(CUDA_ERROR_ILLEGAL_ADDRESS / INVALID_ADDRESS_SPACE, H100 and H200); one such program per
model, programs without BLAS calls, or programs left open ran clean. The cause is not found
(docs/results/issue28_2026-11-27c.md), and a process per row keeps it out of the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from issue28_report import detection_errors, interleave, markdown, strip_private, summarize  # noqa: E402

ROWS = ("resnet18", "convnext", "bert", "gpt2", "decode", "llama", "vit", "whisper", "bilstm", "yolov10n")
LABELS = {
    "resnet18": "ResNet-18 (half width)",
    "convnext": "ConvNeXt (small config)",
    "bert": "BERT (h256 L4 seq128)",
    "gpt2": "GPT-2 (d128 L4 seq128)",
    "decode": "GPT-2 decode step P=127",
    "llama": "Llama (h128 L4 GQA 4/2 seq64)",
    "vit": "ViT (h192 L4 224)",
    "whisper": "Whisper encoder (d128 L2)",
    "bilstm": "LSTM tagger (2-layer biLSTM seq32)",
    "yolov10n": "YOLO-style detector (yolov10n)",
}
HF = ("convnext", "bert", "gpt2", "llama", "vit", "whisper")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out", help="folder for issue28_table.md and issue28_table.json")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"rows to run (default all: {','.join(ROWS)})")
    ap.add_argument("--iters", type=int, default=50, help="phase A samples per side (the headline is phase C)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds (phase C)")
    ap.add_argument("--per-round", type=int, default=50, help="graph replays per side per round")
    ap.add_argument("--no-fp16", action="store_true", help="fp32 only")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (phase B)")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=360.0,
        help="phase B compiles no further row once this many seconds have passed (phase C still runs)",
    )
    ap.add_argument("--isolate", action="store_true", help="each row in a process of its own, merged into one table")
    args = ap.parse_args(argv)
    args.rows = [r for r in args.rows.split(",") if r]
    unknown = [r for r in args.rows if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown} (known: {', '.join(ROWS)})")
    args.keep = True  # gpu_vs_torch's helpers keep programs and graphs open for phase C
    return args


class Case:
    """One row's network: our ONNX model and feeds, the torch sides ((label, module) pairs, the
    first that PyTorch can capture is used) and their inputs on the device."""

    def __init__(self, model, feeds: dict, nets: list, xs: list, note: str = ""):
        self.model, self.feeds, self.nets, self.xs, self.note = model, feeds, nets, xs, note


def _cuda(feeds: dict, names) -> list:
    import torch

    return [torch.from_numpy(np.ascontiguousarray(feeds[n])).cuda() for n in names]


def build_case(name: str) -> Case:
    from gpu_onnx_torch import OnnxTorch
    from gpu_vs_torch import feeds_for

    from migx_explore import models

    if name in HF:
        from gpu_transformers import transformer_cases

        (case,) = transformer_cases([name])
        nets, note = [("HF module" if case.source == "hf" else "OnnxTorch", case.torch_module)], case.note
        if case.source == "hf":
            try:  # the fallback where PyTorch cannot capture the HF module
                nets.append(("OnnxTorch of the export", OnnxTorch(case.model)))
            except Exception as e:  # noqa: BLE001 - the HF module alone then
                note = f"{note} no OnnxTorch fallback: {type(e).__name__}: {str(e)[:150]}".strip()
        return Case(case.model, case.feeds, nets, _cuda(case.feeds, case.feeds), note)
    if name == "decode":
        from decode import native_torch, pinned_model

        from migx_explore.models.gpt2_decode import decode_feed

        model = pinned_model(127, 1)
        feeds = decode_feed(127, 1)
        names = [i.name for i in model.graph.input if i.name in feeds]
        nets = [("plain module", native_torch(model)), ("OnnxTorch", OnnxTorch(model))]
        return Case(model, feeds, nets, _cuda(feeds, names), "ours: exact P=127 program (decode.py's exact row)")
    if name == "bilstm":
        from gpu_issue28_rows import lstm_module

        model = models.get_model("bilstm")
        feeds = feeds_for(model)
        return Case(model, feeds, [("cuDNN nn.LSTM", lstm_module(model))], _cuda(feeds, feeds))
    if name == "resnet18":
        from migx_explore.models.cnn import resnet18

        model = resnet18(width=32)
    else:
        model = models.get_model(name)
    feeds = feeds_for(model) if name != "yolov10n" else {"images": _image(640)}
    net = OnnxTorch(model)
    return Case(model, feeds, [("OnnxTorch", net)], _cuda(feeds, net.inputs))


def _image(size: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(0, 1, (1, 3, size, size)).astype(np.float32)


def _our_inputs(case: Case) -> dict:
    from migx_explore.compiler.onnx.context import param_name

    return {param_name(k): v for k, v in case.feeds.items()}


def add_detection(row: dict, case: Case) -> None:
    """Selection-aware errors of the detector (issue28_report.detection_errors) against PyTorch
    fp32: ours fp32 and fp16 (re-run from the kept programs), PyTorch's own fp16 (eager), and the
    top-k launches' own µs (ours, eager per-kernel times)."""
    want = row["_torch_outputs"][0]
    det = {}
    for side, part in (("ours fp32", row), ("ours fp16", row.get("fp16", {}))):
        prog = part.get("ours", {}).get("_program")
        if prog is not None:
            det[side] = detection_errors(prog.run(_our_inputs(case), mode="graph")[0], want)
            det[side]["topk_us"] = [t for k, t in part["ours"]["top_kernels"] if k.startswith("topk")]
    if row.get("_nets16"):
        import torch

        with torch.no_grad():
            got = row["_nets16"][0][1](*row["_xs16"])
        det["torch fp16"] = detection_errors((got[0] if isinstance(got, list) else got).float().cpu().numpy(), want)
    row["detection"] = det


def add_decode_step(row: dict, precisions: list[str]) -> None:
    """The bucketed decoder step (bucket 128, cache in place: decode.py's headline program) as an
    extra side of the decode row, kept open for phase C."""
    from decode import dec_bucket

    from migx_explore.decode import decoder
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend

    row["extra_sides"] = {"ours_step": "ours bucketed decoder step (bucket 128, in-place cache)"}
    for prec in precisions:
        part = row if prec == "fp32" else row.get("fp16")
        if not part or "error" in part:
            continue
        try:
            dec = decoder("gpt2_decode", target="gpu", backend=get_backend(), options=CompileOptions(precision=prec))
            part["_step"] = (dec, None)
            dec.step(np.array([[7]], np.int64), 127, "graph")  # compiles, warms up eagerly, captures
            part["_step"] = (dec, dec._program(1, dec_bucket(dec, 127)))  # the program that step ran
        except Exception as e:  # noqa: BLE001 - the exact-P program still stands for the row
            row.setdefault("torch_notes", []).append(f"bucketed step {prec}: {type(e).__name__}: {str(e)[:200]}")


def phase_a(name: str, args) -> tuple[dict, Case | None]:
    from gpu_vs_torch import add_fp16, compare_row

    try:
        case = build_case(name)
    except Exception as e:  # noqa: BLE001 - one row failing must not lose the others
        why = f"build: {type(e).__name__}: {str(e)[:400]}"
        return {"label": LABELS[name], "error": why, "traceback": traceback.format_exc()[-1500:]}, None
    row = compare_row(case.model, case.feeds, case.nets, case.xs, args)
    if not args.no_fp16:
        add_fp16(row, case.model, case.feeds, case.nets, case.xs, args)
    extra = {
        "yolov10n": lambda: add_detection(row, case),
        "decode": lambda: add_decode_step(row, ["fp32"] + ([] if args.no_fp16 else ["fp16"])),
    }.get(name)
    try:
        if extra is not None:
            extra()
    except Exception as e:  # noqa: BLE001 - keep the row's other columns
        row.setdefault("torch_notes", []).append(f"{name} extra: {type(e).__name__}: {str(e)[:200]}")
    row["label"], row["note"] = LABELS[name], case.note
    return row, case


def timers_of(part: dict) -> dict:
    """The interleaved sides of one precision of a row: whatever phases A and B kept open."""
    from gpu_vs_torch import timed

    from migx_explore.gpu.timing import graph_replay_us

    out = {}
    prog = part.get("ours", {}).get("_program")
    if prog is not None:
        out["ours"] = lambda n, p=prog: graph_replay_us(p, n)
    if part.get("_step", (None, None))[1] is not None:
        out["ours_step"] = lambda n, p=part["_step"][1]: graph_replay_us(p, n)
    for side, key in (("torch_graph", "torch"), ("torch_compile", "torch_compile")):
        rep = part.get(key, {}).get("_replay")
        if rep is not None:
            out[side] = lambda n, g=rep[0], s=rep[1]: timed(g.replay, s, n)
    return out


def phase_c(row: dict, args) -> None:
    for part in (row, row.get("fp16")):
        if not part:  # a part whose torch side failed still times ours alone
            continue
        try:
            timers = timers_of(part)
            if "ours" in timers:
                samples = interleave(timers, args.rounds, args.per_round, args.warmup)
                part["interleaved"] = summarize(samples)
        except Exception as e:  # noqa: BLE001 - keep phase A's numbers
            part["interleaved"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def release(row: dict) -> None:
    """Close the row's programs and drop its graphs, modules and inputs (bounded memory)."""
    import torch

    for part in (row, row.get("fp16") or {}):
        prog = part.get("ours", {}).pop("_program", None)
        dec = part.pop("_step", (None, None))[0]
        for obj in (prog, dec):
            try:
                if obj is not None:
                    obj.close()
            except Exception as e:  # noqa: BLE001 - report it, free the rest
                row.setdefault("torch_notes", []).append(f"close: {type(e).__name__}: {str(e)[:200]}")
        for key in ("torch", "torch_compile"):
            part.get(key, {}).pop("_replay", None)
    for k in [k for k in row if k.startswith("_")]:
        row.pop(k)
    gc.collect()
    torch.cuda.empty_cache()


def write(results: dict, out: Path) -> None:
    (out / "issue28_table.json").write_text(json.dumps(strip_private(results), indent=1, default=str))
    (out / "issue28_table.md").write_text(markdown(strip_private(results)))


def child_argv(argv: list[str]) -> list[str]:
    """The options a row's own process gets: all but --rows, --out and --isolate."""
    out, skip = [], False
    for tok in argv:
        if skip:
            skip = False
        elif tok in ("--rows", "--out"):
            skip = True
        elif tok != "--isolate" and not tok.startswith(("--rows=", "--out=")):
            out.append(tok)
    return out


def run_isolated(args: argparse.Namespace, argv: list[str], out: Path, run=None) -> dict:
    """Every row through `python issue28_table.py --rows ROW` in a fresh process, results merged
    (and written) after each; a process that wrote nothing becomes a failed row with its exit
    status and the end of its output. `run` (tests) replaces subprocess.run."""
    import subprocess
    import tempfile

    run = run or subprocess.run
    results: dict = {"rows": {}, "args": {k: v for k, v in vars(args).items() if k != "keep"}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.rows:
            sub = Path(tmp) / name
            cmd = [sys.executable, str(Path(__file__).resolve()), *child_argv(argv), "--rows", name, "--out", str(sub)]
            proc = run(cmd, capture_output=True, text=True)
            try:
                part = json.loads((sub / "issue28_table.json").read_text())
            except (OSError, ValueError):
                tail = (proc.stdout + proc.stderr)[-600:]
                results["rows"][name] = {"label": LABELS[name], "error": f"process exited {proc.returncode}: {tail}"}
            else:
                for key in ("device", "torch"):
                    results.setdefault(key, part.get(key))
                results["rows"][name] = part["rows"][name]
            print(name, "done in its own process", flush=True)
            write(results, out)
    return results


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.isolate:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        print(markdown(strip_private(run_isolated(args, argv, out))))
        return
    try:
        import torch
    except ImportError:
        raise SystemExit("issue28_table.py needs PyTorch (with CUDA) on this machine: no module named torch") from None
    if not torch.cuda.is_available():
        raise SystemExit("issue28_table.py needs a CUDA GPU: torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": {}}
    results["args"] = {k: v for k, v in vars(args).items() if k != "keep"}
    phases: dict[str, float] = {}

    def done(phase: str, name: str) -> None:
        results["elapsed_s"] = phases[phase] = round(time.perf_counter() - t0, 1)
        results["phases"] = ", ".join(f"phase {k} to {v:.0f} s" for k, v in phases.items()) + f" (last: {name})"
        write(results, out)

    cases: dict[str, Case | None] = {}
    for name in args.rows:
        row, cases[name] = phase_a(name, args)
        results["rows"][name] = row
        print(name, "A", json.dumps(strip_private(row), default=str)[:600], flush=True)
        done("A", name)
    for name in args.rows:  # B: inductor's workers load the host; nothing else is timed meanwhile
        row, case = results["rows"][name], cases[name]
        if case is None or args.no_compile:
            continue
        if time.perf_counter() - t0 > args.budget_s:
            for part in (row, row.get("fp16")):
                if part and "error" not in part:
                    part["torch_compile"] = {"error": f"skipped: past --budget-s {args.budget_s:.0f}"}
            continue
        from gpu_vs_torch import add_compile

        try:
            add_compile(row, case.xs, args)
        except Exception as e:  # noqa: BLE001 - the other rows still compile
            row["torch_compile"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        done("B", name)
    for name in args.rows:
        row = results["rows"][name]
        try:
            phase_c(row, args)
        finally:
            release(row)
            cases[name] = None
        print(name, "C", json.dumps(strip_private(row.get("interleaved", {})), default=str)[:400], flush=True)
        done("C", name)
    print(markdown(strip_private(results)))


if __name__ == "__main__":
    main()
