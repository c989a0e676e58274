"""A one-layer BERT written as torch.onnx exports Hugging Face's BertModel (embeddings with a
sliced position-id buffer, attention with the additive mask, an erf GELU feed-forward), and the
same model after onnxruntime's transformers optimizer (`optimize_model(model_type="bert")`),
what deployment guides run before serving (issue 37). The optimizer needs sympy."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.export_models import bert_feed as export_bert_feed
from tests.onnx.onnx_util import const, init, make_model, vi

F, I64 = TensorProto.FLOAT, TensorProto.INT64
HEADS, HEAD_DIM, VOCAB, MAX_POS = 2, 8, 50, 32
HIDDEN = HEADS * HEAD_DIM


def _linear(nodes, inits, rng, x, name, n_in, n_out):
    inits += [
        init(f"{name}.w", (rng.standard_normal((n_in, n_out)) * 0.3).astype(np.float32)),
        init(f"{name}.b", (rng.standard_normal(n_out) * 0.1).astype(np.float32)),
    ]
    nodes += [
        helper.make_node("MatMul", [x, f"{name}.w"], [f"{name}.mm"], name=f"/{name}/MatMul"),
        helper.make_node("Add", [f"{name}.mm", f"{name}.b"], [f"{name}.out"], name=f"/{name}/Add"),
    ]
    return f"{name}.out"


def _layer_norm(nodes, inits, rng, x, name):
    inits += [
        init(f"{name}.g", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)),
        init(f"{name}.b", (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)),
    ]
    out = f"{name}.out"
    nodes.append(
        helper.make_node(
            "LayerNormalization", [x, f"{name}.g", f"{name}.b"], [out], axis=-1, epsilon=1e-12, name=f"/{name}"
        )
    )
    return out


def _embeddings(nodes, inits, rng):
    inits += [
        init("word_embeddings", (rng.standard_normal((VOCAB, HIDDEN)) * 0.5).astype(np.float32)),
        init("position_embeddings", (rng.standard_normal((MAX_POS, HIDDEN)) * 0.5).astype(np.float32)),
        init("token_type_embeddings", (rng.standard_normal((2, HIDDEN)) * 0.5).astype(np.float32)),
        init("position_ids", np.arange(MAX_POS, dtype=np.int64)[None, :]),
    ]
    n = helper.make_node
    nodes += [
        const("one_i", np.array(1, np.int64)),
        const("axes0", np.array([0], np.int64)),
        const("starts0", np.array([0], np.int64)),
        const("axes1", np.array([1], np.int64)),
        const("steps1", np.array([1], np.int64)),
        n("Shape", ["input_ids"], ["ids_shape"], name="/embeddings/Shape"),
        n("Gather", ["ids_shape", "one_i"], ["seq_len"], axis=0, name="/embeddings/Gather"),
        n("Unsqueeze", ["seq_len", "axes0"], ["seq_len1"], name="/embeddings/Unsqueeze"),
        n("Slice", ["position_ids", "starts0", "seq_len1", "axes1", "steps1"], ["pos_ids"], name="/embeddings/Slice"),
        n("Gather", ["word_embeddings", "input_ids"], ["we"], name="/embeddings/word_embeddings/Gather"),
        n("Gather", ["token_type_embeddings", "token_type_ids"], ["te"], name="/embeddings/token_type/Gather"),
        n("Add", ["we", "te"], ["e1"], name="/embeddings/Add"),
        n("Gather", ["position_embeddings", "pos_ids"], ["pe"], name="/embeddings/position_embeddings/Gather"),
        n("Add", ["e1", "pe"], ["e2"], name="/embeddings/Add_1"),
    ]
    return _layer_norm(nodes, inits, rng, "e2", "embeddings.LayerNorm")


def _heads(nodes, x, name, perm):
    nodes += [
        helper.make_node("Reshape", [x, "bshd"], [f"{name}.4d"], name=f"/attention/{name}/Reshape"),
        helper.make_node("Transpose", [f"{name}.4d"], [f"{name}.t"], perm=perm, name=f"/attention/{name}/Transpose"),
    ]
    return f"{name}.t"


def _attention(nodes, inits, rng, h):
    n = helper.make_node
    nodes += [const("bshd", np.array([0, 0, HEADS, HEAD_DIM], np.int64))]
    q = _heads(nodes, _linear(nodes, inits, rng, h, "query", HIDDEN, HIDDEN), "q", [0, 2, 1, 3])
    k = _heads(nodes, _linear(nodes, inits, rng, h, "key", HIDDEN, HIDDEN), "k", [0, 2, 3, 1])
    v = _heads(nodes, _linear(nodes, inits, rng, h, "value", HIDDEN, HIDDEN), "v", [0, 2, 1, 3])
    nodes += [
        const("sqrt_d", np.array(np.sqrt(HEAD_DIM), np.float32)),
        const("one_f", np.array(1.0, np.float32)),
        const("neg", np.array(-10000.0, np.float32)),
        const("axes2", np.array([2], np.int64)),
        const("bsh", np.array([0, 0, HIDDEN], np.int64)),
        # HF's get_extended_attention_mask: (1 - mask[:, None, None, :]) * -10000
        n("Unsqueeze", ["attention_mask", "axes1"], ["m1"], name="/mask/Unsqueeze"),
        n("Unsqueeze", ["m1", "axes2"], ["m2"], name="/mask/Unsqueeze_1"),
        n("Cast", ["m2"], ["mf"], to=F, name="/mask/Cast"),
        n("Sub", ["one_f", "mf"], ["inv"], name="/mask/Sub"),
        n("Mul", ["inv", "neg"], ["additive"], name="/mask/Mul"),
        n("MatMul", [q, k], ["qk"], name="/attention/MatMul"),
        n("Div", ["qk", "sqrt_d"], ["scaled"], name="/attention/Div"),
        n("Add", ["scaled", "additive"], ["scores"], name="/attention/Add"),
        n("Softmax", ["scores"], ["probs"], axis=-1, name="/attention/Softmax"),
        n("MatMul", ["probs", v], ["ctx"], name="/attention/MatMul_1"),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name="/attention/Transpose"),
        n("Reshape", ["ctx_t", "bsh"], ["ctx_flat"], name="/attention/Reshape"),
    ]
    out = _linear(nodes, inits, rng, "ctx_flat", "attention.output", HIDDEN, HIDDEN)
    nodes.append(n("Add", [out, h], ["attn_res"], name="/attention/output/Add_1"))
    return _layer_norm(nodes, inits, rng, "attn_res", "attention.LayerNorm")


def _feed_forward(nodes, inits, rng, h):
    n = helper.make_node
    x = _linear(nodes, inits, rng, h, "intermediate", HIDDEN, 4 * HIDDEN)
    nodes += [  # torch's exact gelu: x * 0.5 * (1 + erf(x / sqrt(2)))
        const("sqrt2", np.array(np.sqrt(2.0), np.float32)),
        const("half", np.array(0.5, np.float32)),
        n("Div", [x, "sqrt2"], ["g_div"], name="/intermediate/Div"),
        n("Erf", ["g_div"], ["g_erf"], name="/intermediate/Erf"),
        n("Add", ["g_erf", "one_f"], ["g_add"], name="/intermediate/Add_1"),
        n("Mul", [x, "g_add"], ["g_mul"], name="/intermediate/Mul"),
        n("Mul", ["g_mul", "half"], ["gelu"], name="/intermediate/Mul_1"),
    ]
    out = _linear(nodes, inits, rng, "gelu", "output", 4 * HIDDEN, HIDDEN)
    nodes.append(n("Add", [out, h], ["ffn_res"], name="/output/Add_1"))
    return _layer_norm(nodes, inits, rng, "ffn_res", "output.LayerNorm")


def hf_bert() -> onnx.ModelProto:
    """The torch.onnx-style export: batch and sequence symbolic."""
    rng = np.random.default_rng(3)
    nodes: list = []
    inits: list = []
    h = _embeddings(nodes, inits, rng)
    h = _attention(nodes, inits, rng, h)
    h = _feed_forward(nodes, inits, rng, h)
    nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"], name="/Identity"))
    ids = ["batch_size", "sequence_length"]
    inputs = [vi(name, I64, ids) for name in ("input_ids", "token_type_ids", "attention_mask")]
    outputs = [vi("last_hidden_state", F, ["batch_size", "sequence_length", HIDDEN])]
    return make_model(nodes, inputs, outputs, inits, opset=17)


def ort_optimized_bert() -> onnx.ModelProto:
    """hf_bert through onnxruntime.transformers.optimizer, as `optimize_model(model_type="bert")`."""
    import tempfile
    from pathlib import Path

    from onnxruntime.transformers.optimizer import optimize_model

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "bert.onnx"
        onnx.save(hf_bert(), src)
        opt = optimize_model(str(src), model_type="bert", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0)
        return opt.model


def bert_feed(batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    return export_bert_feed(batch, seq, VOCAB, rng=np.random.default_rng(seed + 10 * batch + seq), padded=2)
