"""The export kinds of issue 44 item 2 that have no PyTorch twin, on the GPU: each is built in code
(tests/dynamic_exports.py, tests/gallery_models.py, tests/qdq_models.py), checked against ONNX
Runtime and timed eagerly and through graph capture.

    dyn_cnn     a CNN exported with a symbolic batch, compiled over batch 1..4: one static program
                and one captured graph per size, picked at run time by the feed's batch
    kv_decoder  a dynamo-style attention decoder with the KV cache as inputs, past length 1..64 in
                power-of-two buckets, one new token
    ort_bert    ORT-fused ops (RotaryEmbedding, MultiHeadAttention, BiasGelu, FastGelu) with
                4-bit MatMulNBits projections (dequantization inside the GEMM)
    qop_cnn     an ONNX Runtime QOperator int8 CNN (QLinearConv, uint8 activations)

Every row says whether any step stayed on the host (the goal is none), the worst error against
ORT per mode, and the median device time per mode. No torch baseline: these networks exist only
as ONNX graphs (their ops are ORT's own or an exporter's shape arithmetic).

    python benchmarks/gpu_dynamic_kinds.py --out docs/results/dynamic_kinds.md
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from migx_explore.compiler.onnx import param_name, parse_onnx  # noqa: E402
from migx_explore.gpu import compile_program  # noqa: E402
from migx_explore.gpu.buckets import BucketedProgram  # noqa: E402
from migx_explore.gpu.runtime import get_backend  # noqa: E402
from migx_explore.gpu.timing import time_program  # noqa: E402


def _ort(model, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _err(got: list, want: list) -> float:
    """Worst absolute error over the outputs, relative to each output's largest magnitude."""
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        worst = max(worst, float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-6)))
    return worst


def _row(label: str, compiled, model, feeds: dict, iters: int) -> dict:
    ours = {param_name(k): v for k, v in feeds.items()}
    want = _ort(model, feeds)
    errs = {m: _err(compiled.run(ours, mode=m), want) for m in ("eager", "graph")}
    t = time_program(compiled, inputs=ours, iters=iters, per_kernel=False)
    return {
        "row": label,
        "host": len(compiled.steps.host_ops),
        "err_eager": errs["eager"],
        "err_graph": errs["graph"],
        "eager_us": t.modes["eager"].device_us.median,
        "graph_us": t.modes["graph"].device_us.median,
        "kernels": compiled.kernel_count,
    }


def dyn_cnn(backend, iters: int) -> Iterator[dict]:
    from dynamic_exports import cnn_feed, dyn_batch_cnn

    model = dyn_batch_cnn()
    t0 = time.perf_counter()
    with BucketedProgram(parse_onnx(model, input_dims={"batch_size": (1, 4)}), backend=backend) as b:
        compile_s = time.perf_counter() - t0
        for size in sorted(b.programs):
            feeds = cnn_feed(size)
            assert b.for_inputs(feeds) is b.programs[size]
            yield {**_row(f"dyn_cnn batch {size}", b.programs[size], model, feeds, iters), "compile_s": compile_s}


def kv_decoder(backend, iters: int) -> Iterator[dict]:
    from dynamic_exports import decoder_feed
    from dynamic_exports import kv_decoder as build

    model = build()
    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": (1, 64)}
    t0 = time.perf_counter()
    with BucketedProgram(parse_onnx(model, input_dims=dims), backend=backend, buckets="pow2") as b:
        compile_s = time.perf_counter() - t0
        for size in sorted(b.programs):
            feeds = decoder_feed(size, 1)
            yield {**_row(f"kv_decoder past {size}", b.for_inputs(feeds), model, feeds, iters), "compile_s": compile_s}


def _single(label: str, model, feeds: dict, backend, iters: int) -> Iterator[dict]:
    t0 = time.perf_counter()
    with compile_program(parse_onnx(model), backend=backend) as c:
        compile_s = time.perf_counter() - t0
        yield {**_row(label, c, model, feeds, iters), "compile_s": compile_s}


def ort_bert(backend, iters: int) -> Iterator[dict]:
    from gallery_models import fused_transformer

    from migx_explore.compiler.inputs import random_inputs

    model = fused_transformer()
    feeds = random_inputs(parse_onnx(model), seed=0)
    names = [i.name for i in model.graph.input]
    feeds = {n: feeds[param_name(n)] for n in names if param_name(n) in feeds}
    yield from _single("ort_bert (MHA, rotary, MatMulNBits int4)", model, feeds, backend, iters)


def qop_cnn(backend, iters: int) -> Iterator[dict]:
    from qdq_models import image_batches, quantize_qoperator, resnet_like

    model = quantize_qoperator(resnet_like(), image_batches(8), reduce_range=True)
    x = {"input": np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    yield from _single("qop_cnn (QOperator int8)", model, x, backend, iters)


KINDS: dict[str, Callable] = {"dyn_cnn": dyn_cnn, "kv_decoder": kv_decoder, "ort_bert": ort_bert, "qop_cnn": qop_cnn}


def table(rows: list[dict]) -> str:
    cols = ("row", "host steps", "err eager", "err graph", "eager us", "graph us", "kernels", "compile s")
    lines = ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['row']} | failed: {r['error']} |||||||")
            continue
        lines.append(
            f"| {r['row']} | {r['host']} | {r['err_eager']:.1e} | {r['err_graph']:.1e} | {r['eager_us']:.1f} "
            f"| {r['graph_us']:.1f} | {r['kernels']} | {r['compile_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--out", type=Path, help="write the table here (markdown)")
    args = ap.parse_args(argv)
    backend = get_backend()
    rows: list[dict] = []
    for kind in args.kinds.split(","):
        try:
            for r in KINDS[kind](backend, args.iters):
                rows.append(r)
                print(table([r]).splitlines()[-1], flush=True)
        except Exception as e:  # noqa: BLE001 - a failed kind is a row of the table, the rest still run
            rows.append({"row": kind, "error": f"{type(e).__name__}: {e}"[:200]})
            print(f"{kind}: failed: {e}", flush=True)
    device = getattr(backend, "name", type(backend).__name__)
    text = f"# Export kinds without a torch twin, on {device}\n\n{table(rows)}\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
