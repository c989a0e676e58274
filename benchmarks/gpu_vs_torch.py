"""migx-explore on the GPU against PyTorch, batch 1, fp32 (TF32 off) and, with --fp16, fp16, in one run.

For every built-in example model plus a ResNet-18-like and a YOLO-style network: our eager and
graph latency (device time between events around the program, inputs already on the device),
PyTorch eager and PyTorch CUDA-graph latency of the same network (built from the ONNX graph by
gpu_onnx_torch), kernels launched by each, ratios, our arena against the naive buffer sum, and an
output check against PyTorch. Then two micro-benchmarks (eager dispatch per launch, graph replay
per node, on an empty kernel) and the kernel cache (cold vs warm compile).

With --fp16 every row also runs at half precision: ours compiled with precision="fp16" (the
quantize stage), PyTorch's network converted with .half() (HF modules) or with its float
constants in half (OnnxTorch), fed half inputs, as CUDA graph and torch.compile + CUDA graph;
a second table compares our fp32 and fp16 graphs with the best PyTorch of each precision.

    python3 benchmarks/gpu_vs_torch.py --out results/   [--models resnet18_like,mlp] [--iters 200] [--fp16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_models  # noqa: E402
from gpu_vs_torch_report import report  # noqa: E402


def _as_list(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


CATEGORIES = ("gemm", "gemm epilogue", "attention/softmax", "layernorm/reduction", "pointwise", "other")


def kernel_category(name: str) -> str:
    """A coarse kind for a kernel name, ours (generated symbols, cuBLAS) or PyTorch's."""
    n = name.lower()
    if n.startswith("attention_") or "softmax" in n or "fmha" in n or "flash" in n:
        return "attention/softmax"
    if any(k in n for k in ("gemm", "cutlass", "xmma", "cublas", "matmul")):
        return "gemm"
    if n.startswith("epilogue_"):
        return "gemm epilogue"
    if "layernorm" in n or "layer_norm" in n or n.startswith("fused_reduce") or "triton_per" in n or "triton_red" in n:
        return "layernorm/reduction"
    if "triton_poi" in n or "elementwise" in n:
        return "pointwise"
    return "other"


def kernel_breakdown(fn, sync) -> dict:
    """Device time per kernel of one call of fn (CUPTI, through torch.profiler; graph replays
    included), summed by kernel_category: {category: [count, us]} plus the total."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    out: dict = {}
    total = 0.0
    for e in prof.events():
        if e.device_type.name != "CUDA" or "Memcpy" in e.name or "Memset" in e.name:
            continue
        us = float(getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0))
        c = out.setdefault(kernel_category(e.name), [0, 0.0])
        c[0] += 1
        c[1] = round(c[1] + us, 1)
        total += us
    return {"by_kind": out, "kernel_us": round(total, 1)}


def _kernel_profile(fn, stream) -> tuple[int, list]:
    """(kernels launched by one call of fn, the 8 longest as (name, device us))."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.synchronize()
    kev = [
        e for e in prof.events() if e.device_type.name == "CUDA" and "Memcpy" not in e.name and "Memset" not in e.name
    ]
    dur = [
        (e.name[:60], round(float(getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0)), 1))
        for e in kev
    ]
    return len(kev), sorted(dur, key=lambda x: -x[1])[:8]


def timed(fn, stream, iters: int) -> list[float]:
    import torch

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    with torch.cuda.stream(stream):
        for _ in range(iters):
            e0.record(stream)
            fn()
            e1.record(stream)
            e1.synchronize()
            t.append(e0.elapsed_time(e1) * 1e3)
    return t


def graph_of(fn, stream):
    import torch

    try:
        graph = torch.cuda.CUDAGraph(keep_graph=True)  # keeps the cudaGraph_t for counting nodes
    except TypeError:
        graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = fn()
    torch.cuda.synchronize()
    nodes = -1
    try:  # node count through the driver, when torch exposes the cudaGraph_t
        from cuda.bindings import driver as cu

        nodes = int(cu.cuGraphGetNodes(graph.raw_cuda_graph(), 0)[-1])
    except Exception:  # noqa: BLE001 - older torch
        pass
    return graph, out, nodes


