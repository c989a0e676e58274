"""Issue 28's kernel-count, top-k and LSTM rows for built-in models, ours only (plus cuDNN for the
LSTM): fp32 and fp16 graph latency (median device µs, batch 1), kernels and BLAS calls launched,
the top-k kernels' own times, and the largest error against the float64 reference evaluator.

gpu_vs_torch.py cannot build these models in PyTorch (no torch mapping for ONNX LSTM, ReduceMax),
so the torch side here is only cuDNN's LSTM (nn.LSTM with the model's weights, CUDA graph).

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


def lstm_module(model, device: str = "cuda"):
    """The bilstm model as nn.LSTM (cuDNN) + Linear on the last step, with the ONNX model's own
    weights: ONNX stacks the gates i, o, f, c and torch i, f, g(c), o; ONNX's one bias of 8
    hidden is torch's bias_ih then bias_hh. Takes input [seq, batch, features]."""
    import torch
    from onnx import numpy_helper

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    cells = [n for n in model.graph.node if n.op_type == "LSTM"]
    hidden = next(a.i for a in cells[0].attribute if a.name == "hidden_size")
    gemm = next(n for n in model.graph.node if n.op_type == "Gemm")
    fc_w, fc_b = inits[gemm.input[1]], inits[gemm.input[2]]
    lstm = torch.nn.LSTM(inits[cells[0].input[1]].shape[2], hidden, num_layers=len(cells), bidirectional=True)
    head = torch.nn.Linear(fc_w.shape[1], fc_w.shape[0])

    def gates(a):  # ONNX i, o, f, c blocks -> torch i, f, g, o
        return torch.from_numpy(np.concatenate([a[k * hidden : (k + 1) * hidden] for k in (0, 2, 3, 1)]))

    with torch.no_grad():
        for layer, cell in enumerate(cells):
            w, r, b = (inits[cell.input[i]] for i in (1, 2, 3))
            for d, sfx in enumerate(("", "_reverse")):
                getattr(lstm, f"weight_ih_l{layer}{sfx}").copy_(gates(w[d]))
                getattr(lstm, f"weight_hh_l{layer}{sfx}").copy_(gates(r[d]))
                getattr(lstm, f"bias_ih_l{layer}{sfx}").copy_(gates(b[d][: 4 * hidden]))
                getattr(lstm, f"bias_hh_l{layer}{sfx}").copy_(gates(b[d][4 * hidden :]))
        head.weight.copy_(torch.tensor(fc_w))  # Gemm transB=1: the weight as Linear stores it
        head.bias.copy_(torch.tensor(fc_b))

    class BiLstm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.head = lstm, head

        def forward(self, x):
            return self.head(self.lstm(x)[0][-1])

    return BiLstm().to(device).eval()


def cudnn_lstm(precision: str, iters: int) -> dict:
    """CUDA-graph latency of lstm_module (the built-in bilstm's weights, cuDNN's LSTM)."""
    import torch

    from migx_explore import models

    dt = torch.float16 if precision == "fp16" else torch.float32
    net = lstm_module(models.get_model("bilstm")).to(dt)
    x = torch.randn(32, 1, 64, device="cuda", dtype=dt)
    with torch.no_grad():
        for _ in range(3):
            net(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            net(x)
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
