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
        inputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
            for n, v in self.feed.items()
        ]
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


def draw_shape(draw, min_rank=1, max_rank=4, max_dim=5) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.integers(1, max_dim), min_size=min_rank, max_size=max_rank)))


def draw_floats(draw, shape, lo=-3.0, hi=3.0, seed=None) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**16)) if seed is None else seed)
    return rng.uniform(lo, hi, shape).astype(np.float32)


def draw_broadcastable(draw, shape):
    """A shape numpy-broadcastable with `shape`: a suffix, some dims replaced by 1."""
    k = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else d for d in shape[len(shape) - k :])


@st.composite
def binary(draw) -> NodeCase:
    op = draw(st.sampled_from(["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"]))
    a = draw_shape(draw)
    b = draw_broadcastable(draw, a)
    lo = 0.5 if op == "Pow" else -3.0
    return NodeCase(op, {"a": draw_floats(draw, a, lo), "b": draw_floats(draw, b, -2.0 if op == "Pow" else -3.0)})


UNARY = {
    "Relu": {},
    "Sigmoid": {},
    "Tanh": {},
    "Abs": {},
    "Neg": {},
    "Exp": {},
    "Erf": {},
    "Softplus": {},
    "Softsign": {},
    "Floor": {},
    "Ceil": {},
    "Round": {},
    "Sign": {},
    "Reciprocal": {},
    "Sin": {},
    "Cos": {},
    "Elu": {"alpha": (0.1, 2.0)},
    "LeakyRelu": {"alpha": (0.01, 0.5)},
    "Selu": {},
    "Celu": {"alpha": (0.2, 2.0)},
    "HardSigmoid": {"alpha": (0.1, 0.5), "beta": (0.2, 0.8)},
    "ThresholdedRelu": {"alpha": (0.0, 1.5)},
    "Shrink": {"lambd": (0.0, 1.5), "bias": (0.0, 1.5)},
    "HardSwish": {},
    "Mish": {},
}


@st.composite
def unary(draw) -> NodeCase:
    op = draw(st.sampled_from(sorted(UNARY)))
    attrs = {k: round(draw(st.floats(*r)), 3) for k, r in UNARY[op].items()}
    x = draw_floats(draw, draw_shape(draw))
    if op == "Reciprocal":
        x = np.where(np.abs(x) < 0.1, 0.5, x).astype(np.float32)
    return NodeCase(op, {"x": x}, attrs=attrs)


@st.composite
def reduce(draw) -> NodeCase:
    op = draw(
        st.sampled_from(
            [
                "ReduceSum",
                "ReduceMean",
                "ReduceMax",
                "ReduceMin",
                "ReduceProd",
                "ReduceL1",
                "ReduceL2",
                "ReduceLogSumExp",
                "ReduceSumSquare",
            ]
        )
    )
    shape = draw_shape(draw)
    axes = sorted(
        draw(st.sets(st.integers(-len(shape), len(shape) - 1), max_size=len(shape))), key=lambda a: a % len(shape)
    )
    if len({a % len(shape) for a in axes}) != len(axes):
        axes = sorted({a % len(shape) for a in axes})
    attrs = {"keepdims": draw(st.integers(0, 1))}
    if not axes:
        attrs["noop_with_empty_axes"] = draw(st.integers(0, 1))
    consts = {"axes": np.array(axes, np.int64)} if axes else {}
    x = draw_floats(draw, shape, 0.1 if op == "ReduceProd" else -3.0, 1.5 if op == "ReduceProd" else 3.0)
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
    shape = draw_shape(draw)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    attrs = {"axis": axis}
    if op.startswith("Arg"):
        attrs.update(keepdims=draw(st.integers(0, 1)), select_last_index=draw(st.integers(0, 1)))
    x = draw_floats(draw, shape)
    if draw(st.booleans()):  # exact ties, which the tie rules decide
        x = np.round(x).astype(np.float32)
    return NodeCase(op, {"x": x}, attrs=attrs)


