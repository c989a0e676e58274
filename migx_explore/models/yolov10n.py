"""A YOLOv10n-shaped export, as Ultralytics' `model.export(format="onnx")` writes it: the node
names are the exporter's scope paths (`/model.2/m.0/cv1/conv/Conv`, `/model.23/dfl/Softmax`,
outputs `..._output_0`), the layers follow yolov10n.yaml at the n scale (Conv, C2f, SCDown,
SPPF, PSA attention, C2fCIB with the large-kernel depthwise conv, the one-to-one v10Detect head
with DFL and the NMS-free TopK / GatherElements post-processing). About 750 instructions after
import, the size of the real export (725); the explorer's speed targets are measured on it.

Weights are seeded; the input is the export's 1x3x640x640 (the size-dependent costs of a pass show as they
do on the real file; the reference evaluator runs it in well under a second).
"""

from __future__ import annotations

import numpy as np
import onnx

from ._builder import GraphBuilder

REG_MAX = 16


class _Exporter:
    """Names nodes and values the way torch.onnx names them from the module path."""

    def __init__(self, g: GraphBuilder):
        self.g = g
        self._used: dict[str, int] = {}

    def node(self, scope: str, op: str, inputs: list[str], n_out: int = 1, **attrs):
        base = f"{scope}/{op}"
        k = self._used.get(base, 0)
        self._used[base] = k + 1
        name = base if k == 0 else f"{base}_{k}"
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.g.nodes.append(onnx.helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, scope: str, value, dtype=None) -> str:
        arr = np.asarray(value, dtype=dtype)
        return self.node(scope, "Constant", [], value=onnx.numpy_helper.from_array(arr))

    def conv(
        self, scope: str, x: str, c_in: int, c_out: int, k: int, s: int = 1, group: int = 1, act: bool = True
    ) -> str:
        """ultralytics Conv (BN folded into the conv on export), SiLU unless act=False."""
        g = self.g
        w, b = g.weight([c_out, c_in // group, k, k]), g.bias(c_out)
        p = k // 2
        y = self.node(
            f"{scope}/conv", "Conv", [x, w, b], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, group=group
        )
        if not act:
            return y
        return self.node(f"{scope}/act", "Mul", [y, self.node(f"{scope}/act", "Sigmoid", [y])])

    def conv2d(self, scope: str, x: str, c_in: int, c_out: int) -> str:
        """A plain nn.Conv2d 1x1 with bias (the detect head's last layer)."""
        return self.node(
            scope,
            "Conv",
            [x, self.g.weight([c_out, c_in, 1, 1]), self.g.bias(c_out)],
            kernel_shape=[1, 1],
            strides=[1, 1],
            pads=[0] * 4,
        )


def _c2f(e: _Exporter, s: str, x: str, c_in: int, c_out: int, n: int, shortcut: bool, cib: bool = False) -> str:
    half = c_out // 2
    y = e.conv(f"{s}/cv1", x, c_in, c_out, 1)
    a, b = e.node(s, "Split", [y, e.const(s, np.array([half, half], np.int64))], n_out=2, axis=1)
    parts = [a, b]
    for i in range(n):
        m = f"{s}/m.{i}"
        if cib:  # CIB: dw3x3, pw, large-kernel dw (RepVGGDW fused to 7x7), pw, dw3x3
            z = e.conv(f"{m}/cv1/cv1.0", b, half, half, 3, group=half)
            z = e.conv(f"{m}/cv1/cv1.1", z, half, 2 * half, 1)
            z = e.node(
                f"{m}/cv1/cv1.2/act",
                "Mul",
                [
                    z0 := e.conv(f"{m}/cv1/cv1.2", z, 2 * half, 2 * half, 7, group=2 * half, act=False),
                    e.node(f"{m}/cv1/cv1.2/act", "Sigmoid", [z0]),
                ],
            )
            z = e.conv(f"{m}/cv1/cv1.3", z, 2 * half, half, 1)
            z = e.conv(f"{m}/cv1/cv1.4", z, half, half, 3, group=half)
        else:
            z = e.conv(f"{m}/cv2", e.conv(f"{m}/cv1", b, half, half, 3), half, half, 3)
        b = e.node(m, "Add", [b, z]) if shortcut else z
        parts.append(b)
    return e.conv(f"{s}/cv2", e.node(s, "Concat", parts, axis=1), (2 + n) * half, c_out, 1)


def _scdown(e: _Exporter, s: str, x: str, c_in: int, c_out: int) -> str:
    return e.conv(f"{s}/cv2", e.conv(f"{s}/cv1", x, c_in, c_out, 1), c_out, c_out, 3, 2, group=c_out, act=False)


def _sppf(e: _Exporter, s: str, x: str, c: int) -> str:
    pools = [e.conv(f"{s}/cv1", x, c, c // 2, 1)]
    for _ in range(3):
        pools.append(e.node(f"{s}/m", "MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2] * 4))
    return e.conv(f"{s}/cv2", e.node(s, "Concat", pools, axis=1), 2 * c, c, 1)


def _psa(e: _Exporter, s: str, x: str, c1: int, hw: int) -> str:
    """PSA: split, b + Attention(b), b + FFN(b), concat, cv2. Attention has one head per 64
    channels with key_dim = head_dim / 2, as in ultralytics' Attention module."""
    c = c1 // 2
    heads = max(c // 64, 1)
    head_dim = c // heads
    key_dim = head_dim // 2
    side = int(round(hw**0.5))
    y = e.conv(f"{s}/cv1", x, c1, 2 * c, 1)
    a, b = e.node(s, "Split", [y, e.const(s, np.array([c, c], np.int64))], n_out=2, axis=1)
    at = f"{s}/attn"
    qkv = e.conv(f"{at}/qkv", b, c, c + 2 * key_dim * heads, 1, act=False)
    qkv = e.node(at, "Reshape", [qkv, e.const(at, np.array([1, heads, 2 * key_dim + head_dim, hw], np.int64))])
    q, k, v = e.node(at, "Split", [qkv, e.const(at, np.array([key_dim, key_dim, head_dim], np.int64))], n_out=3, axis=2)
    attn = e.node(at, "MatMul", [e.node(at, "Transpose", [q], perm=[0, 1, 3, 2]), k])
    attn = e.node(at, "Softmax", [e.node(at, "Mul", [attn, e.const(at, np.float32(key_dim**-0.5))])], axis=-1)
    o = e.node(at, "MatMul", [v, e.node(at, "Transpose", [attn], perm=[0, 1, 3, 2])])
    o = e.node(at, "Reshape", [o, e.const(at, np.array([1, c, side, side], np.int64))])
    pe_in = e.node(at, "Reshape", [v, e.const(at, np.array([1, c, side, side], np.int64))])
    o = e.node(at, "Add", [o, e.conv(f"{at}/pe", pe_in, c, c, 3, group=c, act=False)])
    b = e.node(s, "Add", [b, e.conv(f"{at}/proj", o, c, c, 1, act=False)])
    f = e.conv(f"{s}/ffn/ffn.1", e.conv(f"{s}/ffn/ffn.0", b, c, 2 * c, 1), 2 * c, c, 1, act=False)
    b = e.node(s, "Add", [b, f])
    return e.conv(f"{s}/cv2", e.node(s, "Concat", [a, b], axis=1), 2 * c, c1, 1)


def _up(e: _Exporter, s: str, x: str) -> str:
    return e.node(
        s,
        "Resize",
        [x, "", e.const(s, np.array([1, 1, 2, 2], np.float32))],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )


def _detect(e: _Exporter, feats: list[tuple[str, int, int]], classes: int, size: int, max_det: int) -> str:
    """v10Detect's one-to-one branches, DFL, dist2bbox (xyxy), and v10postprocess."""
    s = "/model.23"
    cat = e.node(s, "Concat", _branches(e, s, feats, classes), axis=2)
    preds = _decoded(e, s, cat, feats, classes, size)  # [1, A, 4 + classes]
    return _postprocess(e, s, preds, classes, max_det)


def _branches(e: _Exporter, s: str, feats: list[tuple[str, int, int]], classes: int) -> list[str]:
    """Each level's box (4 x REG_MAX) and class outputs, concatenated and flattened to [1, no, -1]."""
    c0 = feats[0][1]
    c2, c3 = max(16, c0 // 4, 4 * REG_MAX), max(c0, min(classes, 100))
    no = 4 * REG_MAX + classes
    flat = []
    for i, (x, c, _) in enumerate(feats):
        box = e.conv(
            f"{s}/one2one_cv2.{i}/one2one_cv2.{i}.1",
            e.conv(f"{s}/one2one_cv2.{i}/one2one_cv2.{i}.0", x, c, c2, 3),
            c2,
            c2,
            3,
        )
        box = e.conv2d(f"{s}/one2one_cv2.{i}/one2one_cv2.{i}.2", box, c2, 4 * REG_MAX)
        cv3 = f"{s}/one2one_cv3.{i}"
        z = e.conv(f"{cv3}/one2one_cv3.{i}.0/one2one_cv3.{i}.0.0", x, c, c, 3, group=c)
        z = e.conv(f"{cv3}/one2one_cv3.{i}.0/one2one_cv3.{i}.0.1", z, c, c3, 1)
        z = e.conv(f"{cv3}/one2one_cv3.{i}.1/one2one_cv3.{i}.1.0", z, c3, c3, 3, group=c3)
        z = e.conv(f"{cv3}/one2one_cv3.{i}.1/one2one_cv3.{i}.1.1", z, c3, c3, 1)
        cls = e.conv2d(f"{cv3}/one2one_cv3.{i}.2", z, c3, classes)
        y = e.node(s, "Concat", [box, cls], axis=1)
        flat.append(e.node(s, "Reshape", [y, e.const(s, np.array([1, no, -1], np.int64))]))
    return flat


def _decoded(e: _Exporter, s: str, cat: str, feats: list[tuple[str, int, int]], classes: int, size: int) -> str:
    """DFL over the box logits, dist2bbox to xyxy at each anchor times its stride, and the class
    sigmoids: [1, anchors, 4 + classes]."""
    box, cls = e.node(s, "Split", [cat, e.const(s, np.array([4 * REG_MAX, classes], np.int64))], n_out=2, axis=1)
    d = f"{s}/dfl"
    y = e.node(d, "Reshape", [box, e.const(d, np.array([1, 4, REG_MAX, -1], np.int64))])
    y = e.node(d, "Softmax", [e.node(d, "Transpose", [y], perm=[0, 2, 1, 3])], axis=1)
    y = e.node(
        f"{d}/conv",
        "Conv",
        [y, e.g.init(np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1), "model.23.dfl.conv.weight")],
    )
    dist = e.node(d, "Reshape", [y, e.const(d, np.array([1, 4, -1], np.int64))])
    lt, rb = e.node(s, "Split", [dist, e.const(s, np.array([2, 2], np.int64))], n_out=2, axis=1)
    points, strides = [], []
    for _, _, st in feats:
        n = size // st
        ys, xs = np.meshgrid(np.arange(n) + 0.5, np.arange(n) + 0.5, indexing="ij")
        points.append(np.stack([xs.reshape(-1), ys.reshape(-1)]))
        strides.append(np.full(n * n, st))
    anchors = e.g.init(np.concatenate(points, 1)[None].astype(np.float32), "anchors")
    stride_t = e.g.init(np.concatenate(strides)[None, None].astype(np.float32), "strides")
    xyxy = e.node(s, "Concat", [e.node(s, "Sub", [anchors, lt]), e.node(s, "Add", [anchors, rb])], axis=1)
    y = e.node(s, "Concat", [e.node(s, "Mul", [xyxy, stride_t]), e.node(s, "Sigmoid", [cls])], axis=1)
    return e.node(s, "Transpose", [y], perm=[0, 2, 1])  # [1, A, 4 + classes]


def _postprocess(e: _Exporter, s: str, preds: str, classes: int, max_det: int) -> str:
    """v10postprocess: the max_det best anchors by best class score, then the max_det best
    (anchor, class) pairs among them, as [1, max_det, (x1, y1, x2, y2, score, label)]."""
    boxes, scores = e.node(s, "Split", [preds, e.const(s, np.array([4, classes], np.int64))], n_out=2, axis=-1)
    best = e.node(s, "ReduceMax", [scores, e.const(s, np.array([-1], np.int64))], keepdims=0)
    _, index = e.node(s, "TopK", [best, e.const(s, np.array([max_det], np.int64))], n_out=2, axis=-1)
    index = e.node(s, "Unsqueeze", [index, e.const(s, np.array([-1], np.int64))])
    boxes = e.node(
        s, "GatherElements", [boxes, e.node(s, "Tile", [index, e.const(s, np.array([1, 1, 4], np.int64))])], axis=1
    )
    scores = e.node(
        s,
        "GatherElements",
        [scores, e.node(s, "Tile", [index, e.const(s, np.array([1, 1, classes], np.int64))])],
        axis=1,
    )
    scores = e.node(s, "Reshape", [scores, e.const(s, np.array([1, -1], np.int64))])
    top, index = e.node(s, "TopK", [scores, e.const(s, np.array([max_det], np.int64))], n_out=2, axis=-1)
    labels = e.node(s, "Mod", [index, e.const(s, np.int64(classes))])
    index = e.node(s, "Div", [index, e.const(s, np.int64(classes))])
    index = e.node(
        s,
        "Tile",
        [
            e.node(s, "Unsqueeze", [index, e.const(s, np.array([-1], np.int64))]),
            e.const(s, np.array([1, 1, 4], np.int64)),
        ],
    )
    boxes = e.node(s, "GatherElements", [boxes, index], axis=1)
    labels = e.node(
        s, "Cast", [e.node(s, "Unsqueeze", [labels, e.const(s, np.array([-1], np.int64))])], to=onnx.TensorProto.FLOAT
    )
    top = e.node(s, "Unsqueeze", [top, e.const(s, np.array([-1], np.int64))])
    out = e.node(s, "Concat", [boxes, top, labels], axis=-1)
    e.g.nodes.append(onnx.helper.make_node("Identity", [out], ["output0"], name="/model.23/output0"))
    return "output0"


def yolov10n(size: int = 640, classes: int = 80, max_det: int = 300) -> onnx.ModelProto:
    """yolov10n.yaml at width 0.25 / depth 0.33 (channels 16..256, repeats 1 and 2)."""
    g = GraphBuilder("main_graph", seed=10)
    e = _Exporter(g)
    w = [16, 32, 64, 128, 256]
    x = g.input("images", [1, 3, size, size])
    y = e.conv("/model.0", x, 3, w[0], 3, 2)
    y = e.conv("/model.1", y, w[0], w[1], 3, 2)
    y = _c2f(e, "/model.2", y, w[1], w[1], 1, True)
    y = e.conv("/model.3", y, w[1], w[2], 3, 2)
    p3 = _c2f(e, "/model.4", y, w[2], w[2], 2, True)
    y = _scdown(e, "/model.5", p3, w[2], w[3])
    p4 = _c2f(e, "/model.6", y, w[3], w[3], 2, True)
    y = _scdown(e, "/model.7", p4, w[3], w[4])
    y = _c2f(e, "/model.8", y, w[4], w[4], 1, True)
    y = _sppf(e, "/model.9", y, w[4])
    p5 = _psa(e, "/model.10", y, w[4], (size // 32) ** 2)
    y = e.node("/model.12", "Concat", [_up(e, "/model.11", p5), p4], axis=1)
    n4 = _c2f(e, "/model.13", y, w[4] + w[3], w[3], 1, False)
    y = e.node("/model.15", "Concat", [_up(e, "/model.14", n4), p3], axis=1)
    n3 = _c2f(e, "/model.16", y, w[3] + w[2], w[2], 1, False)
    y = e.node("/model.18", "Concat", [e.conv("/model.17", n3, w[2], w[2], 3, 2), n4], axis=1)
    m4 = _c2f(e, "/model.19", y, w[2] + w[3], w[3], 1, False)
    y = e.node("/model.21", "Concat", [_scdown(e, "/model.20", m4, w[3], w[3]), p5], axis=1)
    m5 = _c2f(e, "/model.22", y, w[3] + w[4], w[4], 1, True, cib=True)
    out = _detect(e, [(n3, w[2], 8), (m4, w[3], 16), (m5, w[4], 32)], classes, size, max_det)
    g.output(out, dims=[1, max_det, 6])
    return g.model()
