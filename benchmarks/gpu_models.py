"""ONNX networks for the GPU benchmark and GPU tests, built with onnx.helper and random weights.

resnet18_like   ResNet-18 topology (BN folded into conv weights, as exported inference models are)
yolo_style      a YOLOv8n-flavoured detector: SiLU convs, C2f blocks (split/concat), SPPF (max
                pools + concat), nearest upsample + concat neck, three detection heads
mlp             784-512-256-10 with ReLU and softmax
transformer     one pre-LN encoder block: layernorm, QKV, softmax attention, GELU MLP
Weights use He-style scaling so activations stay O(1) through the depth (float32 checks stay
meaningful).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed: int = 0):
        self.nodes: list = []
        self.inits: list = []
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, arr: np.ndarray, prefix: str = "w") -> str:
        nm = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        outs = [self.name(op.lower() + "_") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int,
        stride: int = 1,
        group: int = 1,
        act: str | None = "relu",
        pad: int | None = None,
    ) -> str:
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.05).astype(np.float32)
        p = k // 2 if pad is None else pad
        y = self.node(
            "Conv",
            [x, self.const(w), self.const(b, "b")],
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[p, p, p, p],
            group=group,
        )
        if act == "relu":
            return self.node("Relu", [y])
        if act == "silu":
            return self.node("Mul", [y, self.node("Sigmoid", [y])])
        return y

    def model(self, inputs: list[tuple[str, list[int]]], outputs: list[str], name: str) -> onnx.ModelProto:
        ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
        graph = helper.make_graph(self.nodes, name, ins, [], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        # Output types (and ranks) from ONNX shape inference.
        inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
        m.graph.output.extend(inferred[o] for o in outputs)
        return m


def resnet18_like(batch: int = 1, res: int = 224, classes: int = 1000) -> onnx.ModelProto:
    b = Builder(18)
    x = b.conv("x", 3, 64, 7, stride=2)
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = b.conv(x, cin, cout, 3, stride=stride)
            y = b.conv(y, cout, cout, 3, act=None)
            short = x if stride == 1 and cin == cout else b.conv(x, cin, cout, 1, stride=stride, act=None, pad=0)
            x = b.node("Relu", [b.node("Add", [y, short])])
            cin = cout
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    w = (b.rng.standard_normal((classes, 512)) * np.sqrt(1.0 / 512)).astype(np.float32)
    y = b.node("Gemm", [x, b.const(w), b.const(np.zeros(classes, np.float32), "b")], transB=1)
    return b.model([("x", [batch, 3, res, res])], [y], "resnet18_like")


def _c2f(b: Builder, x: str, c: int, n: int) -> str:
    y = b.conv(x, c, c, 1, act="silu", pad=0)
    a, cur = b.node("Split", [y, b.const(np.array([c // 2, c // 2], np.int64), "split")], n_out=2, axis=1)
    parts = [a, cur]
    for _ in range(n):
        h = b.conv(cur, c // 2, c // 2, 3, act="silu")
        h = b.conv(h, c // 2, c // 2, 3, act="silu")
        cur = b.node("Add", [cur, h])
        parts.append(cur)
    cat = b.node("Concat", parts, axis=1)
    return b.conv(cat, c // 2 * (2 + n), c, 1, act="silu", pad=0)


def yolo_style(batch: int = 1, res: int = 640, classes: int = 80) -> onnx.ModelProto:
    b = Builder(8)
    x = b.conv("x", 3, 16, 3, stride=2, act="silu")
    x = b.conv(x, 16, 32, 3, stride=2, act="silu")
    x = _c2f(b, x, 32, 1)
    x = b.conv(x, 32, 64, 3, stride=2, act="silu")
    p3 = _c2f(b, x, 64, 2)
    x = b.conv(p3, 64, 128, 3, stride=2, act="silu")
    p4 = _c2f(b, x, 128, 2)
    x = b.conv(p4, 128, 256, 3, stride=2, act="silu")
    x = _c2f(b, x, 256, 1)
    # SPPF
    y = b.conv(x, 256, 128, 1, act="silu", pad=0)
    m1 = b.node("MaxPool", [y], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    m2 = b.node("MaxPool", [m1], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    m3 = b.node("MaxPool", [m2], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    p5 = b.conv(b.node("Concat", [y, m1, m2, m3], axis=1), 512, 256, 1, act="silu", pad=0)
    scales = b.const(np.array([1, 1, 2, 2], np.float32), "scales")
    up = b.node("Resize", [p5, "", scales], mode="nearest")
    n4 = _c2f(b, b.conv(b.node("Concat", [up, p4], axis=1), 384, 128, 1, act="silu", pad=0), 128, 1)
    up = b.node("Resize", [n4, "", scales], mode="nearest")
    n3 = _c2f(b, b.conv(b.node("Concat", [up, p3], axis=1), 192, 64, 1, act="silu", pad=0), 64, 1)
    outs = []
    for feat, c in ((n3, 64), (n4, 128), (p5, 256)):
        h = b.conv(feat, c, 64, 3, act="silu")
        h = b.conv(h, 64, 64 + classes, 1, act=None, pad=0)
        n_cells = None
        outs.append(b.node("Reshape", [h, b.const(np.array([batch, 64 + classes, -1], np.int64), "shape")]))
        del n_cells
    y = b.node("Concat", outs, axis=2)
    box, cls = b.node("Split", [y, b.const(np.array([64, classes], np.int64), "split")], n_out=2, axis=1)
    y = b.node("Concat", [box, b.node("Sigmoid", [cls])], axis=1)
    return b.model([("x", [batch, 3, res, res])], [y], "yolo_style")


def mlp(batch: int = 1) -> onnx.ModelProto:
    b = Builder(1)
    x = "x"
    dims = (784, 512, 256, 10)
    for i in range(3):
        w = (b.rng.standard_normal((dims[i], dims[i + 1])) * np.sqrt(2.0 / dims[i])).astype(np.float32)
        x = b.node("Add", [b.node("MatMul", [x, b.const(w)]), b.const(np.full(dims[i + 1], 0.01, np.float32), "b")])
        if i < 2:
            x = b.node("Relu", [x])
    y = b.node("Softmax", [x], axis=-1)
    return b.model([("x", [batch, 784])], [y], "mlp")


def transformer(batch: int = 1, seq: int = 128, dim: int = 256, heads: int = 4) -> onnx.ModelProto:
    b = Builder(2)
    hd = dim // heads

    def lin(x: str, i: int, o: int) -> str:
        w = (b.rng.standard_normal((i, o)) * np.sqrt(1.0 / i)).astype(np.float32)
        return b.node("Add", [b.node("MatMul", [x, b.const(w)]), b.const(np.zeros(o, np.float32), "b")])

    def ln(x: str) -> str:
        return b.node(
            "LayerNormalization",
            [x, b.const(np.ones(dim, np.float32), "g"), b.const(np.zeros(dim, np.float32), "beta")],
            axis=-1,
            epsilon=1e-5,
        )

    h = ln("x")
    shape = b.const(np.array([batch, seq, heads, hd], np.int64), "shape")
    q, k, v = (b.node("Transpose", [b.node("Reshape", [lin(h, dim, dim), shape])], perm=[0, 2, 1, 3]) for _ in range(3))
    kt = b.node("Transpose", [k], perm=[0, 1, 3, 2])
    s = b.node("Mul", [b.node("MatMul", [q, kt]), b.const(np.array([1 / np.sqrt(hd)], np.float32), "scale")])
    a = b.node("MatMul", [b.node("Softmax", [s], axis=-1), v])
    a = b.node(
        "Reshape",
        [b.node("Transpose", [a], perm=[0, 2, 1, 3]), b.const(np.array([batch, seq, dim], np.int64), "shape")],
    )
    x1 = b.node("Add", ["x", lin(a, dim, dim)])
    m = lin(ln(x1), dim, 4 * dim)
    gelu = b.node(
        "Mul",
        [
            b.node("Mul", [m, b.const(np.array([0.5], np.float32), "half")]),
            b.node(
                "Add",
                [
                    b.const(np.array([1.0], np.float32), "one"),
                    b.node("Erf", [b.node("Div", [m, b.const(np.array([np.sqrt(2.0)], np.float32), "sqrt2")])]),
                ],
            ),
        ],
    )
    y = b.node("Add", [x1, lin(gelu, 4 * dim, dim)])
    return b.model([("x", [batch, seq, dim])], [y], "transformer")


MODELS = {"resnet18_like": resnet18_like, "yolo_style": yolo_style, "mlp": mlp, "transformer": transformer}
