"""A YOLOv10n-style end-to-end detector: the YOLOv8-style backbone and PAN neck of `yolo`, a
one-to-one detect head per stride (DFL box regression, sigmoid class scores), and the NMS-free
post-processing ultralytics exports for YOLOv10 (`v10postprocess`):

    max_scores = scores.amax(-1); _, index = topk(max_scores, max_det)       # TopK over anchors
    boxes, scores = gather(boxes, index), gather(scores, index)               # GatherElements
    scores, index = topk(scores.flatten(1), max_det)                          # TopK over class scores
    labels, index = index % nc, index // nc
    boxes = boxes[batch, index]                                               # GatherND, batch_dims=1
    detections = concat([boxes, scores, labels], -1)                          # [1, max_det, 6]

The defaults are test-sized; `yolo_e2e(size=640, classes=80, max_det=300, width=16)` is the
YOLOv10n-sized network the GPU benchmark times.
"""

from __future__ import annotations

import numpy as np
import onnx

from ._builder import GraphBuilder
from .yolo import c2f_block, conv_silu, sppf_block

REG_MAX = 16  # DFL bins per box side
# Random weights give logits near 0 (every score ~0.5, top scores a few 1e-5 apart); a trained
# head spreads them. Scaling keeps the ranking well separated, so a device result that differs from
# the reference in the last bits cannot reorder the detections.
LOGIT_SCALE = 8.0


def _backbone_neck(g: GraphBuilder, x: str, w: int) -> list[tuple[str, int]]:
    """P3, P4, P5 feature maps (strides 8, 16, 32) and their channels."""
    y = conv_silu(g, x, 3, w, 3, 2)
    y = c2f_block(g, conv_silu(g, y, w, 2 * w, 3, 2), 2 * w, 2 * w, 1)
    p3 = c2f_block(g, conv_silu(g, y, 2 * w, 4 * w, 3, 2), 4 * w, 4 * w, 2)
    p4 = c2f_block(g, conv_silu(g, p3, 4 * w, 8 * w, 3, 2), 8 * w, 8 * w, 2)
    p5 = sppf_block(g, c2f_block(g, conv_silu(g, p4, 8 * w, 16 * w, 3, 2), 16 * w, 16 * w, 1), 16 * w)
    scale = g.constant(np.array([1, 1, 2, 2], np.float32))
    up = g.node("Resize", [p5, "", scale], mode="nearest")
    n4 = c2f_block(g, g.node("Concat", [up, p4], axis=1), 24 * w, 8 * w, 1)
    up = g.node("Resize", [n4, "", scale], mode="nearest")
    n3 = c2f_block(g, g.node("Concat", [up, p3], axis=1), 12 * w, 4 * w, 1)
    d = conv_silu(g, n3, 4 * w, 4 * w, 3, 2)
    m4 = c2f_block(g, g.node("Concat", [d, n4], axis=1), 12 * w, 8 * w, 1)
    d = conv_silu(g, m4, 8 * w, 8 * w, 3, 2)
    m5 = c2f_block(g, g.node("Concat", [d, p5], axis=1), 24 * w, 16 * w, 1)
    return [(n3, 4 * w), (m4, 8 * w), (m5, 16 * w)]


