"""Decode-step latency of the built-in gpt2_decode (4 layers, d128, fp32, TF32 off) on the GPU,
in one run: our eager and graph latency against PyTorch eager, PyTorch CUDA graph and
torch.compile (mode="reduce-overhead", which replays CUDA graphs) of the same network (built from
the ONNX graph by gpu_onnx_torch, shapes pinned); our graph latency across past lengths P; and
1,000 graph steps with new inputs checking that device memory does not grow.

    python3 benchmarks/decode.py --out docs/results/    [--iters 200]
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


def pinned_model(past: int, new: int):
    """gpt2_decode with its symbolic dims fixed (PyTorch's converter folds Shape chains)."""
    from migx_explore.models import get_model

    m = get_model("gpt2_decode")
    for vi in m.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param:
                d.dim_value = past if d.dim_param == "P" else new
    return m


def torch_times(feed: dict, past: int, iters: int) -> dict:
    import torch
    from gpu_onnx_torch import OnnxTorch

    net = OnnxTorch(pinned_model(past, 1))
    xs = [torch.from_numpy(np.ascontiguousarray(feed[n])).cuda() for n in net.inputs]
    stream = torch.cuda.Stream()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(fn) -> float:
        with torch.cuda.stream(stream):
            for _ in range(10):
                fn()
            t = []
            for _ in range(iters):
                e0.record(stream)
                fn()
                e1.record(stream)
                e1.synchronize()
                t.append(e0.elapsed_time(e1) * 1e3)
        return statistics.median(t)

    out = {"torch_eager_us": timed(lambda: net(*xs))}
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        net(*xs)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, stream=stream):
        net(*xs)
    out["torch_graph_us"] = timed(graph.replay)
    try:
        compiled = torch.compile(net.forward, mode="reduce-overhead")
        out["torch_compile_graph_us"] = timed(lambda: compiled(*xs))
    except Exception as e:  # noqa: BLE001 - report, keep the rest of the run
        out["torch_compile_error"] = f"{type(e).__name__}: {e}"[:300]
    out["torch_logits"] = net(*xs)[0].float().cpu().numpy()
    return out


def ours(backend, feed: dict, iters: int) -> tuple[dict, object]:
    from migx_explore.gpu import compile_program
    from migx_explore.gpu.timing import time_program

    t0 = time.perf_counter()
    c = compile_program("gpt2_decode", backend=backend, input_dims={k: list(v.shape) for k, v in feed.items()})
    compile_s = time.perf_counter() - t0
    res = time_program(c, modes=("eager", "graph"), warmup=10, iters=iters, inputs=feed, per_kernel=False)
    return {"compile_s": compile_s, "eager_us": res.modes["eager"].device_us.median,
            "graph_us": res.modes["graph"].device_us.median, "launches": res.modes["eager"].launches}, c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for decode_<device>.json/.md")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--pasts", default="1,16,64,127,200,255")
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.models.gpt2_decode import decode_feed

    be = get_backend()
    device = torch.cuda.get_device_name(0)
    r: dict = {"device": device, "date": time.strftime("%Y-%m-%d"), "model": "gpt2_decode (4 layers, d128, fp32)"}
    feed = decode_feed(127, 1)
    mine, c = ours(be, feed, args.iters)
    r["P127"] = {**mine, **{k: v for k, v in torch_times(feed, 127, args.iters).items() if k != "torch_logits"}}
    ref = torch_times(feed, 127, 3)["torch_logits"]
    r["P127"]["max_abs_diff_vs_torch"] = float(np.abs(c.run(feed, mode="graph")[0] - ref).max())
    p = r["P127"]
    p["ratio_graph_vs_torch_graph"] = p["graph_us"] / p["torch_graph_us"]
    if "torch_compile_graph_us" in p:
        p["ratio_graph_vs_torch_compile_graph"] = p["graph_us"] / p["torch_compile_graph_us"]
    # 1,000 graph steps with new inputs each: device memory must not grow.
    free0 = torch.cuda.mem_get_info()[0]
    for step in range(1000):
        c.run(decode_feed(127, 1, seed=step % 7), mode="graph")
    free1 = torch.cuda.mem_get_info()[0]
    r["steps_1000_device_free_delta_bytes"] = int(free0 - free1)
    c.close()
    sweep = {}
    for past in (int(x) for x in args.pasts.split(",")):
        m, cp = ours(be, decode_feed(past, 1), args.iters)
        cp.close()
        sweep[past] = m["graph_us"]
    r["graph_us_by_P"] = sweep
    r["flatness_max_over_min"] = max(sweep.values()) / min(sweep.values())
    print(report(r))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        tag = device.split()[-1].lower().replace(" ", "_") if device else "gpu"
        (out / f"decode_{tag}.json").write_text(json.dumps(r, indent=1, default=float))
        (out / f"decode_{tag}.md").write_text(report(r) + "\n")


def report(r: dict) -> str:
    p = r["P127"]
    lines = [f"# gpt2_decode decode step on {r['device']} ({r['date']}), fp32, TF32 off", "",
             "| P=127, T=1 | latency (us) |", "|---|---|",
             f"| ours eager | {p['eager_us']:.1f} |", f"| ours graph | {p['graph_us']:.1f} |",
             f"| PyTorch eager | {p['torch_eager_us']:.1f} |", f"| PyTorch CUDA graph | {p['torch_graph_us']:.1f} |"]
    if "torch_compile_graph_us" in p:
        lines.append(f"| torch.compile + CUDA graph | {p['torch_compile_graph_us']:.1f} |")
    lines += ["", f"ours graph / PyTorch CUDA graph: {p['ratio_graph_vs_torch_graph']:.2f}x (target <= 1.0)"]
    if "ratio_graph_vs_torch_compile_graph" in p:
        lines.append(f"ours graph / torch.compile + CUDA graph: {p['ratio_graph_vs_torch_compile_graph']:.2f}x "
                     "(target <= 1.3)")
    else:
        lines.append(f"torch.compile failed: {p.get('torch_compile_error')}")
    lines += [f"launches per step (eager): {p['launches']}; compile {p['compile_s']:.1f} s; "
              f"max |logits - torch| = {p['max_abs_diff_vs_torch']:.2e}",
              "graph latency by P (us): " + ", ".join(f"P={k}: {v:.1f}" for k, v in r["graph_us_by_P"].items()),
              f"flatness max/min over P: {r['flatness_max_over_min']:.2f} (target <= 1.2)",
              f"1,000 graph steps: device free memory changed by {r['steps_1000_device_free_delta_bytes']} bytes"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
