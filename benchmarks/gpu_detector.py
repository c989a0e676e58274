"""A YOLOv10n-style end-to-end detector (the built-in `yolo_e2e` at 640, 80 classes, 300
detections: DFL head plus the NMS-free TopK / GatherElements / GatherND post-processing) on the
GPU against PyTorch eager of the same network, batch 1, fp32, TF32 off, in one run.

Reports our eager and graph latency (device time between events, inputs on the device), the
graph pieces (one segment when every op runs on the device), PyTorch eager latency and kernel
count (profiler), the ratios against the targets (graph <= 0.15x PyTorch eager, fewer launches
than PyTorch, eager dispatch <= 4 us per launch, graph replay <= 1 us per node on an empty-kernel
chain), our slowest kernels, and how far our detections are from PyTorch's.

    python3 benchmarks/gpu_detector.py --out results/   [--iters 200] [--size 640]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGETS = {"graph_vs_torch_eager": 0.15, "dispatch_us_per_launch": 4.0, "replay_us_per_node": 1.0}


def detector(size: int):
    from migx_explore.models.yolo_e2e import yolo_e2e

    return yolo_e2e(size=size, classes=80, max_det=300, width=16)


def ours(model, feeds: dict, iters: int, warmup: int) -> dict:
    from migx_explore import gpu
    from migx_explore.compiler.onnx.context import param_name
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu.executor import CompiledProgram
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.gpu.timing import time_program

    be = get_backend()
    t0 = time.perf_counter()
    program = gpu.lower(model, backend=be, pass_manager=PassManager(validate=False))
    compile_s = time.perf_counter() - t0
    with CompiledProgram(program, be) as c:
        inputs = {param_name(k): v for k, v in feeds.items()}
        res = time_program(c, modes=("eager", "graph"), warmup=warmup, iters=iters, inputs=inputs)
        out = c.run(inputs, mode="graph")
        from gpu_vs_torch import dispatch_by_kind

        by_kind = dispatch_by_kind(c)
        ev, gr = res.modes["eager"], res.modes["graph"]
        top = sorted(ev.per_kernel, key=lambda k: -k.us)[:12]
        by_op: dict[str, float] = {}
        for k in ev.per_kernel:
            by_op[k.kernel.split("_kernel")[0]] = by_op.get(k.kernel.split("_kernel")[0], 0.0) + k.us
        return {
            "compile_s": compile_s,
            "eager_us": ev.device_us.median,
            "graph_us": gr.device_us.median,
            "graph_p10": gr.device_us.p10,
            "graph_p90": gr.device_us.p90,
            "eager_enqueue_us": ev.enqueue_us.median,
            "launches": ev.launches,
            "kernels": res.kernels,
            "blas_calls": res.blas_calls,
            "graph_nodes": res.graph_nodes,
            "graph_segments": res.graph_segments,
            "segment_nodes": res.segment_nodes,
            "host_gaps": res.host_gaps,
            "graph_launches": gr.launches,
            "dispatch_us_per_launch": ev.enqueue_us.median / max(ev.launches, 1),
            "dispatch_us_by_kind": by_kind,
            "host_ops": list(c.steps.host_ops),
            "top_kernels": [(k.instruction, k.kernel, round(k.us, 1)) for k in top],
            "us_by_kernel_family": dict(sorted(((k, round(v, 1)) for k, v in by_op.items()), key=lambda x: -x[1])[:12]),
            "outputs": out,
        }


def torch_eager(model, feeds: dict, iters: int, warmup: int) -> dict:
    import torch
    from gpu_onnx_torch import OnnxTorch
    from torch.profiler import ProfilerActivity, profile

    net = OnnxTorch(model)
    xs = [torch.from_numpy(np.ascontiguousarray(feeds[n])).cuda() for n in net.inputs]
    stream = torch.cuda.Stream()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            out = net(*xs)
        for _ in range(iters):
            e0.record(stream)
            out = net(*xs)
            e1.record(stream)
            e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1e3)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.cuda.stream(stream):
            net(*xs)
        torch.cuda.synchronize()
    kev = [
        e for e in prof.events() if e.device_type.name == "CUDA" and "Memcpy" not in e.name and "Memset" not in e.name
    ]
    dur = sorted(
        ((e.name[:60], round(float(getattr(e, "device_time_total", 0) or 0), 1)) for e in kev), key=lambda x: -x[1]
    )[:8]
    return {
        "eager_us": statistics.median(times),
        "kernels": len(kev),
        "top_kernels": dur,
        "outputs": [o.float().cpu().numpy() for o in out],
    }


def torch_replay_per_node(n: int = 300, iters: int = 50) -> float:
    """PyTorch CUDA-graph replay cost per node on a chain of tiny ops (the same measure as ours)."""
    import torch

    x = torch.zeros(1, device="cuda")
    stream = torch.cuda.Stream()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cost = {}
    with torch.cuda.stream(stream):
        for count in (1, n):
            for _ in range(3):
                x.add_(1)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                for _ in range(count):
                    x.add_(1)
            times = []
            for _ in range(iters):
                e0.record(stream)
                g.replay()
                e1.record(stream)
                e1.synchronize()
                times.append(e0.elapsed_time(e1) * 1e3)
            cost[count] = statistics.median(times)
    return (cost[n] - cost[1]) / (n - 1)


def compare(ours_out: np.ndarray, torch_out: np.ndarray) -> dict:
    """Detections [1, 300, 6] (x1 y1 x2 y2 score label): scores in rank order, and how many rows agree."""
    a, b = ours_out.reshape(-1, 6), torch_out.reshape(-1, 6)
    same = np.all(np.isclose(a, b, rtol=1e-3, atol=1e-2), axis=1)
    return {
        "max_score_diff": float(np.max(np.abs(a[:, 4] - b[:, 4]))),
        "rows_equal": int(same.sum()),
        "rows": int(len(a)),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = detector(args.size)
    rng = np.random.default_rng(0)
    feeds = {"images": rng.uniform(0, 1, (1, 3, args.size, args.size)).astype(np.float32)}
    r: dict = {"device": torch.cuda.get_device_name(), "torch_version": torch.__version__, "size": args.size}
    r["ours"] = ours(model, feeds, args.iters, args.warmup)
    r["torch"] = torch_eager(model, feeds, args.iters, args.warmup)
    r["agreement"] = compare(r["ours"].pop("outputs")[0], r["torch"].pop("outputs")[0])
    try:
        from gpu_micro import micro

        r["micro"] = micro()
    except Exception as e:  # noqa: BLE001 - the micro-benchmark is secondary
        r["micro"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        r["micro"]["torch_graph_us_per_node"] = torch_replay_per_node()
    except Exception as e:  # noqa: BLE001
        r["micro"]["torch_error"] = f"{type(e).__name__}: {e}"
    o, t = r["ours"], r["torch"]
    r["graph_vs_torch_eager"] = o["graph_us"] / t["eager_us"]
    r["launches_vs_torch_kernels"] = (o["kernels"] + o["blas_calls"]) / max(t["kernels"], 1)
    (out_dir / "gpu_detector.json").write_text(json.dumps(r, indent=1, default=str))
    text = report(r)
    print(text)
    (out_dir / "gpu_detector.md").write_text(text + "\n")


def report(r: dict) -> str:
    o, t, m = r["ours"], r["torch"], r.get("micro", {})
    ok = lambda v, target: "met" if v <= target else "missed"  # noqa: E731
    lines = [
        f"# YOLOv10n-style end-to-end detector, {r['size']}x{r['size']}, batch 1, fp32, TF32 off",
        f"device: {r['device']}, torch {r['torch_version']}; median device us (inputs on the device)",
        "",
        "| | ours eager | ours graph | PyTorch eager |",
        "|---|---|---|---|",
        f"| latency us | {o['eager_us']:.1f} | {o['graph_us']:.1f} [{o['graph_p10']:.1f}, {o['graph_p90']:.1f}] "
        f"| {t['eager_us']:.1f} |",
        f"| launches | {o['launches']} ({o['kernels']} kernels + {o['blas_calls']} BLAS) | "
        f"{o['graph_launches']} graph launch(es), {o['graph_nodes']} nodes | {t['kernels']} kernels |",
        "",
        f"- graph mode: {o['graph_segments']} segment(s), nodes {o['segment_nodes']}, host gaps "
        f"{o['host_gaps'] or 'none'}; host steps after lowering: {o['host_ops'] or 'none'}",
        f"- graph / PyTorch eager: **{r['graph_vs_torch_eager']:.3f}x** (target <= "
        f"{TARGETS['graph_vs_torch_eager']}: {ok(r['graph_vs_torch_eager'], TARGETS['graph_vs_torch_eager'])})",
        f"- our launches / PyTorch kernels: {r['launches_vs_torch_kernels']:.2f} (target < 1)",
        f"- eager dispatch: {o['dispatch_us_per_launch']:.2f} us per launch (target <= "
        f"{TARGETS['dispatch_us_per_launch']}: "
        f"{ok(o['dispatch_us_per_launch'], TARGETS['dispatch_us_per_launch'])}); mean enqueue per step by kind: "
        f"{o['dispatch_us_by_kind']}",
    ]
    if "graph_us_per_node" in m:
        lines.append(
            f"- graph replay (empty-kernel chain): {m['graph_us_per_node']:.3f} us per node (target <= "
            f"{TARGETS['replay_us_per_node']}: {ok(m['graph_us_per_node'], TARGETS['replay_us_per_node'])}); "
            f"eager enqueue {m['eager_enqueue_us_per_launch']:.2f} us per launch; PyTorch CUDA graph on "
            f"the same kind of chain: {m.get('torch_graph_us_per_node', float('nan')):.3f} us per node"
        )
    a = r["agreement"]
    lines += [
        f"- detections vs PyTorch: {a['rows_equal']}/{a['rows']} rows equal, max score difference "
        f"{a['max_score_diff']:.1e}",
        f"- compile (lowering, kernels from a cold cache): {o['compile_s']:.1f} s",
        "",
        "our slowest kernels (eager, us):",
        "",
    ]
    lines += [f"    {ins:28} {k[:50]:50} {us:8.1f}" for ins, k, us in o["top_kernels"]]
    lines += ["", "PyTorch's slowest kernels (us):", ""]
    lines += [f"    {k:60} {us:8.1f}" for k, us in t["top_kernels"]]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
