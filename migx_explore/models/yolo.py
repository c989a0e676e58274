"""A YOLOv8-style backbone piece: Conv+SiLU blocks, C2f (Split / bottlenecks / Concat), SPPF
max-pools, a nearest Resize upsample with a skip Concat, and a detect head whose reshape is the
Shape -> Gather -> Mul -> Concat chain ultralytics' export emits."""

from __future__ import annotations

import numpy as np
import onnx

from ._builder import GraphBuilder


def conv_silu(g: GraphBuilder, x: str, c_in: int, c_out: int, k: int, s: int = 1) -> str:
    y = g.conv(x, c_in, c_out, k, s, bias=True)  # BN folded into the conv, as in exported YOLO models
    return g.node("Mul", [y, g.node("Sigmoid", [y])])  # SiLU = x * sigmoid(x)


def _bottleneck(g: GraphBuilder, x: str, c: int) -> str:
    y = conv_silu(g, conv_silu(g, x, c, c, 3), c, c, 3)
    return g.node("Add", [x, y])


def c2f_block(g: GraphBuilder, x: str, c_in: int, c_out: int, n: int) -> str:
    half = c_out // 2
    y = conv_silu(g, x, c_in, c_out, 1)
    a, b = g.node("Split", [y, g.constant(np.array([half, half], np.int64))], n_out=2, axis=1)
    parts = [a, b]
    for _ in range(n):
        b = _bottleneck(g, b, half)
        parts.append(b)
    return conv_silu(g, g.node("Concat", parts, axis=1), (2 + n) * half, c_out, 1)


def sppf_block(g: GraphBuilder, x: str, c: int) -> str:
    y = conv_silu(g, x, c, c // 2, 1)
    pools = [y]
    for _ in range(3):
        pools.append(g.node("MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]))
    return conv_silu(g, g.node("Concat", pools, axis=1), 2 * c, c, 1)


def _detect_reshape(g: GraphBuilder, x: str, anchors: int, per_anchor: int) -> str:
    """[N, A*K, H, W] -> [N, A, K, H*W] with the target shape computed from Shape (exporter style)."""
    shape = g.node("Shape", [x])

    def dim(i: int) -> str:
        return g.node("Gather", [shape, g.constant(np.array([i], np.int64))], axis=0)

    hw = g.node("Mul", [dim(2), dim(3)])
    target = g.node("Concat", [dim(0), g.constant(np.array([anchors, per_anchor], np.int64)), hw], axis=0)
    return g.node("Reshape", [x, target])


def yolo(size: int = 64, classes: int = 4, anchors: int = 3) -> onnx.ModelProto:
    g = GraphBuilder("yolo", seed=5)
    x = g.input("images", [1, 3, size, size])
    y = conv_silu(g, x, 3, 16, 3, 2)
    y = conv_silu(g, y, 16, 32, 3, 2)
    p3 = c2f_block(g, y, 32, 32, 1)
    y = conv_silu(g, p3, 32, 64, 3, 2)
    p5 = sppf_block(g, c2f_block(g, y, 64, 64, 1), 64)
    up = g.node("Resize", [p5, "", g.constant(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
    y = c2f_block(g, g.node("Concat", [up, p3], axis=1), 96, 32, 1)
    y = conv_silu(g, y, 32, 48, 3)
    per_anchor = 5 + classes
    head = g.conv(y, 48, anchors * per_anchor, 1, bias=True)  # 3x3 conv then a 1x1 conv to 27 channels
    r = _detect_reshape(g, head, anchors, per_anchor)
    g.node("Transpose", [r], name="detections", perm=[0, 1, 3, 2])
    # three stride-2 convs then one 2x upsample: the head works at 1/4 of the input size
    g.output("detections", dims=[1, anchors, (size // 4) ** 2, per_anchor])
    return g.model()
