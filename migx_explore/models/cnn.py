"""Convolutional example models: a ResNet basic-block stack, a ResNet-18-like classifier and a
MobileNetV2 inverted-residual stack (conv-bn-relu chains for the conv/bn/pointwise passes)."""

from __future__ import annotations

import numpy as np
import onnx

from ._builder import GraphBuilder


def _basic_block(g: GraphBuilder, x: str, c_in: int, c_out: int, stride: int) -> str:
    """ResNet basic block: conv-bn-relu, conv-bn, (1x1 conv-bn shortcut), add, relu."""
    y = g.node("Relu", [g.batchnorm(g.conv(x, c_in, c_out, 3, stride), c_out)])
    y = g.batchnorm(g.conv(y, c_out, c_out, 3), c_out)
    short = x
    if stride != 1 or c_in != c_out:
        short = g.batchnorm(g.conv(x, c_in, c_out, 1, stride), c_out)
    return g.node("Relu", [g.node("Add", [y, short])])


def resnet_block() -> onnx.ModelProto:
    """Two basic blocks (the second downsamples), on a 1x16x32x32 input."""
    g = GraphBuilder("resnet_block", seed=1)
    x = g.input("x", [1, 16, 32, 32])
    y = _basic_block(g, x, 16, 16, 1)
    y = _basic_block(g, y, 16, 32, 2)
    g.node("Identity", [y], name="y")
    g.output("y", dims=[1, 32, 16, 16])
    return g.model()


def resnet18(size: int = 224, classes: int = 1000, width: int = 64) -> onnx.ModelProto:
    """ResNet-18 layout (7x7 stem, 4 stages of 2 basic blocks, global pool, fc) on 1x3xSxS.
    `width` scales the channel counts (64 is ResNet-18; tests use a narrow copy)."""
    g = GraphBuilder("resnet18", seed=18)
    x = g.input("input", [1, 3, size, size])
    y = g.node("Relu", [g.batchnorm(g.conv(x, 3, width, 7, 2), width)])
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = width
    for stage, w_out in enumerate((width, 2 * width, 4 * width, 8 * width)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = _basic_block(g, y, c, w_out, stride)
            c = w_out
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y])], axis=1)
    w = g.weight([classes, c], fan_in=c)
    g.node("Gemm", [y, w, g.bias(classes)], name="logits", transB=1)
    g.output("logits", dims=[1, classes])
    return g.model()


def _relu6(g: GraphBuilder, x: str) -> str:
    # torch.onnx exports ReLU6 as Clip with Constant min/max inputs (opset >= 11)
    return g.node("Clip", [x, g.constant(np.float32(0.0)), g.constant(np.float32(6.0))])


def _inverted_residual(g: GraphBuilder, x: str, c_in: int, c_out: int, stride: int, t: int) -> str:
    hidden = c_in * t
    y = x
    if t != 1:
        y = _relu6(g, g.batchnorm(g.conv(y, c_in, hidden, 1), hidden))
    y = _relu6(g, g.batchnorm(g.conv(y, hidden, hidden, 3, stride, group=hidden), hidden))
    y = g.batchnorm(g.conv(y, hidden, c_out, 1), c_out)
    return g.node("Add", [x, y]) if stride == 1 and c_in == c_out else y


def mobilenet(size: int = 96, classes: int = 100) -> onnx.ModelProto:
    """MobileNetV2-style: stem, inverted residuals (1x1 expand, 3x3 depthwise, 1x1 project), head."""
    g = GraphBuilder("mobilenet", seed=2)
    x = g.input("images", [1, 3, size, size])
    y = _relu6(g, g.batchnorm(g.conv(x, 3, 16, 3, 2), 16))
    c = 16
    for c_out, n, stride, t in ((16, 1, 1, 1), (24, 2, 2, 6), (32, 3, 2, 6), (64, 2, 2, 6)):
        for i in range(n):
            y = _inverted_residual(g, y, c, c_out, stride if i == 0 else 1, t)
            c = c_out
    y = _relu6(g, g.batchnorm(g.conv(y, c, 256, 1), 256))
    pooled = g.node("GlobalAveragePool", [y])
    flat = g.dynamic_reshape(pooled, keep=[0], tail=[-1])  # torch: x.view(x.size(0), -1)
    w = g.weight([256, classes], fan_in=256)
    logits = g.node("Add", [g.node("MatMul", [flat, w]), g.bias(classes)])
    g.node("Softmax", [logits], name="probs", axis=-1)
    g.output("probs", dims=[1, classes])
    return g.model()
