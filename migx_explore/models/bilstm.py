"""A 2-layer bidirectional LSTM as torch.onnx exports `nn.LSTM(64, 96, num_layers=2,
bidirectional=True)` followed by a linear head: one ONNX LSTM node per layer (gates in ONNX's
i, o, f, c order, zero initial states as initializers), the exporter's Transpose + Reshape that
folds the two directions of Y into the next layer's features, node names from the module path
(`/lstm/LSTM`, `/lstm/LSTM_1`, `/fc/Gemm`). `rewrite_rnn` unrolls it, as MIGraphX does, into
thousands of instructions (seq 32): the explorer's big-graph example.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ._builder import GraphBuilder


def bilstm(
    seq: int = 32, features: int = 64, hidden: int = 96, layers: int = 2, classes: int = 10, batch: int = 1
) -> onnx.ModelProto:
    g = GraphBuilder("main_graph", seed=32)
    x = g.input("input", [seq, batch, features])
    scale = 1.0 / np.sqrt(hidden)
    y, c_in = x, features
    for layer in range(layers):
        sfx = "" if layer == 0 else f"_{layer}"
        w = g.init(g.rng.uniform(-scale, scale, (2, 4 * hidden, c_in)).astype(np.float32), f"onnx::LSTM_w{layer}")
        r = g.init(g.rng.uniform(-scale, scale, (2, 4 * hidden, hidden)).astype(np.float32), f"onnx::LSTM_r{layer}")
        b = g.init(g.rng.uniform(-scale, scale, (2, 8 * hidden)).astype(np.float32), f"onnx::LSTM_b{layer}")
        h0 = g.init(np.zeros((2, batch, hidden), np.float32), f"onnx::LSTM_h{layer}")
        c0 = g.init(np.zeros((2, batch, hidden), np.float32), f"onnx::LSTM_c{layer}")
        name = f"/lstm/LSTM{sfx}"
        outs = [f"{name}_output_{i}" for i in range(3)]
        g.nodes.append(
            helper.make_node(
                "LSTM", [y, w, r, b, "", h0, c0], outs, name=name, direction="bidirectional", hidden_size=hidden
            )
        )
        # Y is [seq, 2, batch, hidden]; the next layer reads [seq, batch, 2 * hidden]
        t = f"/lstm/Transpose{sfx}"
        g.nodes.append(helper.make_node("Transpose", [outs[0]], [f"{t}_output_0"], name=t, perm=[0, 2, 1, 3]))
        shape = g.init(np.array([0, 0, -1], np.int64), f"/lstm/Constant{sfx}")
        rs = f"/lstm/Reshape{sfx}"
        g.nodes.append(helper.make_node("Reshape", [f"{t}_output_0", shape], [f"{rs}_output_0"], name=rs))
        y, c_in = f"{rs}_output_0", 2 * hidden
    last = g.init(np.array([seq - 1], np.int64), "/Constant")
    g.nodes.append(helper.make_node("Gather", [y, last], ["/Gather_output_0"], name="/Gather", axis=0))
    sq = g.init(np.array([0], np.int64), "/Constant_1")
    g.nodes.append(helper.make_node("Squeeze", ["/Gather_output_0", sq], ["/Squeeze_output_0"], name="/Squeeze"))
    fc_w = g.weight([classes, c_in], prefix="fc.weight")
    fc_b = g.bias(classes, prefix="fc.bias")
    g.nodes.append(helper.make_node("Gemm", ["/Squeeze_output_0", fc_w, fc_b], ["output"], name="/fc/Gemm", transB=1))
    g.output("output", dims=[batch, classes])
    return g.model()
