"""ONNX models shaped like third-party exports, built in code, for the verify tests:

* `bert_like`: token ids into a 30-row vocabulary, token-type ids into a 2-row table (uniform
  random ints in [0, 4) used to crash it), position embeddings, an attention mask used the
  exporters' way ((1 - mask) * -10000 added to the scores), layer norm, one attention head,
  symbolic batch / sequence dims.
* `yolo_like`: conv + BatchNormalization + SiLU blocks and a detection head whose box outputs are
  scaled to pixels (values up to ~700), so float32 reassociation in folded batch norms shows up
  as absolute errors around 1e-4..1e-3.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.onnx.onnx_util import init, make_model, vi

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def bert_like(seq: str | int = "seq", hidden: int = 16, vocab: int = 30) -> onnx.ModelProto:
    rng = np.random.default_rng(0)

    def w(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = [
        init("word_emb", w(vocab, hidden)),
        init("type_emb", w(2, hidden)),
        init("pos_emb", w(64, hidden)),
        init("wq", w(hidden, hidden)),
        init("wk", w(hidden, hidden)),
        init("wv", w(hidden, hidden)),
        init("gamma", np.ones(hidden, np.float32)),
        init("beta", np.zeros(hidden, np.float32)),
        init("one", np.float32(1.0)),
        init("neg", np.float32(-10000.0)),
        init("ax1", np.array([1], np.int64)),
        init("scale", np.float32(1.0 / np.sqrt(hidden))),
        init("zero", np.array(0, np.int64)),
        init("one_i", np.array(1, np.int64)),
        init("eps", np.float32(1e-12)),
        init("ax_last", np.array([-1])),
    ]
    n = helper.make_node
    nodes = [
        n("Gather", ["word_emb", "input_ids"], ["we"]),
        n("Gather", ["type_emb", "token_type_ids"], ["te"]),
        n("Shape", ["input_ids"], ["ids_shape"]),
        n("Gather", ["ids_shape", "one_i"], ["seq_len"], axis=0),
        n("Range", ["zero", "seq_len", "one_i"], ["positions"]),
        n("Gather", ["pos_emb", "positions"], ["pe"]),
        n("Add", ["we", "te"], ["e1"]),
        n("Add", ["e1", "pe"], ["emb"]),
        n("LayerNormalization", ["emb", "gamma", "beta"], ["h"], axis=-1, epsilon=1e-12),
        n("MatMul", ["h", "wq"], ["q"]),
        n("MatMul", ["h", "wk"], ["k"]),
        n("MatMul", ["h", "wv"], ["v"]),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["s0"]),
        n("Mul", ["s0", "scale"], ["s1"]),
        n("Unsqueeze", ["attention_mask", "ax1"], ["m1"]),
        n("Cast", ["m1"], ["mf"], to=F),
        n("Sub", ["one", "mf"], ["inv"]),
        n("Mul", ["inv", "neg"], ["additive"]),
        n("Add", ["s1", "additive"], ["scores"]),
        n("Softmax", ["scores"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v"], ["ctx"]),
        n("Add", ["ctx", "h"], ["out"]),
    ]
    ids = ["batch", seq]
    inputs = [vi("input_ids", I64, ids), vi("token_type_ids", I64, ids), vi("attention_mask", I64, ids)]
    return make_model(nodes, inputs, [vi("out", F, None)], inits, opset=18)


def bert_feed(
    batch: int = 2, seq: int = 8, vocab: int = 30, *, rng: np.random.Generator | None = None, padded: int = 3
) -> dict[str, np.ndarray]:
    """Token ids, two segments, and a mask whose first row ends in `padded` pad tokens (at least
    one real token is kept)."""
    rng = rng if rng is not None else np.random.default_rng(5)
    mask = np.ones((batch, seq), np.int64)
    mask[0, max(1, seq - padded) :] = 0
    types = np.zeros((batch, seq), np.int64)
    types[:, seq // 2 :] = 1
    return {
        "input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64),
        "token_type_ids": types,
        "attention_mask": mask,
    }


def yolo_like(size: int = 32) -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits, nodes = [], []
    n = helper.make_node
    x, ch = "images", 3
    for k, out_ch in enumerate((8, 16, 16)):
        wname = f"w{k}"
        inits += [
            init(wname, (rng.standard_normal((out_ch, ch, 3, 3)) * 0.4).astype(np.float32)),
            init(f"b{k}", (rng.standard_normal(out_ch) * 0.1).astype(np.float32)),
            init(f"g{k}", rng.uniform(0.5, 1.5, out_ch).astype(np.float32)),
            init(f"be{k}", (rng.standard_normal(out_ch) * 0.1).astype(np.float32)),
            init(f"mu{k}", (rng.standard_normal(out_ch) * 0.1).astype(np.float32)),
            init(f"var{k}", rng.uniform(0.5, 2.0, out_ch).astype(np.float32)),
        ]
        nodes += [
            n("Conv", [x, wname, f"b{k}"], [f"c{k}"], pads=[1, 1, 1, 1], strides=[2 if k else 1] * 2),
            n("BatchNormalization", [f"c{k}", f"g{k}", f"be{k}", f"mu{k}", f"var{k}"], [f"bn{k}"], epsilon=1e-3),
            n("Sigmoid", [f"bn{k}"], [f"sg{k}"]),
            n("Mul", [f"bn{k}", f"sg{k}"], [f"a{k}"]),
        ]
        x, ch = f"a{k}", out_ch
    inits += [
        init("wh", (rng.standard_normal((6, ch, 1, 1)) * 0.3).astype(np.float32)),
        init("pix", np.array([size * 22.0] * 4 + [1.0, 1.0], np.float32).reshape(1, 6, 1, 1)),
    ]
    nodes += [n("Conv", [x, "wh"], ["head"]), n("Sigmoid", ["head"], ["hs"]), n("Mul", ["hs", "pix"], ["det"])]
    return make_model(nodes, [vi("images", F, [1, 3, size, size])], [vi("det", F, None)], inits, opset=17)


def yolo_feed(size: int = 32) -> dict[str, np.ndarray]:
    return {"images": np.random.default_rng(7).uniform(0, 1, (1, 3, size, size)).astype(np.float32)}
