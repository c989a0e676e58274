"""Small HF-style transformer exports built in code, with the attention-mask pattern the
transformers library exports (issue 24 item 2): an additive mask of torch.finfo(float32).min
(-3.4028e38) built from `attention_mask` with Cast / Where / Expand, combined with a causal mask
for the decoders, and padded rows in the feeds (right padding for BERT, left padding for GPT-2 and
Llama, whose first rows then have every key masked).

    bert_like_masked  post-LN encoder, mask = Where(bool(1 - m), min, 1 - m), GELU (Erf)
    gpt2_like_masked  pre-LN decoder, causal | padding through Where(.., min, 0), GELU (tanh), tied head
    llama_like_masked RMSNorm (Pow / ReduceMean / Sqrt / Div), dynamo-style Where(allowed, 0, min), SiLU MLP
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32_MIN = float(np.finfo(np.float32).min)
F, I64 = TensorProto.FLOAT, TensorProto.INT64


class GraphBuilder:
    """A tiny graph builder: nodes, initializers and fresh names."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.k = 0

    def name(self, tag: str) -> str:
        self.k += 1
        return f"{tag}_{self.k}"

    def const(self, value, tag: str = "c") -> str:
        n = self.name(tag)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(self, *shape: int, scale: float | None = None) -> str:
        s = scale if scale is not None else 1.0 / math.sqrt(shape[0])
        return self.const((self.rng.standard_normal(shape) * s).astype(np.float32), "w")

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out


def _layer_norm(g: GraphBuilder, x: str, d: int) -> str:
    return g.op(
        "LayerNormalization",
        x,
        g.const(np.ones(d, np.float32) + g.rng.standard_normal(d).astype(np.float32) * 0.1),
        g.const(g.rng.standard_normal(d).astype(np.float32) * 0.1),
        axis=-1,
        epsilon=1e-5,
    )


def rms_norm(g: GraphBuilder, x: str, d: int) -> str:
    var = g.op("ReduceMean", g.op("Pow", x, g.const(np.float32(2.0))), axes=[-1], keepdims=1)
    norm = g.op("Div", x, g.op("Sqrt", g.op("Add", var, g.const(np.float32(1e-6)))))
    return g.op("Mul", norm, g.const((1 + g.rng.standard_normal(d) * 0.1).astype(np.float32)))


def _gelu_erf(g: GraphBuilder, x: str) -> str:
    e = g.op("Erf", g.op("Div", x, g.const(np.float32(math.sqrt(2)))))
    return g.op("Mul", g.op("Mul", x, g.op("Add", e, g.const(np.float32(1)))), g.const(np.float32(0.5)))


def _gelu_tanh(g: GraphBuilder, x: str) -> str:
    cube = g.op("Mul", g.op("Pow", x, g.const(np.float32(3))), g.const(np.float32(0.044715)))
    t = g.op("Tanh", g.op("Mul", g.op("Add", x, cube), g.const(np.float32(math.sqrt(2 / math.pi)))))
    return g.op("Mul", g.op("Mul", x, g.const(np.float32(0.5))), g.op("Add", t, g.const(np.float32(1))))


def _silu(g: GraphBuilder, x: str) -> str:
    return g.op("Mul", x, g.op("Sigmoid", x))


def _attention(g: GraphBuilder, x: str, mask: str, d: int, heads: int) -> str:
    """HF eager attention: softmax(q k^T / sqrt(dh) + mask) v, heads split by Reshape/Transpose."""
    dh = d // heads
    shape4 = g.const(np.array([0, 0, heads, dh], np.int64))

    def split(t: str) -> str:
        return g.op("Transpose", g.op("Reshape", t, shape4), perm=[0, 2, 1, 3])

    q, k, v = (split(g.op("MatMul", x, g.weight(d, d))) for _ in range(3))
    scores = g.op("Div", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), g.const(np.float32(math.sqrt(dh))))
    probs = g.op("Softmax", g.op("Add", scores, mask), axis=-1)
    ctx = g.op(
        "Reshape",
        g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3]),
        g.const(np.array([0, 0, d], np.int64)),
    )
    return g.op("MatMul", ctx, g.weight(d, d))


def _inputs_and_embed(g: GraphBuilder, vocab: int, d: int, seq: int) -> tuple[str, str]:
    emb = g.weight(vocab, d, scale=1.0)
    pos = g.const((g.rng.standard_normal((seq, d)) * 0.5).astype(np.float32), "pos")
    x = g.op("Add", g.op("Gather", emb, "input_ids", axis=0), pos)
    return x, emb


def _padding_bool(g: GraphBuilder) -> str:
    """[B, 1, 1, S] true where a key is padding."""
    m = g.op("Unsqueeze", "attention_mask", g.const(np.array([1, 2], np.int64)))
    return g.op("Equal", m, g.const(np.int64(0)))


