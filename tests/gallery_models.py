"""The real-model gallery's models, built in code with seeded weights (onnx.helper): an LSTM/GRU
sequence classifier, a Loop + If model, an NMS detector head with RoiAlign, a QDQ int8 CNN, and a
transformer block in ONNX Runtime's fused ops. tests/onnx/test_gallery.py checks them against
onnxruntime and through the pipelines; tests/gpu/test_gallery_gpu.py runs them on the GPU target."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _w(rng: np.random.Generator, name: str, *shape: int, scale: float = 0.3, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(dtype), name)


def _t(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _model(nodes, inputs, outputs, inits, opset: int = 17, msft: bool = False) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "gallery", inputs, outputs, inits)
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if msft else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 9
    return m


# --- LSTM sequence model ------------------------------------------------------------------------------
def lstm_classifier(
    seq: int = 6, batch: int = 2, vocab: int = 20, emb: int = 8, hidden: int = 12, classes: int = 3
) -> onnx.ModelProto:
    """Token ids -> embedding -> bidirectional LSTM -> GRU over its outputs -> last state -> Gemm -> Softmax."""
    rng = np.random.default_rng(101)
    nodes = [
        helper.make_node("Gather", ["emb", "tokens"], ["x"]),  # [seq, batch, emb]
        helper.make_node(
            "LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], hidden_size=hidden, direction="bidirectional"
        ),
        helper.make_node("Transpose", ["y"], ["y_t"], perm=[0, 2, 1, 3]),  # [seq, batch, 2, hidden]
        helper.make_node("Reshape", ["y_t", "flat_shape"], ["y2"]),
        helper.make_node("GRU", ["y2", "GW", "GR", "GB"], ["gy", "g_h"], hidden_size=hidden, linear_before_reset=1),
        helper.make_node("Squeeze", ["g_h", "axes0"], ["last"]),
        helper.make_node("Gemm", ["last", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    inits = [
        _w(rng, "emb", vocab, emb),
        _w(rng, "W", 2, 4 * hidden, emb),
        _w(rng, "R", 2, 4 * hidden, hidden),
        _w(rng, "B", 2, 8 * hidden),
        _t("flat_shape", np.array([seq, batch, 2 * hidden], np.int64)),
        _w(rng, "GW", 1, 3 * hidden, 2 * hidden),
        _w(rng, "GR", 1, 3 * hidden, hidden),
        _w(rng, "GB", 1, 6 * hidden),
        _t("axes0", np.array([0], np.int64)),
        _w(rng, "fc_w", classes, hidden),
        _w(rng, "fc_b", classes),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("tokens", I64, [seq, batch])],
        [
            helper.make_tensor_value_info("probs", F, [batch, classes]),
            helper.make_tensor_value_info("y_c", F, [2, batch, hidden]),
        ],
        inits,
    )


# --- If / Loop ------------------------------------------------------------------------------------
def control_flow_model(n: int = 4) -> onnx.ModelProto:
    """Loop 3 times: acc = tanh(acc @ W + x) (scan output: each acc); then If sum(acc) > 0: acc * 2
    else acc - w_bias (both branches read outer values)."""
    rng = np.random.default_rng(102)
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["acc_in", "W"], ["mm"]),
            helper.make_node("Add", ["mm", "x"], ["pre"]),
            helper.make_node("Tanh", ["pre"], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["acc_out"], ["scan_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", I64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", F, [1, n]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", F, [1, n]),
            helper.make_tensor_value_info("scan_out", F, [1, n]),
        ],
    )
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["acc", "two"], ["r"])], "then", [], [helper.make_tensor_value_info("r", F, [1, n])]
    )
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["acc", "x"], ["r2"])], "else", [], [helper.make_tensor_value_info("r2", F, [1, n])]
    )
    nodes = [
        helper.make_node("Loop", ["trip", "keep_going", "acc0"], ["acc", "steps"], body=body),
        helper.make_node("ReduceSum", ["acc"], ["total"], keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"]),
        helper.make_node("If", ["positive"], ["out"], then_branch=then_g, else_branch=else_g),
    ]
    inits = [
        _w(rng, "W", n, n, scale=0.8),
        _t("trip", np.array(3, np.int64)),
        _t("keep_going", np.array(True)),
        _t("acc0", np.zeros((1, n), np.float32)),
        _t("two", np.float32(2.0)),
        _t("zero", np.float32(0.0)),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [1, n])],
        [helper.make_tensor_value_info("out", F, [1, n]), helper.make_tensor_value_info("steps", F, [3, 1, n])],
        inits,
    )


# --- detector with NonMaxSuppression -------------------------------------------------------------------
def nms_detector(boxes: int = 12, classes: int = 2) -> onnx.ModelProto:
    """Conv features -> per-anchor box deltas and class scores -> NonMaxSuppression; RoiAlign pools the
    anchors' feature windows."""
    rng = np.random.default_rng(103)
    nodes = [
        helper.make_node("Conv", ["img", "cw", "cb"], ["feat"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["feat"], ["act"]),
        helper.make_node("GlobalAveragePool", ["act"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["vec"]),
        helper.make_node("Gemm", ["vec", "score_w"], ["raw_scores"], transB=1),
        helper.make_node("Reshape", ["raw_scores", "score_shape"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["scores"]),
        helper.make_node("Gemm", ["vec", "delta_w"], ["raw_deltas"], transB=1),
        helper.make_node("Reshape", ["raw_deltas", "box_shape"], ["deltas"]),
        helper.make_node("Add", ["anchors", "deltas"], ["boxes"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score_t"], ["selected"]),
        helper.make_node(
            "RoiAlign",
            ["act", "rois", "roi_batch"],
            ["crops"],
            output_height=2,
            output_width=2,
            sampling_ratio=2,
            spatial_scale=0.5,
        ),
    ]
    y, x = np.meshgrid(np.linspace(0, 12, 4), np.linspace(0, 12, 3), indexing="ij")
    anchors = np.stack([y.ravel(), x.ravel(), y.ravel() + 6, x.ravel() + 6], axis=1)[None].astype(np.float32)
    inits = [
        _w(rng, "cw", 4, 3, 3, 3),
        _w(rng, "cb", 4),
        _w(rng, "score_w", classes * boxes, 4, scale=2.0),
        _w(rng, "delta_w", boxes * 4, 4, scale=1.0),
        _t("score_shape", np.array([1, classes, boxes], np.int64)),
        _t("box_shape", np.array([1, boxes, 4], np.int64)),
        _t("anchors", anchors),
        _t("max_out", np.array([3], np.int64)),
        _t("iou", np.array([0.4], np.float32)),
        _t("score_t", np.array([0.2], np.float32)),
        _t("rois", anchors[0, :4] / 2),
        _t("roi_batch", np.zeros(4, np.int64)),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("img", F, [1, 3, 16, 16])],
        [
            helper.make_tensor_value_info("selected", I64, [None, 3]),
            helper.make_tensor_value_info("crops", F, [4, 4, 2, 2]),
        ],
        inits,
        opset=16,
    )


# --- QDQ int8 CNN -------------------------------------------------------------------------------------------
def qdq_cnn() -> onnx.ModelProto:
    """QDQ-format conv (per-channel int8 weights) -> QLinearConv -> QLinearMatMul head, uint8 activations."""
    rng = np.random.default_rng(104)
    w1 = rng.integers(-60, 60, size=(4, 3, 3, 3)).astype(np.int8)
    w2 = rng.integers(-60, 60, size=(4, 4, 3, 3)).astype(np.int8)
    w3 = rng.integers(-60, 60, size=(4, 5)).astype(np.int8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w1", "w1s"], ["w1f"], axis=0),
        helper.make_node("Conv", ["xf", "w1f", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("QuantizeLinear", ["r1", "as", "az"], ["r1q"]),
        helper.make_node(
            "QLinearConv",
            ["r1q", "as", "az", "w2", "w2s", "wz2", "bs", "bz", "b2"],
            ["c2q"],
            pads=[1, 1, 1, 1],
            strides=[2, 2],
        ),
        helper.make_node("Reshape", ["c2q", "flat"], ["c2flat"]),
        helper.make_node("Slice", ["c2flat", "s0", "s1", "s_axes"], ["feat"]),
        helper.make_node("QLinearMatMul", ["feat", "bs", "bz", "w3", "w3s", "wz3", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    u8 = np.uint8
    inits = [
        _t("xs", np.float32(0.02)),
        _t("xz", u8(128)),
        _t("w1", w1),
        _t("w1s", np.full(4, 0.01, np.float32)),
        _w(rng, "b1", 4, scale=0.1),
        _t("as", np.float32(0.15)),
        _t("az", u8(0)),
        _t("w2", w2),
        _t("w2s", np.array([0.01, 0.02, 0.015, 0.012], np.float32)),
        _t("wz2", np.zeros(4, np.int8)),
        _t("bs", np.float32(0.25)),
        _t("bz", u8(128)),
        _t("b2", rng.integers(-200, 200, size=4).astype(np.int32)),
        _t("flat", np.array([4, -1], np.int64)),
        _t("s0", np.array([0], np.int64)),
        _t("s1", np.array([4], np.int64)),
        _t("s_axes", np.array([1], np.int64)),
        _t("w3", w3),
        _t("w3s", np.float32(0.02)),
        _t("wz3", np.int8(0)),
        _t("ys", np.float32(0.5)),
        _t("yz", u8(128)),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", F, [4, 5])],
        inits,
        opset=13,
    )


# --- transformer block in ONNX Runtime's fused ops --------------------------------------------------------------
def fused_transformer(batch: int = 2, seq: int = 5, hidden: int = 16, heads: int = 2, ff: int = 32) -> onnx.ModelProto:
    """A decoder block as ORT's transformer optimizer writes it: SkipLayerNormalization,
    RotaryEmbedding on q/k, MultiHeadAttention, 4-bit MatMulNBits projections, BiasGelu, FastGelu."""
    rng = np.random.default_rng(105)
    ms = "com.microsoft"
    head = hidden // heads
    block = 16

    def nbits(name: str, n: int, k: int) -> list[onnx.TensorProto]:
        q = rng.integers(0, 16, size=(n, k)).astype(np.uint8)
        packed = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(n, k // block, block // 2)
        return [_t(name, packed), _t(name + "_s", (rng.uniform(0.01, 0.05, n * (k // block))).astype(np.float32))]

    nodes = [
        helper.make_node(
            "SkipLayerNormalization", ["x", "skip", "ln_g", "ln_b"], ["h", "", "", "sum"], domain=ms, epsilon=1e-5
        ),
        helper.make_node(
            "MatMulNBits", ["h", "wq", "wq_s"], ["q"], domain=ms, K=hidden, N=hidden, bits=4, block_size=block
        ),
        helper.make_node("MatMul", ["h", "wk"], ["k"]),
        helper.make_node("MatMul", ["h", "wv"], ["v"]),
        helper.make_node("RotaryEmbedding", ["q", "pos", "cos", "sin"], ["q_rot"], domain=ms, num_heads=heads),
        helper.make_node("RotaryEmbedding", ["k", "pos", "cos", "sin"], ["k_rot"], domain=ms, num_heads=heads),
        helper.make_node(
            "MultiHeadAttention",
            ["q_rot", "k_rot", "v", "attn_b"],
            ["attn"],
            domain=ms,
            num_heads=heads,
            unidirectional=1,
        ),
        helper.make_node("SkipLayerNormalization", ["attn", "sum", "ln2_g", "ln2_b"], ["h2"], domain=ms),
        helper.make_node("MatMul", ["h2", "w1"], ["f1"]),
        helper.make_node("BiasGelu", ["f1", "b1"], ["g1"], domain=ms),
        helper.make_node("MatMul", ["g1", "w2"], ["f2"]),
        helper.make_node("FastGelu", ["f2", "b2"], ["out"], domain=ms),
    ]
    angles = np.arange(seq + 4)[:, None] / (10000 ** (np.arange(head // 2) / (head // 2)))
    inits = [
        _w(rng, "skip", batch, seq, hidden),
        _w(rng, "ln_g", hidden, scale=1.0),
        _w(rng, "ln_b", hidden),
        *nbits("wq", hidden, hidden),
        _w(rng, "wk", hidden, hidden),
        _w(rng, "wv", hidden, hidden),
        _t("pos", np.array([2], np.int64)),
        _t("cos", np.cos(angles).astype(np.float32)),
        _t("sin", np.sin(angles).astype(np.float32)),
        _w(rng, "attn_b", 3 * hidden, scale=0.1),
        _w(rng, "ln2_g", hidden, scale=1.0),
        _w(rng, "ln2_b", hidden),
        _w(rng, "w1", hidden, ff),
        _w(rng, "b1", ff),
        _w(rng, "w2", ff, hidden),
        _w(rng, "b2", hidden),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [batch, seq, hidden])],
        [helper.make_tensor_value_info("out", F, [batch, seq, hidden])],
        inits,
        msft=True,
    )


MODELS = {
    "lstm": lstm_classifier,
    "if_loop": control_flow_model,
    "nms_detector": nms_detector,
    "qdq_cnn": qdq_cnn,
    "fused_transformer": fused_transformer,
}
