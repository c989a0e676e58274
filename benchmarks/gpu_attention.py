"""The fused attention kernel alone, on the shapes of the transformer benchmark's layers (batch 1,
4 heads, 128 queries and keys, head dim 32 and 64) and one longer BERT-base-like layer (12 heads,
512, 64); the sdpa export form: Q and Kᵀ scaled separately, an additive padding mask, the IsNaN
guard. fp32, fp16 on the scalar kernel and fp16 on the tensor-core kernel (attention_mma.py): the
attention kernel's median device time (CUPTI through torch.profiler, CUDA graph replays; at fp16
the input converts are not counted), against the kernels of PyTorch's scaled_dot_product_attention
with the same mask, in a CUDA graph, timed the same way.

    python3 benchmarks/gpu_attention.py [--iters 200] [--json out.json] [--sweep]

--sweep times the kernels' block shapes instead at fp16, for choosing the defaults: the mma
kernel's key splits, warps per block and key tile (attention_mma.py's KEY_SPLITS, MAX_WARPS, KEY_TILE), then the scalar
kernel's threads per block x query rows per warp (attention.py's SMALL_THREADS / THREADS, ROWS_PER_WARP).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPES = [(4, 64, 32), (4, 128, 32), (4, 128, 64), (3, 197, 64), (12, 512, 64)]  # heads, sequence, head dim


def sdpa_model(heads: int, seq: int, d: int) -> onnx.ModelProto:
    n = helper.make_node
    half = numpy_helper.from_array(np.float32(np.sqrt(1.0 / np.sqrt(d))), "half_scale")
    zero = numpy_helper.from_array(np.float32(0), "zero")
    nodes = [
        n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        n("Mul", ["q", "half_scale"], ["qs"]),
        n("Mul", ["kt", "half_scale"], ["kts"]),
        n("MatMul", ["qs", "kts"], ["s"]),
        n("Add", ["s", "mask"], ["sm"]),
        n("Softmax", ["sm"], ["p"], axis=-1),
        n("IsNaN", ["p"], ["nan"]),
        n("Where", ["nan", "zero", "p"], ["pg"]),
        n("MatMul", ["pg", "v"], ["out"]),
    ]
    F = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    qkv = [vi(x, F, [1, heads, seq, d]) for x in ("q", "k", "v")]
    g = helper.make_graph(
        nodes, "sdpa", [*qkv, vi("mask", F, [1, 1, 1, seq])], [vi("out", F, [1, heads, seq, d])], [half, zero]
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def feeds(heads: int, seq: int, d: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {x: rng.standard_normal((1, heads, seq, d)).astype(np.float32) for x in ("q", "k", "v")}
    mask = np.zeros((1, 1, 1, seq), np.float32)
    mask[..., seq - 16 :] = -np.inf  # the last 16 keys are padding
    out["mask"] = mask
    return out


def cupti_us(fn, sync, name_prefix: str, iters: int) -> float:
    """Device time per call of the kernels named name_prefix*, over `iters` calls of fn, from CUPTI
    (torch.profiler): per-kernel events around eager launches measure the host's launch gap as
    much as the kernel when the kernel is a few microseconds long."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        sync()
    times = [
        float(getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0))
        for e in prof.events()
        if e.device_type.name == "CUDA" and e.name.startswith(name_prefix)
    ]
    return sum(times) / iters if times else float("nan")


def ours(heads: int, seq: int, d: int, precision: str, iters: int) -> dict:
    from migx_explore.gpu import compile as gpu_compile
    from migx_explore.gpu.pipelines import CompileOptions

    f = feeds(heads, seq, d)
    with gpu_compile(sdpa_model(heads, seq, d), CompileOptions(precision=precision)) as c:
        got = np.asarray(c.run(f, mode="graph")[0], np.float32)
        kernels = [i.kernel for i in c.steps.info if i.kind == "kernel" and i.kernel.startswith("attention_")]
        us = cupti_us(lambda: c.launch_graph(io=False), lambda: c.backend.streams.sync(c.stream), "attention_", iters)
    return {"kernel": kernels[0] if kernels else None, "us": us, "out": got}


