"""A BERT-style encoder named as the torch legacy exporter names a Hugging Face BertModel:
`/bert/embeddings/...`, `/bert/encoder/layer.N/attention/self/query/MatMul`, `.../output/LayerNorm/...`,
`/bert/pooler/...`. Its scopes give the explorer the model's own layer hierarchy."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ._scoped import ScopedBuilder


def _linear(g: ScopedBuilder, name: str, x: str, d_in: int, d_out: int) -> str:
    with g.scope(name):
        return g.node("Add", [g.node("MatMul", [x, g.weight([d_in, d_out], fan_in=d_in)]), g.bias(d_out)])


def _layernorm(g: ScopedBuilder, x: str, d: int) -> str:
    with g.scope("LayerNorm"):
        scale = g.init((1.0 + g.rng.normal(0, 0.1, d)).astype(np.float32), "ln_scale")
        return g.node("LayerNormalization", [x, scale, g.bias(d)], axis=-1, epsilon=1e-12)


def _heads(g: ScopedBuilder, x: str, seq: int, heads: int, dh: int) -> str:
    y = g.node("Reshape", [x, g.constant(np.array([1, seq, heads, dh], np.int64))])
    return g.node("Transpose", [y], perm=[0, 2, 1, 3])


def _attention(g: ScopedBuilder, x: str, seq: int, d: int, heads: int) -> str:
    dh = d // heads
    with g.scope("attention"):
        with g.scope("self"):
            q = _heads(g, _linear(g, "query", x, d, d), seq, heads, dh)
            k = _heads(g, _linear(g, "key", x, d, d), seq, heads, dh)
            v = _heads(g, _linear(g, "value", x, d, d), seq, heads, dh)
            s = g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])])
            s = g.node("Div", [s, g.constant(np.float32(math.sqrt(dh)))])
            ctx = g.node("MatMul", [g.node("Softmax", [s], axis=-1), v])
            ctx = g.node(
                "Reshape", [g.node("Transpose", [ctx], perm=[0, 2, 1, 3]), g.constant(np.array([1, seq, d], np.int64))]
            )
        with g.scope("output"):
            y = g.node("Add", [_linear(g, "dense", ctx, d, d), x])
            return _layernorm(g, y, d)


def _layer(g: ScopedBuilder, x: str, seq: int, d: int, heads: int, d_ff: int) -> str:
    y = _attention(g, x, seq, d, heads)
    with g.scope("intermediate"):
        h = _linear(g, "dense", y, d, d_ff)
        with g.scope("intermediate_act_fn"):  # GELU as exported before opset 20
            erf = g.node("Erf", [g.node("Div", [h, g.constant(np.float32(math.sqrt(2.0)))])])
            h = g.node(
                "Mul",
                [g.node("Mul", [h, g.node("Add", [erf, g.constant(np.float32(1.0))])]), g.constant(np.float32(0.5))],
            )
    with g.scope("output"):
        return _layernorm(g, g.node("Add", [_linear(g, "dense", h, d_ff, d), y]), d)


def bert_encoder(
    seq: int = 16, d: int = 64, heads: int = 4, d_ff: int = 128, layers: int = 4, vocab: int = 96, style: str = "path"
) -> onnx.ModelProto:
    g = ScopedBuilder("bert_encoder", seed=22, style=style)
    ids = g.input("input_ids", [1, seq], onnx.TensorProto.INT64)
    with g.scope("bert"):
        with g.scope("embeddings"):
            with g.scope("word_embeddings"):
                x = g.node("Gather", [g.weight([vocab, d], fan_in=2, prefix="word_emb"), ids], axis=0)
            with g.scope("position_embeddings"):
                x = g.node("Add", [x, g.weight([1, seq, d], fan_in=2, prefix="pos_emb")])
            x = _layernorm(g, x, d)
        with g.scope("encoder"):
            for n in range(layers):
                with g.scope(f"layer.{n}"):
                    x = _layer(g, x, seq, d, heads, d_ff)
        g.node("Identity", [x], name="last_hidden_state")
        with g.scope("pooler"):
            first = g.node("Gather", [x, g.constant(np.int64(0))], axis=1)
            with g.scope("activation"):
                g.node("Tanh", [_linear(g, "dense", first, d, d)], name="pooler_output")
    g.output("last_hidden_state", dims=[1, seq, d])
    g.output("pooler_output", dims=[1, d])
    return g.model()