def _head(g: GraphBuilder, feat: str, c: int, classes: int, hw: int) -> tuple[str, str]:
    """Box distances [1, 4, hw] (DFL expectation) and class logits [1, classes, hw] of one level."""
    cb, cc = max(16, c // 4, 4 * REG_MAX), max(c, min(classes, 100))
    box = conv_silu(g, conv_silu(g, feat, c, cb, 3), cb, cb, 3)
    box = g.conv(box, cb, 4 * REG_MAX, 1, bias=True)
    cls = conv_silu(g, conv_silu(g, feat, c, cc, 3), cc, cc, 3)
    cls = g.node("Mul", [g.conv(cls, cc, classes, 1, bias=True), g.constant(np.float32(LOGIT_SCALE))])
    dist = g.node("Reshape", [box, g.constant(np.array([1, 4, REG_MAX, hw], np.int64))])
    prob = g.node("Softmax", [dist], axis=2)
    bins = g.constant(np.arange(REG_MAX, dtype=np.float32).reshape(1, 1, REG_MAX, 1))
    expect = g.node("ReduceSum", [g.node("Mul", [prob, bins]), g.constant(np.array([2], np.int64))], keepdims=0)
    return expect, g.node("Reshape", [cls, g.constant(np.array([1, classes, hw], np.int64))])


def _anchors(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Anchor centres [1, 2, A] and strides [1, 1, A] over the three levels."""
    points, strides = [], []
    for s in (8, 16, 32):
        n = size // s
        ys, xs = np.meshgrid(np.arange(n) + 0.5, np.arange(n) + 0.5, indexing="ij")
        points.append(np.stack([xs.reshape(-1), ys.reshape(-1)]))
        strides.append(np.full(n * n, s))
    return (np.concatenate(points, 1)[None].astype(np.float32), np.concatenate(strides)[None, None].astype(np.float32))


def _slice(g: GraphBuilder, x: str, start: int, end: int, axis: int) -> str:
    ints = lambda v: g.constant(np.array([v], np.int64))  # noqa: E731
    return g.node("Slice", [x, ints(start), ints(end), ints(axis)])


def _postprocess(g: GraphBuilder, boxes: str, scores: str, classes: int, max_det: int) -> str:
    """ultralytics' v10postprocess on boxes [1, A, 4] and scores [1, A, classes]."""
    i64 = lambda v: g.constant(np.array(v, np.int64))  # noqa: E731
    best = g.node("ReduceMax", [scores, i64([-1])], keepdims=0)
    _, index = g.node("TopK", [best, i64([max_det])], n_out=2, axis=-1, largest=1, sorted=1)
    index = g.node("Unsqueeze", [index, i64([-1])])
    boxes = g.node("GatherElements", [boxes, g.node("Expand", [index, i64([1, max_det, 4])])], axis=1)
    scores = g.node("GatherElements", [scores, g.node("Expand", [index, i64([1, max_det, classes])])], axis=1)
    flat = g.node("Reshape", [scores, i64([1, max_det * classes])])
    top, index = g.node("TopK", [flat, i64([max_det])], n_out=2, axis=-1, largest=1, sorted=1)
    labels = g.node("Mod", [index, i64(classes)])
    index = g.node("Div", [index, i64(classes)])
    boxes = g.node("GatherND", [boxes, g.node("Unsqueeze", [index, i64([-1])])], batch_dims=1)
    labels = g.node("Cast", [g.node("Unsqueeze", [labels, i64([-1])])], to=onnx.TensorProto.FLOAT)
    return g.node("Concat", [boxes, g.node("Unsqueeze", [top, i64([-1])]), labels], axis=-1, name="detections")


def yolo_e2e(size: int = 64, classes: int = 4, max_det: int = 20, width: int = 8) -> onnx.ModelProto:
    g = GraphBuilder("yolo_e2e", seed=11)
    x = g.input("images", [1, 3, size, size])
    dists, logits = [], []
    for (feat, c), s in zip(_backbone_neck(g, x, width), (8, 16, 32)):
        d, k = _head(g, feat, c, classes, (size // s) ** 2)
        dists.append(d)
        logits.append(k)
    dist = g.node("Concat", dists, axis=2)  # [1, 4, A]: left, top, right, bottom distances
    points, strides = _anchors(size)
    pts, st = g.init(points, "anchors"), g.init(strides, "strides")
    lt, rb = _slice(g, dist, 0, 2, 1), _slice(g, dist, 2, 4, 1)
    xyxy = g.node("Concat", [g.node("Sub", [pts, lt]), g.node("Add", [pts, rb])], axis=1)
    boxes = g.node("Transpose", [g.node("Mul", [xyxy, st])], perm=[0, 2, 1])  # [1, A, 4] in pixels
    scores = g.node("Transpose", [g.node("Sigmoid", [g.node("Concat", logits, axis=2)])], perm=[0, 2, 1])
    _postprocess(g, boxes, scores, classes, max_det)
    g.output("detections", dims=[1, max_det, 6])
    return g.model()
