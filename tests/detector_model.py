"""A TopK-boundary detector built in code (issue 24 item 3): a YOLO-style head whose anchors
include a cluster of near-tied scores straddling the k boundary, the way saturated sigmoid scores
of a real image do, so that a 1e-7 reassociation (optimize_module folds the head's scale into the
matmul weights) flips ties and permutes the output rows.

    logits = (x @ W) * scale + bias          class head: features [:half], box head: [half:]
    score, label = max / argmax over sigmoid(class logits)
    top, idx = TopK(score, k)
    det = concat(boxes[idx], top, label[idx])      [k, 6]
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _ints(name: str, *v: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(v, np.int64), name)


def detector(n: int = 600, k: int = 300, feat: int = 16, classes: int = 4, *, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    half = feat // 2
    w = rng.normal(0, 0.3, (feat, 4 + classes)).astype(np.float32)
    w[half:, 4:] = 0  # the class head reads the first half of the features, the box head the rest
    w[:half, :4] = 0
    scale = rng.uniform(0.5, 1.5, 4 + classes).astype(np.float32)
    bias = rng.normal(0, 0.1, 4 + classes).astype(np.float32)
    bias[4:] -= 6  # most anchors see background: small scores, where sigmoid keeps relative precision
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(scale, "scale"),
        numpy_helper.from_array(bias, "bias"),
        _ints("s0", 0),
        _ints("s4", 4),
        _ints("s8", 4 + classes),
        _ints("ax2", 2),
        _ints("k", k),
        _ints("bshape", n, 4),
        _ints("flat", -1),
        _ints("col", -1, 1),
    ]
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "w"], ["mm"]),
        node("Mul", ["mm", "scale"], ["mms"]),
        node("Add", ["mms", "bias"], ["logits"]),
        node("Slice", ["logits", "s0", "s4", "ax2"], ["boxes"]),
        node("Slice", ["logits", "s4", "s8", "ax2"], ["cls"]),
        node("Sigmoid", ["cls"], ["prob"]),
        node("ReduceMax", ["prob"], ["score"], axes=[2], keepdims=0),
        node("ArgMax", ["prob"], ["label"], axis=2, keepdims=0),
        node("TopK", ["score", "k"], ["top", "idx"], axis=1),
        node("Reshape", ["boxes", "bshape"], ["b2"]),
        node("Reshape", ["idx", "flat"], ["i1"]),
        node("Gather", ["b2", "i1"], ["sel"], axis=0),
        node("Reshape", ["label", "flat"], ["l1"]),
        node("Gather", ["l1", "i1"], ["lsel"], axis=0),
        node("Cast", ["lsel"], ["lf"], to=TensorProto.FLOAT),
        node("Reshape", ["lf", "col"], ["lcol"]),
        node("Reshape", ["top", "col"], ["tcol"]),
        node("Concat", ["sel", "tcol", "lcol"], ["det"], axis=1),
    ]
    g = helper.make_graph(
        nodes,
        "topk_detector",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n, feat])],
        [helper.make_tensor_value_info("det", TensorProto.FLOAT, [k, 6])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def detector_feed(model: onnx.ModelProto, *, k: int = 300, seed: int = 0, tie_rows: int = 60) -> dict[str, np.ndarray]:
    """Random features, with `tie_rows` anchors whose class features are one copy of the anchor
    ranked k, each element moved by at most one ulp: their scores tie to ~1e-7, as much as a
    reassociated sum moves them. Their box features stay distinct, so a flip moves real rows."""
    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    n, feat = (d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:])
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (1, n, feat)).astype(np.float32)
    logits = (x[0] @ w["w"]) * w["scale"] + w["bias"]
    score = (1 / (1 + np.exp(-logits[:, 4:]))).max(1)
    base = x[0, np.argsort(-score)[k]].copy()
    rows = rng.choice(n, tie_rows, replace=False)
    half = feat // 2
    ulps = rng.integers(-2, 3, (tie_rows, half)).astype(np.float32)
    x[0, rows, :half] = base[:half] * (1 + ulps * np.float32(2.0**-23))
    return {"x": x}