def torch_latency(net, xs: list, iters: int, warmup: int, keep: bool = False) -> dict:
    """PyTorch eager and CUDA-graph latency of `net(*xs)` (inputs already on the device); with
    keep, "_replay" holds (graph, stream, net, xs) for timings interleaved later (issue28_table.py)."""
    import torch

    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(warmup):
            out = net(*xs)
    torch.cuda.synchronize()
    with torch.no_grad():
        eager = timed(lambda: net(*xs), stream, iters)
        enq = []
        with torch.cuda.stream(stream):
            for _ in range(iters):
                t0 = time.perf_counter()
                net(*xs)
                enq.append((time.perf_counter() - t0) * 1e6)
                stream.synchronize()
        graph, gout, nodes = graph_of(lambda: net(*xs), stream)
        replay = timed(graph.replay, stream, iters)
        kernels, top = _kernel_profile(lambda: net(*xs), stream)
    return {
        "eager_us": statistics.median(eager),
        "graph_us": statistics.median(replay),
        "eager_enqueue_us": statistics.median(enq),
        "kernels": kernels,
        "graph_nodes": nodes,
        "top_kernels": top,
        "outputs": [o.float().cpu().numpy() for o in _as_list(out)],
        "graph_outputs": [o.float().cpu().numpy() for o in _as_list(gout)],
        # the graph reads the module's weights and buffers and the inputs by address: they are kept
        # with it (add_compile drops a row's fp16 module copy, whose freed buffers then held
        # garbage position ids by the time issue28_table.py replayed the graph: a device assert)
        **({"_replay": (graph, stream, net, xs)} if keep else {}),
    }


def torch_compiled_latency(net, xs: list, iters: int, warmup: int, keep: bool = False) -> dict:
    """torch.compile (inductor, default mode) of `net`, then the compiled call captured in a CUDA
    graph and replayed: PyTorch's best fp32 latency for one static shape. An OnnxTorch is traced
    into a flat aten graph first (make_fx): dynamo cannot follow its interpreter loop and left it eager."""
    import torch

    t0 = time.perf_counter()
    if hasattr(net, "program"):
        from torch.fx.experimental.proxy_tensor import make_fx

        net = make_fx(net)(*xs)
    compiled = torch.compile(net, dynamic=False)
    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(max(warmup, 3)):
            compiled(*xs)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    with torch.no_grad():
        graph, gout, nodes = graph_of(lambda: compiled(*xs), stream)
        replay = timed(graph.replay, stream, iters)
        kernels, top = _kernel_profile(graph.replay, stream)
        breakdown = kernel_breakdown(graph.replay, torch.cuda.synchronize)
    return {
        "graph_us": statistics.median(replay),
        "compile_s": compile_s,
        "graph_kernel_breakdown": breakdown,
        "graph_nodes": nodes,
        "kernels": kernels,
        "top_kernels": top,
        "outputs": [o.float().cpu().numpy() for o in _as_list(gout)],
        **({"_replay": (graph, stream, compiled, xs)} if keep else {}),  # kept alive with the graph
    }


