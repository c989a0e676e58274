"""Per-kernel device time of one CUDA graph replay, ours against torch.compile + CUDA graph, for
the transformer cases and issue 28's other rows (resnet18, yolov10n, bilstm, ...) at one
precision: the table that says which kernels to work on.

    python benchmarks/gpu_kernel_profile.py --models bert,gpt2,resnet18,bilstm --precision fp16 --out DIR

Each side's kernels are listed in launch order with their CUPTI device time (torch.profiler), and
the totals are printed beside the graph latency (median of --iters event-timed replays), so the
gap between the kernels' sum and the latency (launch and dependency gaps) shows too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def kernel_list(fn, sync) -> list[tuple[str, float, float]]:
    """(name, device us, idle us before it) of each device activity one call of fn runs, in start
    order (CUPTI). Memsets and copies are listed too (as "[memset] ..."): a library call that adds
    one to the graph shows up here instead of hiding in the gaps."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    kev = [e for e in prof.events() if e.device_type.name == "CUDA"]
    kev.sort(key=lambda e: e.time_range.start)
    out, last_end = [], None
    for e in kev:
        start, end = e.time_range.start, e.time_range.end
        idle = 0.0 if last_end is None else max(0.0, float(start - last_end))
        last_end = end if last_end is None else max(last_end, end)
        tag = "[memset] " if "Memset" in e.name else "[copy] " if "Memcpy" in e.name else ""
        out.append((tag + e.name[:90], round(float(e.device_time_total), 2), round(idle, 2)))
    return out


def ours_profile(model, feeds: dict, precision: str, iters: int) -> dict:
    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.compiler.onnx.context import param_name
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu import compile_program_ir
    from migx_explore.gpu.executor import CompiledProgram
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.gpu.timing import time_program

    be = get_backend()
    program = compile_program_ir(
        parse_onnx(model), CompileOptions(precision=precision), backend=be, pass_manager=PassManager(validate=False)
    )
    c = CompiledProgram(program, be)
    try:
        inputs = {param_name(k): v for k, v in feeds.items()}
        res = time_program(c, modes=("graph",), warmup=10, iters=iters, inputs=inputs)
        c.run(inputs, mode="graph")
        kernels = kernel_list(lambda: c.launch_graph(io=False), lambda: c.backend.streams.sync(c.stream))
        return {"graph_us": res.modes["graph"].device_us.median, "kernels": kernels}
    finally:
        c.close()


def torch_compile_profile(net, xs: list, iters: int) -> dict:
    import torch
    from gpu_vs_torch import graph_of, timed

    compiled = torch.compile(net, dynamic=False)
    stream = torch.cuda.Stream()
    with torch.no_grad():
        with torch.cuda.stream(stream):
            for _ in range(3):
                compiled(*xs)
        torch.cuda.synchronize()
        graph, _, _ = graph_of(lambda: compiled(*xs), stream)
        replay = timed(graph.replay, stream, iters)
        kernels = kernel_list(graph.replay, torch.cuda.synchronize)
    return {"graph_us": statistics.median(replay), "kernels": kernels}


def report(name: str, ours: dict, theirs: dict) -> str:
    lines = [f"## {name}", ""]
    for side, r in (("ours", ours), ("torch.compile", theirs)):
        ks = r["kernels"]
        total = sum(k[1] for k in ks)
        lines.append(
            f"{side}: graph {r['graph_us']:.1f} us, {len(ks)} kernels summing to {total:.1f} us "
            f"(gaps {r['graph_us'] - total:.1f} us)"
        )
        for kname, us, idle in ks:
            lines.append(f"    {us:8.2f}  (after {idle:5.2f} idle)  {kname}")
        lines.append("")
    return "\n".join(lines)


def _cases(names: list[str]):
    """(name, ONNX model, feeds, torch module, torch inputs) per name: the transformer cases as
    gpu_transformers builds them, every other row as issue28_table builds it (its first torch net)."""
    import torch
    from gpu_export_kinds import BUILDERS as MORE_KINDS
    from gpu_transformers import transformer_cases
    from issue28_table import HF, build_case

    whole = set(HF) | set(MORE_KINDS)  # built by gpu_transformers (swin, t5, vae included)
    for case in transformer_cases([n for n in names if n in whole]):
        xs = [torch.from_numpy(np.ascontiguousarray(case.feeds[n])).cuda() for n in case.feeds]
        yield case.name, case.model, case.feeds, case.torch_module, xs
    for name in (n for n in names if n not in whole):
        case = build_case(name)
        yield name, case.model, case.feeds, case.nets[0][1], case.xs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert,gpt2,llama")
    ap.add_argument("--precision", default="fp16", choices=("fp32", "fp16"))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--out", default="bench_out")
    args = ap.parse_args()
    import torch
    from gpu_vs_torch import half_inputs, half_net

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"device": torch.cuda.get_device_name(), "precision": args.precision, "models": {}}
    text = [f"# Per-kernel profile, {args.precision}, {results['device']}", ""]
    for name, model, feeds, net, xs in _cases(args.models.split(",")):
        if args.precision == "fp16":
            net, xs = half_net(net), half_inputs(xs)
        ours = ours_profile(model, feeds, args.precision, args.iters)
        theirs = torch_compile_profile(net, xs, args.iters)
        results["models"][name] = {"ours": ours, "torch_compile": theirs}
        text.append(report(name, ours, theirs))
        print(text[-1], flush=True)
    (out / "kernel_profile.json").write_text(json.dumps(results, indent=1))
    (out / "kernel_profile.md").write_text("\n".join(text))


if __name__ == "__main__":
    main()
