"""Hypothesis strategies for single ONNX nodes with random attributes and shapes (the differential
fuzzer, tests/fuzz/test_onnx_differential.py). Each strategy draws a `NodeCase`: one node, its
graph inputs (arrays fed at run time) and constant inputs (initializers), at the opset given.
Every case is a valid ONNX model by construction; whether our import, ONNX Runtime and
onnx.reference agree on it is the test."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import helper, numpy_helper

OPSET = 18


@dataclass
class NodeCase:
    op: str
    feed: dict[str, np.ndarray]
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    inputs: list[str] | None = None  # node input names in order ("" for an empty optional)
    outputs: int = 1
    opset: int = OPSET

    def model(self) -> onnx.ModelProto:
        names = self.inputs if self.inputs is not None else [*self.feed, *self.consts]
        outs = [f"y{k}" for k in range(self.outputs)]
        node = helper.make_node(self.op, names, outs, **self.attrs)
        inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
                  for n, v in self.feed.items()]
        inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in self.consts.items()]
        out_vi = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outs]
        g = helper.make_graph([node], "fuzz", inputs, out_vi, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        try:  # graph outputs want a type with a shape field: ONNX shape inference fills them
            inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.output}
        except Exception:  # noqa: BLE001 - inference refuses some valid nodes; a rank-less shape it is
            inferred = {}
        for o in m.graph.output:
            if o.name in inferred and inferred[o.name].type.tensor_type.elem_type:
                o.type.CopyFrom(inferred[o.name].type)
            o.type.tensor_type.shape.SetInParent()
        return m

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        shapes = {n: (v.dtype.name, v.shape) for n, v in self.feed.items()}
        consts = {n: v.tolist() if v.size <= 8 else (v.dtype.name, v.shape) for n, v in self.consts.items()}
        return f"NodeCase({self.op}, inputs {shapes}, consts {consts}, attrs {self.attrs})"


def _shape(draw, min_rank=1, max_rank=4, max_dim=5) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.integers(1, max_dim), min_size=min_rank, max_size=max_rank)))


def _floats(draw, shape, lo=-3.0, hi=3.0, seed=None) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)) if seed is None else seed)
    return rng.uniform(lo, hi, shape).astype(np.float32)


def _broadcastable(draw, shape):
    """A shape numpy-broadcastable with `shape`: a suffix, some dims replaced by 1."""
    k = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else d for d in shape[len(shape) - k:])


@st.composite
def binary(draw) -> NodeCase:
    op = draw(st.sampled_from(["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"]))
    a = _shape(draw)
    b = _broadcastable(draw, a)
    lo = 0.5 if op == "Pow" else -3.0
    return NodeCase(op, {"a": _floats(draw, a, lo), "b": _floats(draw, b, -2.0 if op == "Pow" else -3.0)})


UNARY = {"Relu": {}, "Sigmoid": {}, "Tanh": {}, "Abs": {}, "Neg": {}, "Exp": {}, "Erf": {}, "Softplus": {},
         "Softsign": {}, "Floor": {}, "Ceil": {}, "Round": {}, "Sign": {}, "Reciprocal": {}, "Sin": {}, "Cos": {},
         "Elu": {"alpha": (0.1, 2.0)}, "LeakyRelu": {"alpha": (0.01, 0.5)}, "Selu": {}, "Celu": {"alpha": (0.2, 2.0)},
         "HardSigmoid": {"alpha": (0.1, 0.5), "beta": (0.2, 0.8)}, "ThresholdedRelu": {"alpha": (0.0, 1.5)},
         "Shrink": {"lambd": (0.0, 1.5), "bias": (0.0, 1.5)}, "HardSwish": {}, "Mish": {}}


@st.composite
def unary(draw) -> NodeCase:
    op = draw(st.sampled_from(sorted(UNARY)))
    attrs = {k: round(draw(st.floats(*r)), 3) for k, r in UNARY[op].items()}
    x = _floats(draw, _shape(draw))
    if op == "Reciprocal":
        x = np.where(np.abs(x) < 0.1, 0.5, x).astype(np.float32)
    return NodeCase(op, {"x": x}, attrs=attrs)


@st.composite
def reduce(draw) -> NodeCase:
    op = draw(st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                               "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"]))
    shape = _shape(draw)
    axes = sorted(draw(st.sets(st.integers(-len(shape), len(shape) - 1), max_size=len(shape))),
                  key=lambda a: a % len(shape))
    if len({a % len(shape) for a in axes}) != len(axes):
        axes = sorted({a % len(shape) for a in axes})
    attrs = {"keepdims": draw(st.integers(0, 1))}
    if not axes:
        attrs["noop_with_empty_axes"] = draw(st.integers(0, 1))
    consts = {"axes": np.array(axes, np.int64)} if axes else {}
    x = _floats(draw, shape, 0.1 if op == "ReduceProd" else -3.0, 1.5 if op == "ReduceProd" else 3.0)
    # Integers: small, so no sum or product overflows. Not the log reductions: ONNX Runtime truncates
    # each exp term to the integer type before summing, onnx.reference (and we) truncate the result.
    if op not in ("ReduceLogSum", "ReduceLogSumExp") and draw(st.booleans()):
        x = (np.sign(x) if op == "ReduceProd" else np.round(x)).astype(np.int32)
        if op == "ReduceProd":
            x[x == 0] = 1
    return NodeCase(op, {"x": x}, consts, attrs)


@st.composite
def softmax_like(draw) -> NodeCase:
    op = draw(st.sampled_from(["Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin"]))
    shape = _shape(draw)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    attrs = {"axis": axis}
    if op.startswith("Arg"):
        attrs.update(keepdims=draw(st.integers(0, 1)), select_last_index=draw(st.integers(0, 1)))
    x = _floats(draw, shape)
    if draw(st.booleans()):  # exact ties, which the tie rules decide
        x = np.round(x).astype(np.float32)
    return NodeCase(op, {"x": x}, attrs=attrs)


@st.composite
def movement(draw) -> NodeCase:
    kind = draw(st.sampled_from(["Transpose", "Flatten", "Concat", "Split", "Slice", "Gather", "Tile", "Expand",
                                 "Pad", "CumSum", "Trilu", "DepthToSpace", "GatherElements", "ReverseSequence"]))
    shape = _shape(draw)
    nd = len(shape)
    x = _floats(draw, shape)
    if kind == "Transpose":
        return NodeCase(kind, {"x": x}, attrs={"perm": list(draw(st.permutations(range(nd))))})
    if kind == "Flatten":
        return NodeCase(kind, {"x": x}, attrs={"axis": draw(st.integers(-nd, nd))})
    if kind == "Concat":
        axis = draw(st.integers(-nd, nd - 1))
        other = list(shape)
        other[axis] = draw(st.integers(1, 4))
        return NodeCase(kind, {"x": x, "z": _floats(draw, tuple(other))}, attrs={"axis": axis})
    if kind == "Split":
        axis = draw(st.integers(-nd, nd - 1))
        n = shape[axis]
        cut = sorted(draw(st.sets(st.integers(1, n - 1), max_size=2))) if n > 1 else []
        parts = np.diff([0, *cut, n]).astype(np.int64)
        return NodeCase(kind, {"x": x}, {"split": parts}, {"axis": axis}, outputs=len(parts))
    if kind == "Slice":
        axes = sorted(draw(st.sets(st.integers(0, nd - 1), min_size=1, max_size=nd)))
        starts, ends, steps = [], [], []
        for a in axes:
            n = shape[a]
            step = draw(st.sampled_from([1, 1, 2, -1, -2]))
            starts.append(draw(st.integers(-n - 2, n + 2)))
            ends.append(draw(st.integers(-n - 2, n + 2)))
            steps.append(step)
        consts = {"starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64),
                  "axes": np.array(axes, np.int64), "steps": np.array(steps, np.int64)}
        return NodeCase(kind, {"x": x}, consts)
    if kind == "Gather":
        axis = draw(st.integers(-nd, nd - 1))
        n = shape[axis]
        idx = np.array(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4)), np.int64)
        return NodeCase(kind, {"x": x}, {"i": idx.reshape(draw(st.sampled_from([(-1,), (1, -1)])))}, {"axis": axis})
    if kind == "GatherElements":
        axis = draw(st.integers(-nd, nd - 1))
        n = shape[axis]
        rng = np.random.default_rng(draw(st.integers(0, 999)))
        return NodeCase(kind, {"x": x}, {"i": rng.integers(-n, n, shape).astype(np.int64)}, {"axis": axis})
    if kind == "Tile":
        return NodeCase(kind, {"x": x}, {"r": np.array([draw(st.integers(1, 3)) for _ in shape], np.int64)})
    if kind == "Expand":
        target = [d if d != 1 else draw(st.integers(1, 3)) for d in _broadcastable(draw, shape)]
        pre = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 1)))]
        x2 = _floats(draw, tuple(1 if draw(st.booleans()) else d for d in shape))
        return NodeCase(kind, {"x": x2}, {"s": np.array(pre + list(shape[:nd - len(target)]) + target, np.int64)})
    if kind == "Pad":
        mode = draw(st.sampled_from(["constant", "reflect", "edge", "wrap"]))
        pads = [draw(st.integers(0, 3)) for _ in range(2 * nd)]
        if mode == "constant":
            pads = [p - draw(st.integers(0, 1)) if shape[i % nd] > 1 else p for i, p in enumerate(pads)]
        consts = {"pads": np.array(pads, np.int64)}
        if mode == "constant":
            consts["v"] = np.array(round(draw(st.floats(-2, 2)), 2), np.float32)
        return NodeCase(kind, {"x": x}, consts, {"mode": mode})
    if kind == "CumSum":
        return NodeCase(kind, {"x": x}, {"axis": np.array(draw(st.integers(-nd, nd - 1)), np.int64)},
                        {"exclusive": draw(st.integers(0, 1)), "reverse": draw(st.integers(0, 1))})
    if kind == "Trilu":
        x2 = _floats(draw, shape if nd >= 2 else (3, 4))
        return NodeCase(kind, {"x": x2}, {"k": np.array(draw(st.integers(-3, 3)), np.int64)},
                        {"upper": draw(st.integers(0, 1))})
    if kind == "DepthToSpace":
        b = draw(st.integers(1, 2))
        x4 = _floats(draw, (1, b * b * draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))))
        return NodeCase(kind, {"x": x4}, attrs={"blocksize": b, "mode": draw(st.sampled_from(["DCR", "CRD"]))})
    # ReverseSequence: [T, B, ...] with per-batch lengths
    t, b = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    lens = np.array([draw(st.integers(1, t)) for _ in range(b)], np.int64)
    return NodeCase(kind, {"x": _floats(draw, (t, b, 2))}, {"l": lens}, {"batch_axis": 1, "time_axis": 0})


@st.composite
def nn(draw) -> NodeCase:
    kind = draw(st.sampled_from(["Conv", "MaxPool", "AveragePool", "Gemm", "MatMul", "LayerNormalization",
                                 "InstanceNormalization", "TopK", "Resize", "Einsum"]))
    if kind in ("Conv", "MaxPool", "AveragePool"):
        sd = draw(st.integers(1, 2))
        spatial = tuple(draw(st.integers(3, 6)) for _ in range(sd))
        k = [draw(st.integers(1, 3)) for _ in range(sd)]
        attrs = {"kernel_shape": k, "strides": [draw(st.integers(1, 2)) for _ in range(sd)],
                 "pads": [draw(st.integers(0, kk - 1)) for kk in k * 2]}
        if kind == "Conv":
            g = draw(st.integers(1, 2))
            c, m = g * draw(st.integers(1, 2)), g * draw(st.integers(1, 2))
            attrs.update(group=g, dilations=[draw(st.integers(1, 2)) for _ in range(sd)])
            x = _floats(draw, (1, c) + spatial)
            return NodeCase(kind, {"x": x}, {"w": _floats(draw, (m, c // g, *k)), "b": _floats(draw, (m,))}, attrs)
        attrs["ceil_mode"] = draw(st.integers(0, 1))
        if kind == "AveragePool":
            attrs["count_include_pad"] = draw(st.integers(0, 1))
        return NodeCase(kind, {"x": _floats(draw, (1, 2) + spatial)}, attrs=attrs)
    if kind == "Gemm":
        m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
        ta, tb = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        a = _floats(draw, (k, m) if ta else (m, k))
        b = _floats(draw, (n, k) if tb else (k, n))
        c = _floats(draw, _broadcastable(draw, (m, n)))
        return NodeCase(kind, {"a": a, "b": b, "c": c}, attrs={"transA": ta, "transB": tb,
                                                                "alpha": round(draw(st.floats(0.1, 2)), 2),
                                                                "beta": round(draw(st.floats(0, 2)), 2)})
    if kind == "MatMul":
        m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
        batch = _shape(draw, 0, 2, 3)
        a_shape = (*_broadcastable(draw, batch), m, k) if draw(st.booleans()) else (k,)
        b_shape = (*batch, k, n) if draw(st.booleans()) else (k,)
        return NodeCase(kind, {"a": _floats(draw, a_shape), "b": _floats(draw, b_shape)})
    # Normalizing over one element is ill-conditioned: x - mean is ORT's rounding error times
    # 1/sqrt(eps), so the normalized extent is at least 2 elements.
    if kind == "LayerNormalization":
        shape = _shape(draw, 2)
        shape = (*shape[:-1], max(shape[-1], 2))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        norm = shape[axis % len(shape):]
        return NodeCase(kind, {"x": _floats(draw, shape)}, {"s": _floats(draw, norm), "b": _floats(draw, norm)},
                        {"axis": axis, "epsilon": 1e-5})
    if kind == "InstanceNormalization":
        spatial = _shape(draw, 1, 2)
        shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial[:-1], max(spatial[-1], 2))
        return NodeCase(kind, {"x": _floats(draw, shape)}, {"s": _floats(draw, (shape[1],)),
                                                             "b": _floats(draw, (shape[1],))})
    if kind == "TopK":
        shape = _shape(draw)
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        k = draw(st.integers(0, shape[axis]))
        x = np.round(_floats(draw, shape) * 2) / 2  # exact ties: the lower index goes first
        return NodeCase(kind, {"x": x.astype(np.float32)}, {"k": np.array([k], np.int64)},
                        {"axis": axis, "largest": draw(st.integers(0, 1))}, outputs=2)
    if kind == "Resize":
        shape = (1, 1, draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        mode = draw(st.sampled_from(["nearest", "linear", "cubic"]))
        ctm = draw(st.sampled_from(["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]))
        scales = [1.0, 1.0] + [draw(st.sampled_from([0.5, 0.6, 0.75, 1.0, 1.5, 2.0, 2.5])) for _ in range(2)]
        attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
        if mode == "nearest":
            attrs["nearest_mode"] = draw(st.sampled_from(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
        return NodeCase(kind, {"x": _floats(draw, shape)}, {"roi": np.zeros(0, np.float32),
                                                             "scales": np.array(scales, np.float32)}, attrs)
    # Einsum: a random contraction of two operands over letters, some of size 1 (broadcast)
    letters = "abcde"
    size = {c: draw(st.integers(1, 3)) for c in letters}
    ta = "".join(draw(st.permutations(letters))[:draw(st.integers(1, 3))])
    tb = "".join(draw(st.permutations(letters))[:draw(st.integers(1, 3))])
    used = sorted(set(ta + tb))
    out = "".join(c for c in draw(st.permutations(used)) if draw(st.booleans()))
    a = _floats(draw, tuple(size[c] for c in ta))
    b = _floats(draw, tuple(size[c] if draw(st.integers(0, 3)) else 1 for c in tb))
    return NodeCase(kind, {"a": a, "b": b}, attrs={"equation": f"{ta},{tb}->{out}"})


INT_TYPES = [np.int8, np.uint8, np.int32, np.int64]


@st.composite
def integer(draw) -> NodeCase:
    """Integer and mixed-type semantics: truncating division, modulo signs, casts, integer Pow with
    a float exponent, Shrink and Clip on integers, comparisons and Where."""
    op = draw(st.sampled_from(["Div", "Mod", "Pow", "Shrink", "Clip", "Cast", "Abs", "Neg", "Where", "Greater",
                               "Equal", "Max", "BitShift", "Sum", "Mean"]))
    t = draw(st.sampled_from(INT_TYPES))
    shape = _shape(draw, 1, 3)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    info = np.iinfo(t)
    lo, hi = max(int(info.min), -20), min(int(info.max), 20)
    a = rng.integers(lo, hi + 1, shape).astype(t)
    b = rng.integers(lo, hi + 1, _broadcastable(draw, shape)).astype(t)
    if op in ("Div", "Mod"):
        b = np.where(b == 0, 3, b).astype(t)
        attrs = {"fmod": draw(st.integers(0, 1))} if op == "Mod" else {}
        return NodeCase(op, {"a": a, "b": b}, attrs=attrs)
    if op == "Pow":
        t = draw(st.sampled_from([np.int32, np.int64]))
        base = rng.integers(0, 6, shape).astype(t)
        return NodeCase(op, {"a": base, "e": rng.uniform(0, 2.5, _broadcastable(draw, shape)).astype(np.float32)})
    if op == "Shrink":
        t = draw(st.sampled_from([np.int8, np.uint8]))
        x = rng.integers(0 if t == np.uint8 else -20, 21, shape).astype(t)
        return NodeCase(op, {"x": x}, attrs={"lambd": round(draw(st.floats(0, 3)), 1),
                                             "bias": round(draw(st.floats(0, 3)), 1)})
    if op == "Clip":
        m1, m2 = sorted(int(v) for v in rng.integers(lo, hi + 1, 2))
        return NodeCase(op, {"x": a}, {"lo": np.array(m1, t), "hi": np.array(m2, t)})
    if op == "Cast":
        x = rng.uniform(-300, 300, shape).astype(np.float32) if draw(st.booleans()) else a
        to = draw(st.sampled_from([onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT32,
                                   onnx.TensorProto.FLOAT, onnx.TensorProto.BOOL]))
        if x.dtype.kind == "f" and to in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8):
            x = np.clip(x, -100 if to == onnx.TensorProto.INT8 else 0, 100).astype(np.float32)  # in range: UB outside
        return NodeCase(op, {"x": x}, attrs={"to": to})
    if op in ("Abs", "Neg"):
        return NodeCase(op, {"x": a if op == "Abs" or info.min < 0 else a.astype(np.int32)})
    if op == "Where":
        return NodeCase(op, {"c": rng.integers(0, 2, shape).astype(bool), "a": a, "b": b})
    if op == "BitShift":
        u = draw(st.sampled_from([np.uint8, np.uint32, np.uint64]))
        return NodeCase(op, {"a": rng.integers(0, 200, shape).astype(u), "b": rng.integers(0, 5, shape).astype(u)},
                        attrs={"direction": draw(st.sampled_from(["LEFT", "RIGHT"]))})
    if op in ("Sum", "Mean"):
        t = np.int32 if op == "Sum" else np.float32
        return NodeCase(op, {"a": a.astype(t), "b": b.astype(t), "c": a[..., :1].astype(t)})
    return NodeCase(op, {"a": a, "b": b})


@st.composite
def nn_more(draw) -> NodeCase:
    """Less common attributes: auto_pad, ConvTranspose output padding, pooling dilations, LpPool,
    LRN, scatter reductions, Resize by sizes with an aspect policy or antialias, GridSample."""
    kind = draw(st.sampled_from(["ConvAuto", "ConvTranspose", "MaxPoolDil", "LpPool", "LRN", "LpNormalization",
                                 "ScatterElements", "ScatterND", "OneHot", "SpaceToDepth", "ResizeSizes",
                                 "GridSample", "GlobalLpPool", "EyeLike"]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    if kind in ("ConvAuto", "MaxPoolDil", "LpPool"):
        spatial = (draw(st.integers(3, 6)), draw(st.integers(3, 6)))
        k = [draw(st.integers(1, 3)) for _ in range(2)]
        attrs = {"kernel_shape": k, "strides": [draw(st.integers(1, 2)) for _ in range(2)]}
        x = _floats(draw, (1, 2) + spatial)
        if kind == "ConvAuto":
            attrs["auto_pad"] = draw(st.sampled_from(["SAME_UPPER", "SAME_LOWER", "VALID"]))
            return NodeCase("Conv", {"x": x}, {"w": _floats(draw, (3, 2, *k))}, attrs)
        if kind == "MaxPoolDil":
            attrs.update(dilations=[draw(st.integers(1, 2)) for _ in range(2)], ceil_mode=draw(st.integers(0, 1)),
                         pads=[draw(st.integers(0, kk - 1)) for kk in k * 2])
            return NodeCase("MaxPool", {"x": x}, attrs=attrs)
        attrs["p"] = draw(st.integers(1, 3))
        return NodeCase("LpPool", {"x": x}, attrs=attrs)
    if kind == "ConvTranspose":
        s = [draw(st.integers(1, 3)) for _ in range(2)]
        k = [draw(st.integers(1, 3)) for _ in range(2)]
        d = [draw(st.integers(1, 2)) for _ in range(2)]
        g = draw(st.integers(1, 2))
        attrs = {"strides": s, "kernel_shape": k, "dilations": d, "group": g,
                 "pads": [draw(st.integers(0, kk - 1)) for kk in k * 2],
                 "output_padding": [draw(st.integers(0, max(ss, dd) - 1)) for ss, dd in zip(s, d)]}
        x = _floats(draw, (1, 2 * g, draw(st.integers(1, 4)), draw(st.integers(1, 4))))
        return NodeCase("ConvTranspose", {"x": x}, {"w": _floats(draw, (2 * g, draw(st.integers(1, 2)), *k))}, attrs)
    if kind == "LRN":
        return NodeCase("LRN", {"x": _floats(draw, (1, draw(st.integers(1, 6)), 2, 2))},
                        attrs={"size": draw(st.sampled_from([1, 3, 5])), "alpha": 1e-3, "beta": 0.75, "bias": 1.0})
    if kind == "LpNormalization":
        shape = _shape(draw, 1, 3)
        return NodeCase(kind, {"x": _floats(draw, shape)},
                        attrs={"axis": draw(st.integers(-len(shape), len(shape) - 1)), "p": draw(st.integers(1, 2))})
    if kind == "GlobalLpPool":
        return NodeCase(kind, {"x": _floats(draw, (1, 2, 3, 3))}, attrs={"p": draw(st.integers(1, 3))})
    if kind == "ScatterElements":
        shape = _shape(draw, 1, 3)
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        n = shape[axis]
        upd_shape = tuple(draw(st.integers(1, d)) for d in shape)
        idx = rng.integers(-n, n, upd_shape).astype(np.int64)
        red = draw(st.sampled_from(["none", "add", "mul", "max", "min"]))
        if red == "none":  # duplicate targets are unspecified without a reduction: make them distinct
            idx = np.broadcast_to(np.arange(upd_shape[axis]).reshape([-1 if i == axis % len(shape) else 1
                                                                      for i in range(len(shape))]),
                                  upd_shape).astype(np.int64).copy()
        return NodeCase(kind, {"x": _floats(draw, shape)}, {"i": idx, "u": _floats(draw, upd_shape)},
                        {"axis": axis, "reduction": red})
    if kind == "ScatterND":
        shape = _shape(draw, 1, 3)
        k = draw(st.integers(1, len(shape)))
        rows = sorted({tuple(int(rng.integers(0, d)) for d in shape[:k]) for _ in range(3)})
        idx = np.array(rows, np.int64)
        red = draw(st.sampled_from(["none", "add", "mul", "max", "min"]))
        return NodeCase(kind, {"x": _floats(draw, shape)},
                        {"i": idx, "u": _floats(draw, (len(rows), *shape[k:]))}, {"reduction": red})
    if kind == "OneHot":
        depth = draw(st.integers(1, 5))
        idx = rng.integers(-depth, depth, _shape(draw, 1, 2)).astype(np.int64)
        return NodeCase(kind, {"i": idx}, {"d": np.array(depth, np.int64), "v": np.array([0.5, 2.0], np.float32)},
                        {"axis": draw(st.integers(-1 - idx.ndim, idx.ndim))})
    if kind == "SpaceToDepth":
        b = draw(st.integers(1, 2))
        return NodeCase(kind, {"x": _floats(draw, (1, 2, 2 * b, 3 * b))}, attrs={"blocksize": b})
    if kind == "ResizeSizes":
        shape = (1, 1, draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        sizes = [1, 1, draw(st.integers(1, 7)), draw(st.integers(1, 7))]
        mode = draw(st.sampled_from(["nearest", "linear", "cubic"]))
        attrs = {"mode": mode, "keep_aspect_ratio_policy": draw(st.sampled_from(["stretch", "not_larger",
                                                                                 "not_smaller"]))}
        if mode != "nearest":
            attrs["antialias"] = draw(st.integers(0, 1))
        return NodeCase("Resize", {"x": _floats(draw, shape)}, {"roi": np.zeros(0, np.float32),
                                                                 "scales": np.zeros(0, np.float32),
                                                                 "sizes": np.array(sizes, np.int64)}, attrs)
    if kind == "GridSample":
        h, w = draw(st.integers(2, 4)), draw(st.integers(2, 4))
        grid = rng.uniform(-1.2, 1.2, (1, draw(st.integers(1, 3)), draw(st.integers(1, 3)), 2)).astype(np.float32)
        return NodeCase(kind, {"x": _floats(draw, (1, 1, h, w)), "g": grid},
                        attrs={"mode": draw(st.sampled_from(["linear", "nearest", "cubic"])),
                               "padding_mode": draw(st.sampled_from(["zeros", "border", "reflection"])),
                               "align_corners": draw(st.integers(0, 1))},
                        opset=20)  # the mode names of opset 20, which ONNX Runtime runs (onnx.reference's
        # cubic + border differs from ORT's and ours: it does not clamp the sampling point first)
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return NodeCase("EyeLike", {"x": _floats(draw, shape)}, attrs={"k": draw(st.integers(-3, 3))})


STRATEGIES = {"nn_more": nn_more(), "integer": integer(), "binary": binary(), "unary": unary(), "reduce": reduce(),
              "softmax_like": softmax_like(), "movement": movement(), "nn": nn()}
