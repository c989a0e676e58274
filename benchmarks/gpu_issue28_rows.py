"""Issue 28's kernel-count, top-k and LSTM rows for built-in models, ours only (plus cuDNN for the
LSTM): fp32 and fp16 graph latency (median device µs, batch 1), kernels and BLAS calls launched,
the top-k kernels' own times, and the largest error against the float64 reference evaluator.

gpu_vs_torch.py cannot build these models in PyTorch (no torch mapping for ONNX LSTM, ReduceMax),
so the torch side here is only cuDNN's LSTM (nn.LSTM, same sizes, CUDA graph).

    python3 benchmarks/gpu_issue28_rows.py --out results/ [--models bilstm,yolov10n] [--iters 200]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_vs_torch  # noqa: E402


def reference_error(model, feeds: dict, outs: list) -> float:
    """Largest |ours - reference| / (|reference| + 1e-2) over the float outputs."""
    from migx_explore.compiler import evaluate
    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.compiler.onnx.context import param_name

    want = evaluate(parse_onnx(model), {param_name(k): v for k, v in feeds.items()})
    errs = [
        float(np.max(np.abs(np.asarray(g, np.float64).reshape(np.shape(w)) - w) / (np.abs(w) + 1e-2)))
        for g, w in zip(outs, want)
        if np.asarray(w).dtype.kind == "f" and np.size(w)
    ]
    return max(errs, default=0.0)


def our_row(model, feeds: dict, precision: str, iters: int) -> dict:
    r = gpu_vs_torch.ours(model, feeds, iters, 10, precision=precision)
    outs = r.pop("outputs")
    row = {k: r[k] for k in ("graph_us", "graph_p10", "graph_p90", "eager_us", "kernels", "blas_calls", "graph_nodes")}
    row["topk_kernels_us"] = [t for name, t in r["top_kernels"] if name.startswith("topk")]
    row["max_rel_err_vs_reference"] = reference_error(model, feeds, outs)
    return row


def cudnn_lstm(precision: str, iters: int, seq: int = 32, size: int = 64, hidden: int = 96) -> dict:
    """nn.LSTM (2 layers, bidirectional) + Linear on the last step, as the bilstm model."""
    import torch

    dt = torch.float16 if precision == "fp16" else torch.float32
    lstm = torch.nn.LSTM(size, hidden, num_layers=2, bidirectional=True).cuda().to(dt)
    head = torch.nn.Linear(2 * hidden, 10).cuda().to(dt)
    x = torch.randn(seq, 1, size, device="cuda", dtype=dt)
    with torch.no_grad():
        for _ in range(3):
            head(lstm(x)[0][-1])
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            head(lstm(x)[0][-1])
        times = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
    return {"graph_us": float(np.median(times))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--models", default="bilstm,yolov10n,mlp,llama_decoder,bert_encoder")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--label", default="ours")
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from migx_explore import models

    res: dict = {"device": torch.cuda.get_device_name(), "label": args.label, "rows": {}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        model = models.get_model(name)
        feeds = gpu_vs_torch.feeds_for(model)
        row = {}
        for precision in ("fp32", "fp16"):
            try:
                row[precision] = our_row(model, feeds, precision, args.iters)
            except Exception as e:  # noqa: BLE001 - the other rows still count
                row[precision] = {"error": f"{type(e).__name__}: {e}"}
            if name == "bilstm":
                row[precision]["cudnn_graph_us"] = cudnn_lstm(precision, args.iters)["graph_us"]
        res["rows"][name] = row
        print(name, json.dumps(row), flush=True)
        (out / f"issue28_{args.label}.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