def _causal_bool(g: GraphBuilder, seq: int) -> str:
    """[S, S] true above the diagonal (key after query), from Range like the exporters build it."""
    r = g.op("Range", g.const(np.int64(0)), g.const(np.int64(seq)), g.const(np.int64(1)))
    rows = g.op("Unsqueeze", r, g.const(np.array([1], np.int64)))
    cols = g.op("Unsqueeze", r, g.const(np.array([0], np.int64)))
    return g.op("Greater", cols, rows)


def _model(g: GraphBuilder, out: str, batch: int, seq: int, vocab: int, name: str) -> onnx.ModelProto:
    graph = helper.make_graph(
        g.nodes,
        name,
        [
            helper.make_tensor_value_info("input_ids", I64, [batch, seq]),
            helper.make_tensor_value_info("attention_mask", I64, [batch, seq]),
        ],
        [helper.make_tensor_value_info(out, F, [batch, seq, vocab])],
        g.inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def bert_like_masked(
    batch: int = 2, seq: int = 8, d: int = 32, heads: int = 2, layers: int = 2, vocab: int = 40, seed: int = 0
) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    x, _ = _inputs_and_embed(g, vocab, d, seq)
    x = _layer_norm(g, x, d)
    # transformers' _prepare_4d_attention_mask: inverted = 1 - m; inverted.masked_fill(inverted.bool(), min)
    m = g.op("Cast", g.op("Unsqueeze", "attention_mask", g.const(np.array([1, 2], np.int64))), to=F)
    inv = g.op("Sub", g.const(np.float32(1)), m)
    mask = g.op("Where", g.op("Cast", inv, to=TensorProto.BOOL), g.const(np.float32(F32_MIN)), inv)
    mask = g.op("Expand", mask, g.const(np.array([batch, 1, seq, seq], np.int64)))
    for _ in range(layers):
        x = _layer_norm(g, g.op("Add", x, _attention(g, x, mask, d, heads)), d)
        h = _gelu_erf(g, g.op("MatMul", x, g.weight(d, 4 * d)))
        x = _layer_norm(g, g.op("Add", x, g.op("MatMul", h, g.weight(4 * d, d))), d)
    return _model(g, g.op("MatMul", x, g.weight(d, vocab)), batch, seq, vocab, "bert_like_masked")


def gpt2_like_masked(
    batch: int = 2, seq: int = 8, d: int = 32, heads: int = 2, layers: int = 2, vocab: int = 40, seed: int = 1
) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    x, emb = _inputs_and_embed(g, vocab, d, seq)
    blocked = g.op("Or", _causal_bool(g, seq), _padding_bool(g))  # [B, 1, S, S]
    mask = g.op("Where", blocked, g.const(np.float32(F32_MIN)), g.const(np.float32(0)))
    mask = g.op("Expand", mask, g.const(np.array([batch, 1, seq, seq], np.int64)))
    for _ in range(layers):
        x = g.op("Add", x, _attention(g, _layer_norm(g, x, d), mask, d, heads))
        h = _gelu_tanh(g, g.op("MatMul", _layer_norm(g, x, d), g.weight(d, 4 * d)))
        x = g.op("Add", x, g.op("MatMul", h, g.weight(4 * d, d)))
    head = g.op("Transpose", emb, perm=[1, 0])  # tied embeddings
    return _model(g, g.op("MatMul", _layer_norm(g, x, d), head), batch, seq, vocab, "gpt2_like_masked")


def llama_like_masked(
    batch: int = 2, seq: int = 8, d: int = 32, heads: int = 2, layers: int = 2, vocab: int = 40, seed: int = 2
) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    x, _ = _inputs_and_embed(g, vocab, d, seq)
    allowed = g.op("Not", g.op("Or", _causal_bool(g, seq), _padding_bool(g)))
    mask = g.op("Where", allowed, g.const(np.float32(0)), g.const(np.float32(F32_MIN)))  # dynamo exporter
    mask = g.op("Expand", mask, g.const(np.array([batch, 1, seq, seq], np.int64)))
    for _ in range(layers):
        x = g.op("Add", x, _attention(g, rms_norm(g, x, d), mask, d, heads))
        h = rms_norm(g, x, d)
        mlp = g.op("Mul", _silu(g, g.op("MatMul", h, g.weight(d, 3 * d))), g.op("MatMul", h, g.weight(d, 3 * d)))
        x = g.op("Add", x, g.op("MatMul", mlp, g.weight(3 * d, d)))
    return _model(g, g.op("MatMul", rms_norm(g, x, d), g.weight(d, vocab)), batch, seq, vocab, "llama_like_masked")


def masked_feed(batch: int = 2, seq: int = 8, vocab: int = 40, *, left: bool, seed: int = 3) -> dict[str, np.ndarray]:
    """Token ids and a 0/1 attention mask with padding: the second sequence has 3 real tokens
    (right-padded for encoders, left-padded as generation pads decoder prompts)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    if left:
        mask[1, : seq - 3] = 0
    else:
        mask[1, 3:] = 0
    return {"input_ids": ids, "attention_mask": mask}


MODELS = {"bert": (bert_like_masked, False), "gpt2": (gpt2_like_masked, True), "llama": (llama_like_masked, True)}
