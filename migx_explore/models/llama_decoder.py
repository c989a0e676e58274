"""A Llama-style decoder as the torch dynamo exporter writes one: nodes named `node_MatMul_12`, each
carrying its module path in `metadata_props` (`pkg.torch.onnx.name_scopes` =
`['', 'model', 'model.layers.2', 'model.layers.2.mlp', 'model.layers.2.mlp.down_proj', ...]` and
`namespace`). RMSNorm, causal attention, SiLU-gated MLP, final norm and lm_head."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ._scoped import ScopedBuilder


def _proj(g: ScopedBuilder, name: str, x: str, d_in: int, d_out: int) -> str:
    with g.scope(name):
        return g.node("MatMul", [x, g.weight([d_in, d_out], fan_in=d_in)])


def _rmsnorm(g: ScopedBuilder, name: str, x: str, d: int) -> str:
    with g.scope(name):
        var = g.node(
            "ReduceMean",
            [g.node("Pow", [x, g.constant(np.float32(2.0))]), g.constant(np.array([-1], np.int64))],
            keepdims=1,
        )
        inv = g.node("Reciprocal", [g.node("Sqrt", [g.node("Add", [var, g.constant(np.float32(1e-6))])])])
        w = g.init((1.0 + g.rng.normal(0, 0.1, d)).astype(np.float32), "rms_w")
        return g.node("Mul", [w, g.node("Mul", [x, inv])])


def _attention(g: ScopedBuilder, x: str, seq: int, d: int, heads: int, mask: str) -> str:
    dh = d // heads
    with g.scope("self_attn"):

        def split(t: str) -> str:
            return g.node(
                "Transpose",
                [g.node("Reshape", [t, g.constant(np.array([1, seq, heads, dh], np.int64))])],
                perm=[0, 2, 1, 3],
            )

        q = split(_proj(g, "q_proj", x, d, d))
        k = split(_proj(g, "k_proj", x, d, d))
        v = split(_proj(g, "v_proj", x, d, d))
        s = g.node(
            "Mul",
            [
                g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])]),
                g.constant(np.float32(1.0 / math.sqrt(dh))),
            ],
        )
        p = g.node("Softmax", [g.node("Add", [s, mask])], axis=-1)
        ctx = g.node(
            "Reshape",
            [
                g.node("Transpose", [g.node("MatMul", [p, v])], perm=[0, 2, 1, 3]),
                g.constant(np.array([1, seq, d], np.int64)),
            ],
        )
        return _proj(g, "o_proj", ctx, d, d)


def _mlp(g: ScopedBuilder, x: str, d: int, d_ff: int) -> str:
    with g.scope("mlp"):
        gate = _proj(g, "gate_proj", x, d, d_ff)
        with g.scope("act_fn"):
            gate = g.node("Mul", [gate, g.node("Sigmoid", [gate])])
        return _proj(g, "down_proj", g.node("Mul", [gate, _proj(g, "up_proj", x, d, d_ff)]), d_ff, d)


def llama_decoder(
    seq: int = 16, d: int = 64, heads: int = 4, d_ff: int = 160, layers: int = 4, vocab: int = 128
) -> onnx.ModelProto:
    g = ScopedBuilder("llama_decoder", seed=23, style="dynamo")
    ids = g.input("input_ids", [1, seq], onnx.TensorProto.INT64)
    mask = g.init(np.triu(np.full((seq, seq), -np.inf, np.float32), 1), "causal_mask")
    with g.scope("model"):
        with g.scope("embed_tokens"):
            x = g.node("Gather", [g.weight([vocab, d], fan_in=2, prefix="embed"), ids], axis=0)
        for n in range(layers):
            with g.scope(f"layers.{n}"):
                x = g.node("Add", [x, _attention(g, _rmsnorm(g, "input_layernorm", x, d), seq, d, heads, mask)])
                x = g.node("Add", [x, _mlp(g, _rmsnorm(g, "post_attention_layernorm", x, d), d, d_ff)])
        x = _rmsnorm(g, "norm", x, d)
    with g.scope("lm_head"):
        g.node("MatMul", [x, g.weight([d, vocab], fan_in=d)], name="logits")
    g.output("logits", dims=[1, seq, vocab])
    return g.model()
