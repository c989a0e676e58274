"""Precision modes on the GPU (issue 11): our graph latency at fp32 / fp16 / bf16 / int8 / fp8
against PyTorch fp32 + CUDA graph, `.half()` + CUDA graph and torch.compile fp16 + CUDA graph,
all in one run, batch 1, on the CNN and transformer benchmark networks (benchmarks/gpu_models.py).

Per model and precision: our graph and eager device latency (median of events around the
program, inputs on the device), the relative RMS error of our output against our fp32 output,
kernels and BLAS calls, and the five slowest steps of the per-kernel breakdown (eager, an event
between every step), which is what says why int8 / fp8 are or are not faster than fp16.

    python3 benchmarks/precision.py --out docs/results/  [--models resnet18_like,transformer]
                                    [--builtins transformer,resnet_block] [--no-compile] [--iters 50]

Writes precision_<device>.json and .md; prints the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_models  # noqa: E402

PRECISIONS = ("fp32", "fp16", "bf16", "int8", "fp8")
DEFAULT_MODELS = {"transformer": {}, "resnet18_like": {"res": 224}}


def rel_rms(got, want) -> float:
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.sqrt(np.mean((g - w) ** 2)) / max(np.sqrt(np.mean(w**2)), 1e-30))


def ours(model, feeds: dict, precision: str, iters: int) -> dict:
    """`model`: an ONNX model (feeds by ONNX input name) or a built-in model name (feeds by parameter)."""
    from migx_explore import models
    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.compiler.onnx.context import param_name
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu import compile_program_ir
    from migx_explore.gpu.executor import CompiledProgram
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.gpu.timing import time_program

    be = get_backend()
    builtin = isinstance(model, str)
    inputs = dict(feeds) if builtin else {param_name(k): v for k, v in feeds.items()}
    opts = CompileOptions(precision=precision, calibration=(inputs,))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source = models.load(model) if builtin else parse_onnx(model)
        program = compile_program_ir(source, opts, backend=be, pass_manager=PassManager(validate=False))
    compile_s = time.perf_counter() - t0
    c = CompiledProgram(program, be)
    try:
        res = time_program(c, modes=("eager", "graph"), warmup=10, iters=iters, inputs=inputs, profile_iters=10)
        out = c.run(inputs, mode="graph")
        ev, gr = res.modes["eager"], res.modes["graph"]
        by_kind: dict[str, float] = {}
        for k in ev.per_kernel:
            by_kind[k.kind] = by_kind.get(k.kind, 0.0) + k.us
        top = sorted(ev.per_kernel, key=lambda k: -k.us)[:6]
        return {
            "compile_s": round(compile_s, 2),
            "graph_us": gr.device_us.median,
            "eager_us": ev.device_us.median,
            "kernels": res.kernels,
            "blas_calls": res.blas_calls,
            "host_ops": list(c.steps.host_ops),
            "us_by_kind": {k: round(v, 1) for k, v in by_kind.items()},
            "top_steps": [(k.instruction, k.kernel[:70], round(k.us, 1)) for k in top],
            "output": np.asarray(out[0], np.float32),
        }
    finally:
        c.close()


def torch_graph_us(fn, xs, iters: int) -> float:
    """Median device microseconds of one CUDA-graph replay of fn(*xs)."""
    import torch

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(5):
            fn(*xs)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        fn(*xs)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    with torch.cuda.stream(stream):
        for _ in range(10):
            graph.replay()
        for _ in range(iters):
            e0.record(stream)
            graph.replay()
            e1.record(stream)
            e1.synchronize()
            t.append(e0.elapsed_time(e1) * 1e3)
    return statistics.median(t)


def _half(net) -> None:
    """OnnxTorch keeps its constants as plain tensors in the node list: cast the float ones."""
    import torch

    for k, (node, args) in enumerate(net.program):
        net.program[k] = (
            node,
            [a.half() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args],
        )


def torch_baselines(model, feeds: dict, iters: int, with_compile: bool) -> dict:
    import torch
    from gpu_onnx_torch import OnnxTorch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out: dict[str, float | str] = {}
    net = OnnxTorch(model)
    xs = [torch.from_numpy(np.ascontiguousarray(feeds[n])).cuda() for n in net.inputs]
    out["torch_fp32_graph_us"] = torch_graph_us(net, xs, iters)
    try:
        _half(net)
        xh = [x.half() if x.is_floating_point() else x for x in xs]
        out["torch_half_graph_us"] = torch_graph_us(net, xh, iters)
        if with_compile:
            import torch._dynamo

            # OnnxTorch dispatches node by node; every op type is its own resume function for
            # dynamo, so the default limit (8) would leave most of the network uncompiled.
            for knob in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
                if hasattr(torch._dynamo.config, knob):
                    setattr(torch._dynamo.config, knob, 100000)
            t0 = time.perf_counter()
            compiled = torch.compile(net.forward)
            compiled(*xh)
            out["torch_compile_s"] = round(time.perf_counter() - t0, 1)
            out["torch_compile_half_graph_us"] = torch_graph_us(compiled, xh, iters)
    except Exception as e:  # noqa: BLE001 - a baseline that cannot run is reported, not fatal
        out["torch_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--builtins", default="transformer,resnet_block", help="built-in models timed too (ours only)")
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    args = ap.parse_args()
    from migx_explore.gpu.runtime import get_backend

    be = get_backend()
    device = be.device_name
    results = {
        "device": device,
        "arch": be.arch,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "iters": args.iters,
        "models": {},
    }
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    slug = "".join(ch if ch.isalnum() else "_" for ch in device).strip("_").lower()
    names = [n for n in args.models.split(",") if n] + [f"builtin:{n}" for n in args.builtins.split(",") if n]
    for name in names:
        if name.startswith("builtin:"):  # a built-in model (the notebook's): ours only, no ONNX for torch
            from migx_explore import models
            from migx_explore.compiler.inputs import random_inputs

            model = name.split(":", 1)[1]
            feeds = random_inputs(models.load(model), seed=1)
        else:
            from gpu_vs_torch import feeds_for

            model = gpu_models.MODELS[name](**DEFAULT_MODELS.get(name, {}))
            feeds = feeds_for(model)
        entry: dict = {"ours": {}}
        ref = None
        for prec in args.precisions.split(","):
            r = ours(model, feeds, prec, args.iters)
            if prec == "fp32":
                ref = r["output"]
            r["rel_rms_vs_fp32"] = rel_rms(r.pop("output"), ref) if ref is not None else None
            entry["ours"][prec] = r
            print(
                f"{name:14s} {prec:5s} graph {r['graph_us']:9.1f} us  eager {r['eager_us']:9.1f} us  "
                f"rel_rms {r['rel_rms_vs_fp32'] or 0:.2e}  compile {r['compile_s']} s",
                flush=True,
            )
        builtin = isinstance(model, str)
        entry["torch"] = {} if builtin else torch_baselines(model, feeds, args.iters, not args.no_compile)
        print(f"{name:14s} torch {entry['torch']}", flush=True)
        entry["ratios"] = ratios(entry)
        for k, v in entry["ratios"].items():
            print(f"{name:14s} {k:40s} {v:6.2f}x", flush=True)
        results["models"][name] = entry
        (outdir / f"precision_{slug}.json").write_text(json.dumps(results, indent=1, default=float))
        (outdir / f"precision_{slug}.md").write_text(report(results))  # after each model: partial runs count
    print(report(results))


def ratios(entry: dict) -> dict[str, float]:
    o, t = entry["ours"], entry["torch"]
    r = {}
    for prec, v in o.items():
        if prec != "fp32" and "fp32" in o:
            r[f"ours {prec} / ours fp32"] = v["graph_us"] / o["fp32"]["graph_us"]
        if prec in ("int8", "fp8") and "fp16" in o:
            r[f"ours {prec} / ours fp16"] = v["graph_us"] / o["fp16"]["graph_us"]
    if "fp32" in o and "torch_fp32_graph_us" in t:
        r["ours fp32 / torch fp32 graph"] = o["fp32"]["graph_us"] / t["torch_fp32_graph_us"]
    if "fp16" in o and "torch_half_graph_us" in t:
        r["ours fp16 / torch .half() graph"] = o["fp16"]["graph_us"] / t["torch_half_graph_us"]
    if "fp16" in o and "torch_compile_half_graph_us" in t:
        r["ours fp16 / torch.compile fp16 graph"] = o["fp16"]["graph_us"] / t["torch_compile_half_graph_us"]
    return r


def report(res: dict) -> str:
    lines = [
        f"# Precision modes on {res['device']} ({res['arch']}), {res['date']}",
        "",
        "Batch 1, graph latency = median device time of one replay (inputs on the device), "
        f"{res['iters']} iterations. Written by `benchmarks/precision.py`; error = relative RMS of "
        "our output against our fp32 output on the calibration feed.",
        "",
    ]
    for name, e in res["models"].items():
        lines += [
            f"## {name}",
            "",
            "| precision | graph us | eager us | rel. RMS vs fp32 | kernels | BLAS | time by step kind (us, eager) |",
            "|---|---|---|---|---|---|---|",
        ]
        for prec, v in e["ours"].items():
            err = v["rel_rms_vs_fp32"]
            lines.append(
                f"| {prec} | {v['graph_us']:.1f} | {v['eager_us']:.1f} | {err:.2e} | {v['kernels']} | "
                f"{v['blas_calls']} | {v['us_by_kind']} |"
            )
        lines += [
            "",
            "PyTorch: "
            + ", ".join(f"{k} = {v:.1f}" if isinstance(v, float) else f"{k} = {v}" for k, v in e["torch"].items()),
            "",
        ]
        lines += ["| ratio | value |", "|---|---|"] + [f"| {k} | {v:.2f}x |" for k, v in e["ratios"].items()]
        lines += ["", "Slowest steps (eager breakdown):", ""]
        for prec in ("fp16", "int8", "fp8"):
            if prec in e["ours"]:
                steps = "; ".join(f"{k} {lab} {us} us" for lab, k, us in e["ours"][prec]["top_steps"])
                lines.append(f"- {prec}: {steps}")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
