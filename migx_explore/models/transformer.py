"""A transformer encoder layer as torch.onnx exports one: MatMul + Add projections, heads split with
Shape/Gather/Unsqueeze/Concat -> Reshape and Transpose, scaled scores plus an additive causal mask
holding -inf (built from ConstantOfShape/Trilu/Where and Expanded to the score shape), Softmax,
LayerNormalization, a GELU written as the Erf pattern, and an opset-18 ReduceMean pooled output."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ._builder import GraphBuilder


def _linear(g: GraphBuilder, x: str, d_in: int, d_out: int) -> str:
    return g.node("Add", [g.node("MatMul", [x, g.weight([d_in, d_out], fan_in=d_in)]), g.bias(d_out)])


def _layernorm(g: GraphBuilder, x: str, d: int) -> str:
    scale = g.init((1.0 + g.rng.normal(0, 0.1, d)).astype(np.float32), "ln_scale")
    return g.node("LayerNormalization", [x, scale, g.bias(d)], axis=-1, epsilon=1e-5)


def _split_heads(g: GraphBuilder, x: str, heads: int, dh: int) -> str:
    y = g.dynamic_reshape(x, keep=[0, 1], tail=[heads, dh])  # [B, S, H, Dh]
    return g.node("Transpose", [y], perm=[0, 2, 1, 3])  # [B, H, S, Dh]


def _causal_mask(g: GraphBuilder, seq: int, ref: str) -> str:
    """0 on and below the diagonal, -inf above, expanded to `ref`'s shape [B, H, S, S]."""
    ones = g.node(
        "ConstantOfShape",
        [g.constant(np.array([seq, seq], np.int64))],
        value=onnx.numpy_helper.from_array(np.array([1.0], np.float32)),
    )
    lower = g.node("Trilu", [ones], upper=0)
    blocked = g.node("Equal", [lower, g.constant(np.float32(0.0))])
    mask = g.node("Where", [blocked, g.constant(np.float32(-np.inf)), g.constant(np.float32(0.0))])
    return g.node("Expand", [mask, g.node("Shape", [ref])])


def _encoder_layer(g: GraphBuilder, x: str, seq: int, d_model: int, heads: int, d_ff: int) -> str:
    dh = d_model // heads
    q = _split_heads(g, _linear(g, x, d_model, d_model), heads, dh)
    k = _split_heads(g, _linear(g, x, d_model, d_model), heads, dh)
    v = _split_heads(g, _linear(g, x, d_model, d_model), heads, dh)
    scores = g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = g.node("Div", [scores, g.constant(np.float32(math.sqrt(dh)))])
    scores = g.node("Add", [scores, _causal_mask(g, seq, scores)])
    ctx = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), v])  # [B, H, S, Dh]
    ctx = g.dynamic_reshape(g.node("Transpose", [ctx], perm=[0, 2, 1, 3]), keep=[0, 1], tail=[d_model])
    y = _layernorm(g, g.node("Add", [x, _linear(g, ctx, d_model, d_model)]), d_model)
    # GELU as exported before opset 20: 0.5 * x * (1 + erf(x / sqrt(2)))
    h = _linear(g, y, d_model, d_ff)
    erf = g.node("Erf", [g.node("Div", [h, g.constant(np.float32(math.sqrt(2.0)))])])
    gelu = g.node(
        "Mul", [g.node("Mul", [h, g.node("Add", [erf, g.constant(np.float32(1.0))])]), g.constant(np.float32(0.5))]
    )
    return _layernorm(g, g.node("Add", [y, _linear(g, gelu, d_ff, d_model)]), d_model)


def transformer(seq: int = 16, d_model: int = 64, heads: int = 4, d_ff: int = 128, layers: int = 1) -> onnx.ModelProto:
    """Encoder layer(s); `layers` > 1 stacks them (big-model benchmarks)."""
    g = GraphBuilder("transformer", seed=6)
    out = g.input("hidden", [1, seq, d_model])
    for _ in range(layers):
        out = _encoder_layer(g, out, seq, d_model, heads, d_ff)
    g.node("Identity", [out], name="encoded")
    g.node("ReduceMean", [out, g.constant(np.array([1], np.int64))], name="pooled", keepdims=0)
    g.output("encoded", dims=[1, seq, d_model])
    g.output("pooled", dims=[1, d_model])
    return g.model()
