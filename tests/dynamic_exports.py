"""Exporter-style models with symbolic dims, built in code (issue 37):

* `dyn_batch_cnn`: what torch.onnx writes for a small ResNet with
  `dynamic_axes={"input": {0: "batch_size"}}`: Conv with bias, BatchNormalization, residual Add,
  MaxPool, an EfficientNet-style squeeze-excite gate, GlobalAveragePool, a Shape -> Gather ->
  Unsqueeze -> Concat -> Reshape flatten, Gemm.
* `kv_decoder`: a dynamo-exporter-style decoder layer with the KV cache as inputs and outputs
  (`past_sequence_length`, `sequence_length`, `batch_size` symbolic): Shape -> Gather -> Add ->
  Range (cache positions), Concat -> Reshape of the heads, Expand of a causal mask to
  [batch, 1, seq, total], ConstantOfShape, a Slice of a preallocated position table with bounds
  from Shape, and Reshape with 0 / -1.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.onnx.onnx_util import const, init, make_model, vi

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _w(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def dyn_batch_cnn(channels: int = 8, classes: int = 10, size: int = 16) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    c = channels
    inits = [
        init("c1.w", _w(rng, c, 3, 3, 3)),
        init("c1.b", _w(rng, c)),
        init("c2.w", _w(rng, c, c, 3, 3)),
        init("c2.b", _w(rng, c)),
        init("bn.scale", (1 + _w(rng, c, scale=0.1)).astype(np.float32)),
        init("bn.bias", _w(rng, c, scale=0.1)),
        init("bn.mean", _w(rng, c, scale=0.1)),
        init("bn.var", (1 + np.abs(_w(rng, c, scale=0.1))).astype(np.float32)),
        init("se.w", _w(rng, c, c, 1, 1)),
        init("se.b", _w(rng, c)),
        init("fc.w", _w(rng, classes, c)),
        init("fc.b", _w(rng, classes)),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "c1.w", "c1.b"], ["c1"], pads=[1, 1, 1, 1], name="/stem/Conv"),
        helper.make_node("Relu", ["c1"], ["r1"], name="/stem/Relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="/stem/MaxPool"),
        helper.make_node("Conv", ["p1", "c2.w", "c2.b"], ["c2"], pads=[1, 1, 1, 1], name="/layer1/Conv"),
        helper.make_node(
            "BatchNormalization", ["c2", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["bn"], name="/layer1/bn"
        ),
        helper.make_node("Add", ["bn", "p1"], ["res"], name="/layer1/Add"),
        helper.make_node("Relu", ["res"], ["r2"], name="/layer1/Relu"),
        # EfficientNet's squeeze-excite: [B, C, 1, 1] gates times [B, C, H, W], both dynamic
        helper.make_node("GlobalAveragePool", ["r2"], ["se_in"], name="/se/GlobalAveragePool"),
        helper.make_node("Conv", ["se_in", "se.w", "se.b"], ["se_c"], name="/se/Conv"),
        helper.make_node("Sigmoid", ["se_c"], ["se_gate"], name="/se/Sigmoid"),
        helper.make_node("Mul", ["r2", "se_gate"], ["r3"], name="/se/Mul"),
        helper.make_node("GlobalAveragePool", ["r3"], ["gap"], name="/GlobalAveragePool"),
        # torch's flatten(1): Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))
        helper.make_node("Shape", ["gap"], ["gap_shape"], name="/Shape"),
        const("zero", np.array(0, np.int64)),
        helper.make_node("Gather", ["gap_shape", "zero"], ["batch"], axis=0, name="/Gather"),
        const("ax0", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["batch", "ax0"], ["batch1"], name="/Unsqueeze"),
        const("minus1", np.array([-1], np.int64)),
        helper.make_node("Concat", ["batch1", "minus1"], ["flat_shape"], axis=0, name="/Concat"),
        helper.make_node("Reshape", ["gap", "flat_shape"], ["flat"], name="/Reshape"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["output"], transB=1, name="/fc/Gemm"),
    ]
    return make_model(
        nodes,
        [vi("input", F, ["batch_size", 3, size, size])],
        [vi("output", F, ["batch_size", classes])],
        inits,
        opset=17,
    )


def cnn_feed(batch: int, size: int = 16) -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(batch).standard_normal((batch, 3, size, size)).astype(np.float32)}


def _n(op, ins, outs, name, **kw):
    return helper.make_node(op, ins, outs, name=name, **kw)


def kv_decoder(heads: int = 2, head_dim: int = 8, vocab: int = 32, max_pos: int = 128) -> onnx.ModelProto:
    """One attention layer as the dynamo exporter writes it, KV cache in and out."""
    rng = np.random.default_rng(1)
    d = heads * head_dim
    inits = [
        init("embed", _w(rng, vocab, d, scale=0.5)),
        init("pos_table", _w(rng, max_pos, d, scale=0.5)),
        init("wq", _w(rng, d, d)),
        init("wk", _w(rng, d, d)),
        init("wv", _w(rng, d, d)),
        init("wo", _w(rng, d, d)),
        init("lm_head", _w(rng, d, vocab)),
    ]
    c = [
        const("i0", np.array(0, np.int64)),
        const("i1", np.array(1, np.int64)),
        const("i2", np.array(2, np.int64)),
        const("v0", np.array([0], np.int64)),
        const("v1", np.array([1], np.int64)),
        const("heads", np.array([heads], np.int64)),
        const("hd", np.array([head_dim], np.int64)),
        const("scale", np.array(1 / np.sqrt(head_dim), np.float32)),
        const("neg", np.array(-1e9, np.float32)),
        const("zf", np.array(0, np.float32)),
        const("flat3", np.array([0, 0, -1], np.int64)),
    ]
    nodes = [
        _n("Shape", ["input_ids"], ["ids_shape"], "node_Shape_0"),
        _n("Gather", ["ids_shape", "i0"], ["B"], "node_Gather_1", axis=0),
        _n("Gather", ["ids_shape", "i1"], ["S"], "node_Gather_2", axis=0),
        _n("Shape", ["past_key"], ["past_shape"], "node_Shape_3"),
        _n("Gather", ["past_shape", "i2"], ["P"], "node_Gather_4", axis=0),
        _n("Add", ["P", "S"], ["total"], "node_Add_5"),
        _n("Range", ["P", "total", "i1"], ["cache_position"], "node_Range_6"),
        _n("Unsqueeze", ["cache_position", "v0"], ["position_ids"], "node_Unsqueeze_7"),
        _n("Gather", ["embed", "input_ids"], ["tok"], "node_Gather_8", axis=0),
        # positions sliced out of a preallocated table with bounds from Shape
        _n("Unsqueeze", ["P", "v0"], ["P1"], "node_Unsqueeze_9"),
        _n("Unsqueeze", ["total", "v0"], ["total1"], "node_Unsqueeze_10"),
        _n("Slice", ["pos_table", "P1", "total1", "v0"], ["pos"], "node_Slice_11"),
        _n("Add", ["tok", "pos"], ["h"], "node_Add_12"),
        _n("Unsqueeze", ["B", "v0"], ["B1"], "node_Unsqueeze_13"),
        _n("Unsqueeze", ["S", "v0"], ["S1"], "node_Unsqueeze_14"),
        _n("Concat", ["B1", "S1", "heads", "hd"], ["bshd"], "node_Concat_15", axis=0),
    ]
    for name in ("q", "k", "v"):
        nodes += [
            _n("MatMul", ["h", f"w{name}"], [f"{name}_lin"], f"node_MatMul_{name}"),
            _n("Reshape", [f"{name}_lin", "bshd"], [f"{name}_4d"], f"node_Reshape_{name}"),
            _n("Transpose", [f"{name}_4d"], [f"{name}_t"], f"node_Transpose_{name}", perm=[0, 2, 1, 3]),
        ]
    nodes += [
        _n("Concat", ["past_key", "k_t"], ["present_key"], "node_Concat_16", axis=2),
        _n("Concat", ["past_value", "v_t"], ["present_value"], "node_Concat_17", axis=2),
        _n("Transpose", ["present_key"], ["kT"], "node_Transpose_18", perm=[0, 1, 3, 2]),
        _n("MatMul", ["q_t", "kT"], ["qk"], "node_MatMul_19"),
        _n("Mul", ["qk", "scale"], ["scores"], "node_Mul_20"),
        # causal mask: arange(total) > cache_position[:, None], expanded to [B, 1, S, total]
        _n("Range", ["i0", "total", "i1"], ["kv_pos"], "node_Range_21"),
        _n("Unsqueeze", ["cache_position", "v1"], ["cp_col"], "node_Unsqueeze_22"),
        _n("Greater", ["kv_pos", "cp_col"], ["future"], "node_Greater_23"),
        _n("Concat", ["S1", "total1"], ["st"], "node_Concat_24", axis=0),
        _n(
            "ConstantOfShape",
            ["st"],
            ["zeros"],
            "node_ConstantOfShape_25",
            value=onnx.numpy_helper.from_array(np.zeros(1, np.float32)),
        ),
        _n("Where", ["future", "neg", "zeros"], ["mask2d"], "node_Where_26"),
        _n("Concat", ["B1", "v1", "S1", "total1"], ["b1st"], "node_Concat_27", axis=0),
        _n("Expand", ["mask2d", "b1st"], ["mask"], "node_Expand_28"),
        _n("Add", ["scores", "mask"], ["masked"], "node_Add_29"),
        _n("Softmax", ["masked"], ["probs"], "node_Softmax_30", axis=-1),
        _n("MatMul", ["probs", "present_value"], ["ctx"], "node_MatMul_31"),
        _n("Transpose", ["ctx"], ["ctx_t"], "node_Transpose_32", perm=[0, 2, 1, 3]),
        _n("Reshape", ["ctx_t", "flat3"], ["ctx_flat"], "node_Reshape_33"),
        _n("MatMul", ["ctx_flat", "wo"], ["attn"], "node_MatMul_34"),
        _n("Add", ["h", "attn"], ["h2"], "node_Add_35"),
        _n("MatMul", ["h2", "lm_head"], ["logits"], "node_MatMul_36"),
    ]
    kv = ["batch_size", heads, "past_sequence_length", head_dim]
    present = ["batch_size", heads, "total_sequence_length", head_dim]
    return make_model(
        c + nodes,
        [vi("input_ids", I64, ["batch_size", "sequence_length"]), vi("past_key", F, kv), vi("past_value", F, kv)],
        [
            vi("logits", F, ["batch_size", "sequence_length", vocab]),
            vi("present_key", F, present),
            vi("present_value", F, present),
        ],
        inits,
        opset=18,
    )


def decoder_feed(past: int, new: int, batch: int = 1, heads: int = 2, head_dim: int = 8) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(past * 100 + new)
    kv = (batch, heads, past, head_dim)
    return {
        "input_ids": rng.integers(0, 32, (batch, new)).astype(np.int64),
        "past_key": rng.standard_normal(kv).astype(np.float32),
        "past_value": rng.standard_normal(kv).astype(np.float32),
    }