def ours(model, feeds: dict, iters: int, warmup: int, precision: str = "fp32", keep: bool = False) -> dict:
    """Our eager and graph latency; with keep, the program stays open in "_program" (the caller closes it)."""
    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu import compile_program_ir
    from migx_explore.gpu.executor import CompiledProgram
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.gpu.timing import time_program

    be = get_backend()
    t0 = time.perf_counter()
    program = compile_program_ir(
        parse_onnx(model), CompileOptions(precision=precision), backend=be, pass_manager=PassManager(validate=False)
    )
    compile_s = time.perf_counter() - t0
    c = CompiledProgram(program, be)
    try:
        from migx_explore.compiler.onnx.context import param_name

        inputs = {param_name(k): v for k, v in feeds.items()}
        res = time_program(c, modes=("eager", "graph"), warmup=warmup, iters=iters, inputs=inputs)
        out = c.run(inputs, mode="graph")
        try:
            breakdown = kernel_breakdown(lambda: c.launch_graph(io=False), lambda: c.backend.streams.sync(c.stream))
        except Exception as e:  # noqa: BLE001 - no profiler: the rest still counts
            breakdown = {"error": f"{type(e).__name__}: {e}"}
        by_kind = dispatch_by_kind(c)
        mem = c.memory()
        ev, gr = res.modes["eager"], res.modes["graph"]
        top = sorted(ev.per_kernel, key=lambda k: -k.us)[:8]
        return {
            "compile_s": compile_s,
            "eager_us": ev.device_us.median,
            "eager_p10": ev.device_us.p10,
            "eager_p90": ev.device_us.p90,
            "graph_us": gr.device_us.median,
            "graph_p10": gr.device_us.p10,
            "graph_p90": gr.device_us.p90,
            "host_run_eager_us": ev.host_us.median,
            "host_run_graph_us": gr.host_us.median,
            "eager_enqueue_us": ev.enqueue_us.median,
            "launches": ev.launches,
            "kernels": res.kernels,
            "blas_calls": res.blas_calls,
            "graph_nodes": res.graph_nodes,
            "dispatch_us_per_launch": ev.enqueue_us.median / max(ev.launches, 1),
            "graph_us_per_node": gr.device_us.median / max(res.graph_nodes, 1),
            "arena_bytes": mem.arena_bytes,
            "naive_bytes": mem.naive_bytes,
            "top_kernels": [(k.kernel, round(k.us, 1)) for k in top],
            "outputs": out,
            "dispatch_us_by_kind": by_kind,
            "graph_kernel_breakdown": breakdown,
            **({"_program": c} if keep else {}),
        }
    finally:
        if not keep:
            c.close()


def dispatch_by_kind(c, iters: int = 30) -> dict:
    """Mean host time to enqueue one step, per kind (generated kernel launch, BLAS call)."""
    total: dict[str, list[float]] = {}
    for _ in range(iters):
        for step, info in zip(c.steps.steps, c.steps.info):
            t0 = time.perf_counter()
            step()
            total.setdefault(info.kind, []).append((time.perf_counter() - t0) * 1e6)
        c.backend.streams.sync(c.stream)
    return {k: round(statistics.mean(v), 2) for k, v in total.items()}


def model_list(selected: str | None) -> dict:
    from migx_explore import models

    out = {}
    for name in models.list_models():
        out[name] = lambda n=name: models.get_model(n)
    out["resnet18_like"] = gpu_models.resnet18_like
    out["yolo_style"] = gpu_models.yolo_style
    if selected:
        out = {k: v for k, v in out.items() if k in selected.split(",")}
    return out