@st.composite
def movement(draw) -> NodeCase:
    kind = draw(
        st.sampled_from(
            [
                "Transpose",
                "Flatten",
                "Concat",
                "Split",
                "Slice",
                "Gather",
                "Tile",
                "Expand",
                "Pad",
                "CumSum",
                "Trilu",
                "DepthToSpace",
                "GatherElements",
                "ReverseSequence",
            ]
        )
    )
    shape = draw_shape(draw)
    nd = len(shape)
    x = draw_floats(draw, shape)
    if kind == "Transpose":
        return NodeCase(kind, {"x": x}, attrs={"perm": list(draw(st.permutations(range(nd))))})
    if kind == "Flatten":
        return NodeCase(kind, {"x": x}, attrs={"axis": draw(st.integers(-nd, nd))})
    if kind == "Concat":
        axis = draw(st.integers(-nd, nd - 1))
        other = list(shape)
        other[axis] = draw(st.integers(1, 4))
        return NodeCase(kind, {"x": x, "z": draw_floats(draw, tuple(other))}, attrs={"axis": axis})
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
        consts = {
            "starts": np.array(starts, np.int64),
            "ends": np.array(ends, np.int64),
            "axes": np.array(axes, np.int64),
            "steps": np.array(steps, np.int64),
        }
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
        target = [d if d != 1 else draw(st.integers(1, 3)) for d in draw_broadcastable(draw, shape)]
        pre = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 1)))]
        x2 = draw_floats(draw, tuple(1 if draw(st.booleans()) else d for d in shape))
        return NodeCase(kind, {"x": x2}, {"s": np.array(pre + list(shape[: nd - len(target)]) + target, np.int64)})
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
        return NodeCase(
            kind,
            {"x": x},
            {"axis": np.array(draw(st.integers(-nd, nd - 1)), np.int64)},
            {"exclusive": draw(st.integers(0, 1)), "reverse": draw(st.integers(0, 1))},
        )
    if kind == "Trilu":
        x2 = draw_floats(draw, shape if nd >= 2 else (3, 4))
        return NodeCase(
            kind, {"x": x2}, {"k": np.array(draw(st.integers(-3, 3)), np.int64)}, {"upper": draw(st.integers(0, 1))}
        )
    if kind == "DepthToSpace":
        b = draw(st.integers(1, 2))
        x4 = draw_floats(draw, (1, b * b * draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))))
        return NodeCase(kind, {"x": x4}, attrs={"blocksize": b, "mode": draw(st.sampled_from(["DCR", "CRD"]))})
    # ReverseSequence: [T, B, ...] with per-batch lengths
    t, b = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    lens = np.array([draw(st.integers(1, t)) for _ in range(b)], np.int64)
    return NodeCase(kind, {"x": draw_floats(draw, (t, b, 2))}, {"l": lens}, {"batch_axis": 1, "time_axis": 0})


