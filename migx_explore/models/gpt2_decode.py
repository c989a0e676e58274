"""A GPT-2-style decoder with a KV cache, as HF/torch.onnx export one for generation.

Inputs: `input_ids` int64 [1, T] and, per layer i, `past_key_i` / `past_value_i` float
[1, H, P, Dh]; outputs: `logits` [1, T, vocab] and `present_key_i` / `present_value_i`
[1, H, P + T, Dh]. `P` (the cache length) and `T` (the new tokens) are ONNX dim_params shared by
all inputs, so one model serves prefill (P=0, T=prompt) and decode (P>0, T=1).

What the dynamic-shape passes meet here, as real exports have it:
  - positions from the cache length: Shape(past_key_0) -> Gather(2) = P, then
    P + Range(0, T) (Range on the static T, an Add on the dynamic P);
  - Concat of past and new K/V along the sequence axis (the presents);
  - a causal mask from Range comparisons: key index Range(0, Shape(present)[2]) <= query
    position, applied with Where(mask, scores, -inf) (HF's `torch.where(causal, w, min)`).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ._builder import GraphBuilder

LAYERS, D_MODEL, HEADS, VOCAB, MAX_POSITIONS = 4, 128, 4, 512, 256


def _linear(g: GraphBuilder, x: str, d_in: int, d_out: int) -> str:
    return g.node("Add", [g.node("MatMul", [x, g.weight([d_in, d_out], fan_in=d_in)]), g.bias(d_out)])


def _layernorm(g: GraphBuilder, x: str, d: int) -> str:
    scale = g.init((1.0 + g.rng.normal(0, 0.1, d)).astype(np.float32), "ln_scale")
    return g.node("LayerNormalization", [x, scale, g.bias(d)], axis=-1, epsilon=1e-5)


def _heads(g: GraphBuilder, x: str, heads: int, dh: int) -> str:
    """[1, T, D] -> [1, H, T, Dh] (torch: x.view(b, t, h, dh).transpose(1, 2))."""
    return g.node("Transpose", [g.dynamic_reshape(x, keep=[0, 1], tail=[heads, dh])], perm=[0, 2, 1, 3])


def _dim(g: GraphBuilder, x: str, axis: int) -> str:
    """A scalar int64 holding x's size on `axis` (Shape -> Gather)."""
    return g.node("Gather", [g.node("Shape", [x]), g.constant(np.int64(axis))], axis=0)


def _attention(g: GraphBuilder, x: str, layer: int, query_pos: str, d: int, heads: int) -> str:
    dh = d // heads
    q, k, v = (_heads(g, _linear(g, x, d, d), heads, dh) for _ in range(3))
    present_k = g.node("Concat", [f"past_key_{layer}", k], name=f"present_key_{layer}", axis=2)
    present_v = g.node("Concat", [f"past_value_{layer}", v], name=f"present_value_{layer}", axis=2)
    scores = g.node("MatMul", [q, g.node("Transpose", [present_k], perm=[0, 1, 3, 2])])  # [1, H, T, P+T]
    scores = g.node("Mul", [scores, g.constant(np.float32(1.0 / math.sqrt(dh)))])
    key_idx = g.node("Range", [g.constant(np.int64(0)), _dim(g, present_k, 2), g.constant(np.int64(1))])
    visible = g.node("LessOrEqual", [key_idx, query_pos])  # [T, P+T]: key j visible to query at position p
    scores = g.node("Where", [visible, scores, g.constant(np.float32(-np.inf))])
    ctx = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), present_v])  # [1, H, T, Dh]
    ctx = g.dynamic_reshape(g.node("Transpose", [ctx], perm=[0, 2, 1, 3]), keep=[0, 1], tail=[d])
    return _linear(g, ctx, d, d)


def _block(g: GraphBuilder, x: str, layer: int, query_pos: str, d: int, heads: int) -> str:
    x = g.node("Add", [x, _attention(g, _layernorm(g, x, d), layer, query_pos, d, heads)])
    h = _linear(g, _layernorm(g, x, d), d, 4 * d)
    # GELU as exported before opset 20: 0.5 * x * (1 + erf(x / sqrt(2)))
    erf = g.node("Erf", [g.node("Div", [h, g.constant(np.float32(math.sqrt(2.0)))])])
    gelu = g.node(
        "Mul", [g.node("Mul", [h, g.node("Add", [erf, g.constant(np.float32(1.0))])]), g.constant(np.float32(0.5))]
    )
    return g.node("Add", [x, _linear(g, gelu, 4 * d, d)])


def gpt2_decode(
    layers: int = LAYERS,
    d_model: int = D_MODEL,
    heads: int = HEADS,
    vocab: int = VOCAB,
    max_positions: int = MAX_POSITIONS,
) -> onnx.ModelProto:
    """GPT-2-style decoder step with KV cache inputs and present outputs (see the module doc)."""
    g = GraphBuilder("gpt2_decode", seed=12)
    dh = d_model // heads
    ids = g.input("input_ids", [1, "T"], onnx.TensorProto.INT64)
    for i in range(layers):
        g.input(f"past_key_{i}", [1, heads, "P", dh])
        g.input(f"past_value_{i}", [1, heads, "P", dh])
    wte = g.init((g.rng.standard_normal((vocab, d_model)) * 0.5).astype(np.float32), "wte")
    wpe = g.init((g.rng.standard_normal((max_positions, d_model)) * 0.1).astype(np.float32), "wpe")
    past_len = _dim(g, "past_key_0", 2)
    steps = g.node("Range", [g.constant(np.int64(0)), _dim(g, ids, 1), g.constant(np.int64(1))])
    positions = g.node("Add", [steps, past_len])  # [T]: P, P+1, ..., P+T-1
    x = g.node("Add", [g.node("Gather", [wte, ids], axis=0), g.node("Gather", [wpe, positions], axis=0)])
    query_pos = g.node("Unsqueeze", [positions, g.constant(np.array([1], np.int64))])  # [T, 1]
    for i in range(layers):
        x = _block(g, x, i, query_pos, d_model, heads)
    x = _layernorm(g, x, d_model)
    # An untied LM head (the tied one makes a random-weight model repeat its input token forever).
    g.node("MatMul", [x, g.weight([d_model, vocab], fan_in=d_model, prefix="lm_head")], name="logits")
    g.output("logits", dims=[1, "T", vocab])
    for i in range(layers):
        g.output(f"present_key_{i}", dims=[1, heads, "P+T", dh])
        g.output(f"present_value_{i}", dims=[1, heads, "P+T", dh])
    return g.model()


def decode_feed(past: int, new: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for one gpt2_decode call: `new` token ids and random pasts of length `past`."""
    rng = np.random.default_rng(seed + 1000 * past + new)
    dh = D_MODEL // HEADS
    feed = {"input_ids": rng.integers(0, VOCAB, (1, new)).astype(np.int64)}
    for i in range(LAYERS):
        for kv in ("key", "value"):
            feed[f"past_{kv}_{i}"] = rng.standard_normal((1, HEADS, past, dh)).astype(np.float32)
    return feed