def feeds_for(model, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        if dtype.kind in "iu":  # token ids, positions, indices: small values every table holds
            feeds[i.name] = rng.integers(0, 8, dims).astype(dtype)
        elif dtype.kind == "b":
            feeds[i.name] = np.ones(dims, dtype)
        else:
            feeds[i.name] = rng.standard_normal(dims).astype(dtype)
    return feeds


def first_that_works(fn, nets: list) -> tuple[dict, object, list[str]]:
    """fn(net) for the first (label, net) that does not raise: (result, net, notes on failures)."""
    notes = []
    for k, (label, net) in enumerate(nets):
        try:
            res = fn(net)
            if k:
                res["torch_side"] = label
            return res, net, notes
        except Exception as e:  # noqa: BLE001 - e.g. an HF forward that cannot be captured
            notes.append(f"{label}: {type(e).__name__}: {str(e)[:160]}")
    raise RuntimeError("; ".join(notes))


def compare_row(model, feeds: dict, nets: list, xs: list, args) -> dict:
    """Ours against the first torch network in `nets` ((label, module) pairs, all the same
    model: an HF module, then its ONNX export run by PyTorch) that PyTorch can capture."""
    row: dict = {}
    try:
        keep = getattr(args, "keep", False)  # issue28_table.py re-times every side later
        row["ours"] = ours(model, feeds, args.iters, args.warmup, keep=keep)
        row["torch"], net, notes = first_that_works(lambda n: torch_latency(n, xs, args.iters, args.warmup, keep), nets)
        got, want = row["ours"].pop("outputs"), row["torch"].pop("outputs")
        row["_torch_outputs"] = want
        gw = row["torch"].pop("graph_outputs")
        row["max_rel_err_vs_torch"] = max(
            float(np.max(np.abs(g.reshape(w.shape) - w) / (np.abs(w) + 1e-3))) for g, w in zip(got, want)
        )
        row["torch_graph_vs_eager_err"] = max(float(np.max(np.abs(g - w))) for g, w in zip(gw, want))
        o, t = row["ours"], row["torch"]
        row["graph_ratio_vs_torch_graph"] = o["graph_us"] / t["graph_us"]
        row["eager_ratio_vs_torch_eager"] = o["eager_us"] / t["eager_us"]
        row["_nets"] = nets  # for the torch.compile phase, which runs after every other measurement
        if notes:
            row["torch_notes"] = notes
    except Exception as e:  # noqa: BLE001 - one model failing must not lose the others' numbers
        import traceback

        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()[-2000:]
    for part in ("ours", "torch"):
        for k in ("outputs", "graph_outputs"):
            row.get(part, {}).pop(k, None)
    return row


def half_net(net):
    """The fp16 copy of a torch side: an OnnxTorch with half constants, else module.half()."""
    import copy

    return net.to_half() if hasattr(net, "to_half") else copy.deepcopy(net).half()


def half_inputs(xs: list) -> list:
    return [x.half() if x.is_floating_point() else x for x in xs]


def add_fp16(row: dict, model, feeds: dict, nets: list, xs: list, args) -> None:
    """row["fp16"]: our fp16 graph against PyTorch's fp16 network (eager, CUDA graph); the
    torch.compile column follows in add_compile. Errors are relative to PyTorch's fp32 outputs."""
    if "error" in row:
        return
    part: dict = {}
    try:
        keep = getattr(args, "keep", False)
        part["ours"] = ours(model, feeds, args.iters, args.warmup, precision="fp16", keep=keep)
        nets16 = [(label, half_net(n)) for label, n in nets]
        xs16 = half_inputs(xs)
        part["torch"], _, notes = first_that_works(
            lambda n: torch_latency(n, xs16, args.iters, args.warmup, keep), nets16
        )
        want = row["_torch_outputs"]
        got, got_t = part["ours"].pop("outputs"), part["torch"].pop("outputs")
        part["torch"].pop("graph_outputs", None)
        rel = lambda a, b: float(np.max(np.abs(a.reshape(b.shape).astype(np.float32) - b)) / (np.max(np.abs(b)) + 1e-6))  # noqa: E731
        part["ours_err_vs_torch_fp32"] = max(rel(g, w) for g, w in zip(got, want))
        part["torch_err_vs_torch_fp32"] = max(rel(g, w) for g, w in zip(got_t, want))
        part["graph_ratio_vs_torch_graph"] = part["ours"]["graph_us"] / part["torch"]["graph_us"]
        row["_nets16"], row["_xs16"] = nets16, xs16
        if notes:
            part["torch_notes"] = notes
    except Exception as e:  # noqa: BLE001 - keep the fp32 columns
        import traceback

        part["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        part["traceback"] = traceback.format_exc()[-1500:]
    row["fp16"] = part


def add_compile(row: dict, xs: list, args) -> None:
    """torch.compile + CUDA graph for a finished row (kept last: inductor's compile workers load
    the host, and host load shows up in every event-timed latency measured while they run)."""
    nets, keep = row.pop("_nets", None), getattr(args, "keep", False)
    if nets is None or "error" in row:
        return
    nets16, xs16 = row.pop("_nets16", None), row.pop("_xs16", None)
    if nets16 is not None:
        part = row["fp16"]
        try:
            tc16, _, _ = first_that_works(
                lambda n: torch_compiled_latency(n, xs16, args.iters, args.warmup, keep), nets16
            )
            tc16.pop("outputs", None)
            part["torch_compile"] = tc16
            part["graph_ratio_vs_torch_compile"] = part["ours"]["graph_us"] / tc16["graph_us"]
        except Exception as e:  # noqa: BLE001 - keep the other columns
            part["torch_compile"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    try:
        tc, _, notes = first_that_works(lambda n: torch_compiled_latency(n, xs, args.iters, args.warmup, keep), nets)
        row.setdefault("torch_notes", []).extend(notes)
        cw = tc.pop("outputs")
        want = row.pop("_torch_outputs")
        tc["max_abs_err_vs_eager"] = max(float(np.max(np.abs(g - w))) for g, w in zip(cw, want))
        row["torch_compile"] = tc
        row["graph_ratio_vs_torch_compile"] = row["ours"]["graph_us"] / tc["graph_us"]
    except Exception as e:  # noqa: BLE001 - keep the other columns
        row["torch_compile"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    finally:
        try:  # stop inductor's worker pool before anything else is timed
            from torch._inductor import async_compile

            async_compile.shutdown_compile_workers()
        except Exception:  # noqa: BLE001 - older torch
            pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--models", default=None, help="ONNX-built models to run (default: all)")
    ap.add_argument(
        "--transformers", default="bert,gpt2,llama,vit,whisper,convnext", help="HF-config models ('' for none)"
    )
    ap.add_argument(
        "--compile",
        default="bert,gpt2,llama,vit,whisper,convnext,resnet18,transformer",
        help="models that also get the torch.compile + CUDA graph baseline ('all' for every one)",
    )
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--skip-micro", action="store_true")
    ap.add_argument("--fp16", action="store_true", help="also run every row at fp16 (ours and PyTorch's)")
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "models": {}}
    compiled = set(args.compile.split(",")) if args.compile != "all" else None

    def record(name: str, row: dict) -> None:
        results["models"][name] = row
        shown = {k: v for k, v in row.items() if k != "traceback" and not k.startswith("_")}
        print(name, json.dumps(shown, default=str)[:1500], flush=True)
        (out_dir / "gpu_vs_torch.json").write_text(json.dumps(_public(results), indent=1, default=str))

    pending: list = []
    if args.transformers:
        from gpu_transformers import transformer_cases

        for case in transformer_cases(args.transformers.split(",")):
            with torch.no_grad():
                xs = [torch.from_numpy(np.ascontiguousarray(case.feeds[n])).cuda() for n in case.feeds]
            nets = [("HF module", case.torch_module)]
            if case.source == "hf":
                from gpu_onnx_torch import OnnxTorch

                try:
                    nets.append(("OnnxTorch of the export", OnnxTorch(case.model)))
                except Exception as e:  # noqa: BLE001 - the HF module alone then
                    print(f"{case.name}: no OnnxTorch fallback: {type(e).__name__}: {e}", flush=True)
            row = compare_row(case.model, case.feeds, nets, xs, args)
            if args.fp16:
                add_fp16(row, case.model, case.feeds, nets, xs, args)
            row["source"], row["note"] = case.source, case.note
            pending.append((case.name, row, xs))
            record(case.name, row)
    for name, build in model_list(args.models).items():
        from gpu_onnx_torch import OnnxTorch

        model = build()
        feeds = feeds_for(model)
        try:
            net = OnnxTorch(model)
            xs = [torch.from_numpy(np.ascontiguousarray(feeds[n])).cuda() for n in net.inputs]
        except Exception as e:  # noqa: BLE001
            record(name, {"error": f"torch side: {type(e).__name__}: {e}"})
            continue
        row = compare_row(model, feeds, [("OnnxTorch", net)], xs, args)
        if args.fp16:
            add_fp16(row, model, feeds, [("OnnxTorch", net)], xs, args)
        pending.append((name, row, xs))
        record(name, row)
    for name, row, xs in pending:
        if compiled is None or name in compiled:
            add_compile(row, xs, args)
        for k in ("_nets", "_torch_outputs", "_nets16", "_xs16"):
            row.pop(k, None)
        record(name, row)
    if not args.skip_micro:
        from gpu_micro import cache_speedup, micro

        results["micro"] = micro()
        results["kernel_cache"] = cache_speedup()
    (out_dir / "gpu_vs_torch.json").write_text(json.dumps(_public(results), indent=1, default=str))
    print(report(results))
    (out_dir / "gpu_vs_torch.md").write_text(report(results))


def _public(results: dict) -> dict:
    """results without the working fields (torch modules, reference outputs) of pending rows."""
    models = {n: {k: v for k, v in row.items() if not k.startswith("_")} for n, row in results["models"].items()}
    return {**results, "models": models}


if __name__ == "__main__":
    main()