@st.composite
def nn(draw) -> NodeCase:
    kind = draw(
        st.sampled_from(
            [
                "Conv",
                "MaxPool",
                "AveragePool",
                "Gemm",
                "MatMul",
                "LayerNormalization",
                "InstanceNormalization",
                "TopK",
                "Resize",
                "Einsum",
            ]
        )
    )
    if kind in ("Conv", "MaxPool", "AveragePool"):
        sd = draw(st.integers(1, 2))
        spatial = tuple(draw(st.integers(3, 6)) for _ in range(sd))
        k = [draw(st.integers(1, 3)) for _ in range(sd)]
        attrs = {
            "kernel_shape": k,
            "strides": [draw(st.integers(1, 2)) for _ in range(sd)],
            "pads": [draw(st.integers(0, kk - 1)) for kk in k * 2],
        }
        if kind == "Conv":
            g = draw(st.integers(1, 2))
            c, m = g * draw(st.integers(1, 2)), g * draw(st.integers(1, 2))
            attrs.update(group=g, dilations=[draw(st.integers(1, 2)) for _ in range(sd)])
            x = draw_floats(draw, (1, c) + spatial)
            return NodeCase(
                kind, {"x": x}, {"w": draw_floats(draw, (m, c // g, *k)), "b": draw_floats(draw, (m,))}, attrs
            )
        attrs["ceil_mode"] = draw(st.integers(0, 1))
        if kind == "AveragePool":
            attrs["count_include_pad"] = draw(st.integers(0, 1))
        return NodeCase(kind, {"x": draw_floats(draw, (1, 2) + spatial)}, attrs=attrs)
    if kind == "Gemm":
        m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
        ta, tb = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        a = draw_floats(draw, (k, m) if ta else (m, k))
        b = draw_floats(draw, (n, k) if tb else (k, n))
        c = draw_floats(draw, draw_broadcastable(draw, (m, n)))
        return NodeCase(
            kind,
            {"a": a, "b": b, "c": c},
            attrs={
                "transA": ta,
                "transB": tb,
                "alpha": round(draw(st.floats(0.1, 2)), 2),
                "beta": round(draw(st.floats(0, 2)), 2),
            },
        )
    if kind == "MatMul":
        m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
        batch = draw_shape(draw, 0, 2, 3)
        a_shape = (*draw_broadcastable(draw, batch), m, k) if draw(st.booleans()) else (k,)
        b_shape = (*batch, k, n) if draw(st.booleans()) else (k,)
        return NodeCase(kind, {"a": draw_floats(draw, a_shape), "b": draw_floats(draw, b_shape)})
    # Normalizing over one element is ill-conditioned: x - mean is ORT's rounding error times
    # 1/sqrt(eps), so the normalized extent is at least 2 elements.
    if kind == "LayerNormalization":
        shape = draw_shape(draw, 2)
        shape = (*shape[:-1], max(shape[-1], 2))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        norm = shape[axis % len(shape) :]
        return NodeCase(
            kind,
            {"x": draw_floats(draw, shape)},
            {"s": draw_floats(draw, norm), "b": draw_floats(draw, norm)},
            {"axis": axis, "epsilon": 1e-5},
        )
    if kind == "InstanceNormalization":
        spatial = draw_shape(draw, 1, 2)
        shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial[:-1], max(spatial[-1], 2))
        return NodeCase(
            kind,
            {"x": draw_floats(draw, shape)},
            {"s": draw_floats(draw, (shape[1],)), "b": draw_floats(draw, (shape[1],))},
        )
    if kind == "TopK":
        shape = draw_shape(draw)
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        k = draw(st.integers(0, shape[axis]))
        x = np.round(draw_floats(draw, shape) * 2) / 2  # exact ties: the lower index goes first
        return NodeCase(
            kind,
            {"x": x.astype(np.float32)},
            {"k": np.array([k], np.int64)},
            {"axis": axis, "largest": draw(st.integers(0, 1))},
            outputs=2,
        )
    if kind == "Resize":
        shape = (1, 1, draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        mode = draw(st.sampled_from(["nearest", "linear", "cubic"]))
        ctm = draw(st.sampled_from(["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]))
        scales = [1.0, 1.0] + [draw(st.sampled_from([0.5, 0.6, 0.75, 1.0, 1.5, 2.0, 2.5])) for _ in range(2)]
        attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
        if mode == "nearest":
            attrs["nearest_mode"] = draw(st.sampled_from(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
        return NodeCase(
            kind,
            {"x": draw_floats(draw, shape)},
            {"roi": np.zeros(0, np.float32), "scales": np.array(scales, np.float32)},
            attrs,
        )
    # Einsum: a random contraction of two operands over letters, some of size 1 (broadcast)
    letters = "abcde"
    size = {c: draw(st.integers(1, 3)) for c in letters}
    ta = "".join(draw(st.permutations(letters))[: draw(st.integers(1, 3))])
    tb = "".join(draw(st.permutations(letters))[: draw(st.integers(1, 3))])
    used = sorted(set(ta + tb))
    out = "".join(c for c in draw(st.permutations(used)) if draw(st.booleans()))
    a = draw_floats(draw, tuple(size[c] for c in ta))
    b = draw_floats(draw, tuple(size[c] if draw(st.integers(0, 3)) else 1 for c in tb))
    return NodeCase(kind, {"a": a, "b": b}, attrs={"equation": f"{ta},{tb}->{out}"})
