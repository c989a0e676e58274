"""A full YOLOv8-shaped detector (backbone, PAN neck, three-scale decoupled head with the DFL box
decode) at YOLOv8n's width and YOLOv8l's depth: ~800 instructions after import, the size of a
real export and the explorer's real-size example. Weights are seeded; the input is small
(1x3x96x96 by default) so the per-pass numeric check stays quick while the graph keeps its real
structure.
"""

from __future__ import annotations

import numpy as np
import onnx

from ._builder import GraphBuilder


def _conv(g: GraphBuilder, x: str, c_in: int, c_out: int, k: int, s: int = 1) -> str:
    y = g.conv(x, c_in, c_out, k, s, bias=True)  # BN folded into the conv, as exports do
    return g.node("Mul", [y, g.node("Sigmoid", [y])])  # SiLU


def _c2f(g: GraphBuilder, x: str, c_in: int, c_out: int, n: int, shortcut: bool = True) -> str:
    half = c_out // 2
    y = _conv(g, x, c_in, c_out, 1)
    a, b = g.node("Split", [y, g.constant(np.array([half, half], np.int64))], n_out=2, axis=1)
    parts = [a, b]
    for _ in range(n):
        z = _conv(g, _conv(g, b, half, half, 3), half, half, 3)
        b = g.node("Add", [b, z]) if shortcut else z
        parts.append(b)
    return _conv(g, g.node("Concat", parts, axis=1), (2 + n) * half, c_out, 1)


def _sppf(g: GraphBuilder, x: str, c: int) -> str:
    y = _conv(g, x, c, c // 2, 1)
    pools = [y]
    for _ in range(3):
        pools.append(g.node("MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]))
    return _conv(g, g.node("Concat", pools, axis=1), 2 * c, c, 1)


def _up(g: GraphBuilder, x: str) -> str:
    return g.node("Resize", [x, "", g.constant(np.array([1, 1, 2, 2], np.float32))], mode="nearest")


def _head(g: GraphBuilder, x: str, c: int, reg: int, classes: int) -> str:
    """One scale of the decoupled head: box branch (4*reg DFL bins) and class branch, concatenated
    and flattened to [1, 4*reg + classes, H*W]."""
    cb, cc = max(16, c // 4, 4 * reg), max(c, classes)
    box = g.conv(_conv(g, _conv(g, x, c, cb, 3), cb, cb, 3), cb, 4 * reg, 1, bias=True)
    cls = g.conv(_conv(g, _conv(g, x, c, cc, 3), cc, cc, 3), cc, classes, 1, bias=True)
    y = g.node("Concat", [box, cls], axis=1)
    return g.node("Reshape", [y, g.constant(np.array([1, 4 * reg + classes, -1], np.int64))])


def _dfl(g: GraphBuilder, box: str, reg: int) -> str:
    """Distribution focal loss decode: softmax over reg bins, then the expectation (a 1x1 conv
    with weights 0..reg-1, as the export has it)."""
    y = g.node("Reshape", [box, g.constant(np.array([1, 4, reg, -1], np.int64))])
    y = g.node("Softmax", [g.node("Transpose", [y], perm=[0, 2, 1, 3])], axis=1)
    w = g.init(np.arange(reg, dtype=np.float32).reshape(1, reg, 1, 1), "dfl")
    y = g.node("Conv", [y, w])
    return g.node("Reshape", [y, g.constant(np.array([1, 4, -1], np.int64))])


def yolov8(size: int = 96, classes: int = 8, width: int = 16, depth: int = 3, reg: int = 8) -> onnx.ModelProto:
    g = GraphBuilder("yolov8", seed=8)
    w = [width, 2 * width, 4 * width, 8 * width, 16 * width]
    x = g.input("images", [1, 3, size, size])
    y = _conv(g, x, 3, w[0], 3, 2)
    y = _conv(g, y, w[0], w[1], 3, 2)
    y = _c2f(g, y, w[1], w[1], depth)
    y = _conv(g, y, w[1], w[2], 3, 2)
    p3 = _c2f(g, y, w[2], w[2], 2 * depth)
    y = _conv(g, p3, w[2], w[3], 3, 2)
    p4 = _c2f(g, y, w[3], w[3], 2 * depth)
    y = _conv(g, p4, w[3], w[4], 3, 2)
    p5 = _sppf(g, _c2f(g, y, w[4], w[4], depth), w[4])
    # PAN neck: top-down, then bottom-up
    n4 = _c2f(g, g.node("Concat", [_up(g, p5), p4], axis=1), w[4] + w[3], w[3], depth, shortcut=False)
    n3 = _c2f(g, g.node("Concat", [_up(g, n4), p3], axis=1), w[3] + w[2], w[2], depth, shortcut=False)
    d4 = _c2f(
        g, g.node("Concat", [_conv(g, n3, w[2], w[2], 3, 2), n4], axis=1), w[2] + w[3], w[3], depth, shortcut=False
    )
    d5 = _c2f(
        g, g.node("Concat", [_conv(g, d4, w[3], w[3], 3, 2), p5], axis=1), w[3] + w[4], w[4], depth, shortcut=False
    )
    heads = [_head(g, f, c, reg, classes) for f, c in ((n3, w[2]), (d4, w[3]), (d5, w[4]))]
    y = g.node("Concat", heads, axis=2)
    box, cls = g.node("Split", [y, g.constant(np.array([4 * reg, classes], np.int64))], n_out=2, axis=1)
    out = g.node("Concat", [_dfl(g, box, reg), g.node("Sigmoid", [cls])], axis=1, name="detections")
    anchors = sum((size // s) ** 2 for s in (8, 16, 32))
    g.output(out, dims=[1, 4 + classes, anchors])
    return g.model()