def torch_sdpa(heads: int, seq: int, d: int, precision: str, iters: int) -> dict:
    import torch
    import torch.nn.functional as F

    dt = torch.float16 if precision == "fp16" else torch.float32
    f = {k: torch.from_numpy(v).cuda().to(dt) for k, v in feeds(heads, seq, d).items()}
    fn = lambda: F.scaled_dot_product_attention(f["q"], f["k"], f["v"], attn_mask=f["mask"])  # noqa: E731
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            out = fn()
    us = cupti_us(g.replay, torch.cuda.synchronize, "", iters)
    return {"us": us, "out": out.float().cpu().numpy()}


def sweep(iters: int) -> None:
    from migx_explore.gpu.codegen import attention, attention_mma

    attention_mma.MIN_WORK = 0
    print("| heads x seq x d | mma key splits | mma warps per block (unsplit) | mma key tile | our us |")
    print("|---|---|---|---|---|")
    for heads, seq, d in SHAPES:
        for splits, warps in ((1, 1), (1, 2), (1, 4), (2, 2), (4, 4)):
            for tile in (32, 64):
                attention_mma.KEY_SPLITS, attention_mma.MAX_WARPS, attention_mma.KEY_TILE = splits, warps, tile
                us = f"{ours(heads, seq, d, 'fp16', iters)['us']:.1f}"
                print(f"| {heads}x{seq}x{d} | {splits} | {warps} | {tile} | {us} |", flush=True)
    attention_mma.KEY_SPLITS, attention_mma.MAX_WARPS, attention_mma.KEY_TILE = None, 4, 64
    attention.USE_TENSOR_CORES = False
    print("\nThe scalar kernel (fp16 without tensor cores):")
    print("| heads x seq x d | threads | rows per warp | our us |")
    print("|---|---|---|---|")
    for heads, seq, d in SHAPES:
        for threads in (32, 64, 128, 256):
            for rpw in (1, 2):
                attention.THREADS = attention.SMALL_THREADS = threads
                attention.ROWS_PER_WARP = rpw
                try:
                    us = f"{ours(heads, seq, d, 'fp16', iters)['us']:.1f}"
                except Exception as e:  # noqa: BLE001 - a shape the kernel refuses
                    us = f"{type(e).__name__}: {str(e)[:60]}"
                print(f"| {heads}x{seq}x{d} | {threads} | {rpw} | {us} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    a = ap.parse_args()
    if a.sweep:
        sweep(a.iters)
        return
    from migx_explore.gpu.codegen import attention, attention_mma

    attention_mma.MIN_WORK = 0  # the tensor-core rows even below the size where the scalar kernel is picked
    rows = []
    print("| heads x seq x d | precision | our kernel | our us | torch sdpa graph us | max abs err vs torch |")
    print("|---|---|---|---|---|---|")
    for heads, seq, d in SHAPES:
        # fp16 twice: the scalar kernel (the branch point's) and the tensor-core one
        for prec, mma in (("fp32", False), ("fp16", False), ("fp16", True)):
            attention.USE_TENSOR_CORES = mma
            o = ours(heads, seq, d, prec, a.iters)
            t = None if a.no_torch else torch_sdpa(heads, seq, d, prec, a.iters)
            err = None if t is None else float(np.max(np.abs(o["out"] - t["out"])))
            rows.append(
                {
                    "shape": [heads, seq, d],
                    "precision": prec,
                    "kernel": o["kernel"],
                    "ours_us": o["us"],
                    "torch_us": t and t["us"],
                    "max_abs_err": err,
                }
            )
            print(
                f"| {heads}x{seq}x{d} | {prec} | {o['kernel']} | {o['us']:.1f} | "
                f"{'—' if t is None else format(t['us'], '.1f')} | {'—' if err is None else format(err, '.1e')} |",
                flush=True,
            )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
