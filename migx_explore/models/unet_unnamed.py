"""A small U-Net whose nodes have no names at all (hand-built graphs and some converters write
none): encoder convs, pooling, a bottleneck, Resize upsampling with skip Concats, a 1x1 head. With
no scopes to read, the explorer derives its groups from the graph."""

from __future__ import annotations

import numpy as np
import onnx

from ._scoped import ScopedBuilder


def _block(g: ScopedBuilder, x: str, c_in: int, c_out: int) -> str:
    for c in (c_in, c_out):
        x = g.node("Relu", [g.batchnorm(g.conv(x, c, c_out, 3), c_out)])
    return x


def unet_unnamed(size: int = 32, base: int = 8) -> onnx.ModelProto:
    g = ScopedBuilder("unet_unnamed", seed=24, style="none")
    x = g.input("image", [1, 3, size, size])
    skips, c = [], 3
    for level in range(3):
        x = _block(g, x, c, base << level)
        c = base << level
        skips.append(x)
        x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = _block(g, x, c, c * 2)
    c *= 2
    scales = g.constant(np.array([1, 1, 2, 2], np.float32))
    for skip in reversed(skips):
        up = g.node("Resize", [x, "", scales], mode="nearest")
        cs = c // 2
        x = _block(g, g.node("Concat", [up, skip], axis=1), c + cs, cs)
        c = cs
    g.node("Sigmoid", [g.conv(x, c, 1, 1, bias=True)], name="mask")
    g.output("mask", dims=[1, 1, size, size])
    return g.model()
