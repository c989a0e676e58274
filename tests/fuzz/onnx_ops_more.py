"""More Hypothesis strategies for the differential fuzzer: integer-typed ops and the wider nn
family (split from tests/fuzz/onnx_ops.py, which holds NodeCase, the shape/array draws and the
first five families). STRATEGIES lists every family by name."""

from __future__ import annotations

import numpy as np
import onnx
from hypothesis import strategies as st

from tests.fuzz.onnx_ops import (
    NodeCase,
    binary,
    draw_broadcastable,
    draw_floats,
    draw_shape,
    movement,
    nn,
    reduce,
    softmax_like,
    unary,
)

INT_TYPES = [np.int8, np.uint8, np.int32, np.int64]


@st.composite
def integer(draw) -> NodeCase:
    """Integer and mixed-type semantics: truncating division, modulo signs, casts, integer Pow with
    a float exponent, Shrink and Clip on integers, comparisons and Where."""
    op = draw(
        st.sampled_from(
            [
                "Div",
                "Mod",
                "Pow",
                "Shrink",
                "Clip",
                "Cast",
                "Abs",
                "Neg",
                "Where",
                "Greater",
                "Equal",
                "Max",
                "BitShift",
                "Sum",
                "Mean",
            ]
        )
    )
    t = draw(st.sampled_from(INT_TYPES))
    shape = draw_shape(draw, 1, 3)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    info = np.iinfo(t)
    lo, hi = max(int(info.min), -20), min(int(info.max), 20)
    a = rng.integers(lo, hi + 1, shape).astype(t)
    b = rng.integers(lo, hi + 1, draw_broadcastable(draw, shape)).astype(t)
    if op in ("Div", "Mod"):
        b = np.where(b == 0, 3, b).astype(t)
        attrs = {"fmod": draw(st.integers(0, 1))} if op == "Mod" else {}
        return NodeCase(op, {"a": a, "b": b}, attrs=attrs)
    if op == "Pow":
        t = draw(st.sampled_from([np.int32, np.int64]))
        base = rng.integers(0, 6, shape).astype(t)
        return NodeCase(op, {"a": base, "e": rng.uniform(0, 2.5, draw_broadcastable(draw, shape)).astype(np.float32)})
    if op == "Shrink":
        t = draw(st.sampled_from([np.int8, np.uint8]))
        x = rng.integers(0 if t == np.uint8 else -20, 21, shape).astype(t)
        return NodeCase(
            op, {"x": x}, attrs={"lambd": round(draw(st.floats(0, 3)), 1), "bias": round(draw(st.floats(0, 3)), 1)}
        )
    if op == "Clip":
        m1, m2 = sorted(int(v) for v in rng.integers(lo, hi + 1, 2))
        return NodeCase(op, {"x": a}, {"lo": np.array(m1, t), "hi": np.array(m2, t)})
    if op == "Cast":
        x = rng.uniform(-300, 300, shape).astype(np.float32) if draw(st.booleans()) else a
        to = draw(
            st.sampled_from(
                [
                    onnx.TensorProto.INT8,
                    onnx.TensorProto.UINT8,
                    onnx.TensorProto.INT32,
                    onnx.TensorProto.FLOAT,
                    onnx.TensorProto.BOOL,
                ]
            )
        )
        if x.dtype.kind == "f" and to in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8):
            x = np.clip(x, -100 if to == onnx.TensorProto.INT8 else 0, 100).astype(np.float32)  # in range: UB outside
        return NodeCase(op, {"x": x}, attrs={"to": to})
    if op in ("Abs", "Neg"):
        return NodeCase(op, {"x": a if op == "Abs" or info.min < 0 else a.astype(np.int32)})
    if op == "Where":
        return NodeCase(op, {"c": rng.integers(0, 2, shape).astype(bool), "a": a, "b": b})
    if op == "BitShift":
        u = draw(st.sampled_from([np.uint8, np.uint32, np.uint64]))
        return NodeCase(
            op,
            {"a": rng.integers(0, 200, shape).astype(u), "b": rng.integers(0, 5, shape).astype(u)},
            attrs={"direction": draw(st.sampled_from(["LEFT", "RIGHT"]))},
        )
    if op in ("Sum", "Mean"):
        t = np.int32 if op == "Sum" else np.float32
        return NodeCase(op, {"a": a.astype(t), "b": b.astype(t), "c": a[..., :1].astype(t)})
    return NodeCase(op, {"a": a, "b": b})


@st.composite
def nn_more(draw) -> NodeCase:
    """Less common attributes: auto_pad, ConvTranspose output padding, pooling dilations, LpPool,
    LRN, scatter reductions, Resize by sizes with an aspect policy or antialias, GridSample."""
    kind = draw(
        st.sampled_from(
            [
                "ConvAuto",
                "ConvTranspose",
                "MaxPoolDil",
                "LpPool",
                "LRN",
                "LpNormalization",
                "ScatterElements",
                "ScatterND",
                "OneHot",
                "SpaceToDepth",
                "ResizeSizes",
                "GridSample",
                "GlobalLpPool",
                "EyeLike",
            ]
        )
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if kind in ("ConvAuto", "MaxPoolDil", "LpPool"):
        spatial = (draw(st.integers(3, 6)), draw(st.integers(3, 6)))
        k = [draw(st.integers(1, 3)) for _ in range(2)]
        attrs = {"kernel_shape": k, "strides": [draw(st.integers(1, 2)) for _ in range(2)]}
        x = draw_floats(draw, (1, 2) + spatial)
        if kind == "ConvAuto":
            attrs["auto_pad"] = draw(st.sampled_from(["SAME_UPPER", "SAME_LOWER", "VALID"]))
            return NodeCase("Conv", {"x": x}, {"w": draw_floats(draw, (3, 2, *k))}, attrs)
        if kind == "MaxPoolDil":
            attrs.update(
                dilations=[draw(st.integers(1, 2)) for _ in range(2)],
                ceil_mode=draw(st.integers(0, 1)),
                pads=[draw(st.integers(0, kk - 1)) for kk in k * 2],
            )
            return NodeCase("MaxPool", {"x": x}, attrs=attrs)
        attrs["p"] = draw(st.integers(1, 3))
        return NodeCase("LpPool", {"x": x}, attrs=attrs)
    if kind == "ConvTranspose":
        s = [draw(st.integers(1, 3)) for _ in range(2)]
        k = [draw(st.integers(1, 3)) for _ in range(2)]
        d = [draw(st.integers(1, 2)) for _ in range(2)]
        g = draw(st.integers(1, 2))
        attrs = {
            "strides": s,
            "kernel_shape": k,
            "dilations": d,
            "group": g,
            "pads": [draw(st.integers(0, kk - 1)) for kk in k * 2],
            "output_padding": [draw(st.integers(0, max(ss, dd) - 1)) for ss, dd in zip(s, d)],
        }
        x = draw_floats(draw, (1, 2 * g, draw(st.integers(1, 4)), draw(st.integers(1, 4))))
        return NodeCase(
            "ConvTranspose", {"x": x}, {"w": draw_floats(draw, (2 * g, draw(st.integers(1, 2)), *k))}, attrs
        )
    if kind == "LRN":
        return NodeCase(
            "LRN",
            {"x": draw_floats(draw, (1, draw(st.integers(1, 6)), 2, 2))},
            attrs={"size": draw(st.sampled_from([1, 3, 5])), "alpha": 1e-3, "beta": 0.75, "bias": 1.0},
        )
    if kind == "LpNormalization":
        shape = draw_shape(draw, 1, 3)
        return NodeCase(
            kind,
            {"x": draw_floats(draw, shape)},
            attrs={"axis": draw(st.integers(-len(shape), len(shape) - 1)), "p": draw(st.integers(1, 2))},
        )
    if kind == "GlobalLpPool":
        return NodeCase(kind, {"x": draw_floats(draw, (1, 2, 3, 3))}, attrs={"p": draw(st.integers(1, 3))})
    if kind == "ScatterElements":
        shape = draw_shape(draw, 1, 3)
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        n = shape[axis]
        upd_shape = tuple(draw(st.integers(1, d)) for d in shape)
        idx = rng.integers(-n, n, upd_shape).astype(np.int64)
        red = draw(st.sampled_from(["none", "add", "mul", "max", "min"]))
        if red == "none":  # duplicate targets are unspecified without a reduction: make them distinct
            idx = (
                np.broadcast_to(
                    np.arange(upd_shape[axis]).reshape(
                        [-1 if i == axis % len(shape) else 1 for i in range(len(shape))]
                    ),
                    upd_shape,
                )
                .astype(np.int64)
                .copy()
            )
        return NodeCase(
            kind,
            {"x": draw_floats(draw, shape)},
            {"i": idx, "u": draw_floats(draw, upd_shape)},
            {"axis": axis, "reduction": red},
        )
    if kind == "ScatterND":
        shape = draw_shape(draw, 1, 3)
        k = draw(st.integers(1, len(shape)))
        rows = sorted({tuple(int(rng.integers(0, d)) for d in shape[:k]) for _ in range(3)})
        idx = np.array(rows, np.int64)
        red = draw(st.sampled_from(["none", "add", "mul", "max", "min"]))
        return NodeCase(
            kind,
            {"x": draw_floats(draw, shape)},
            {"i": idx, "u": draw_floats(draw, (len(rows), *shape[k:]))},
            {"reduction": red},
        )
    if kind == "OneHot":
        depth = draw(st.integers(1, 5))
        idx = rng.integers(-depth, depth, draw_shape(draw, 1, 2)).astype(np.int64)
        return NodeCase(
            kind,
            {"i": idx},
            {"d": np.array(depth, np.int64), "v": np.array([0.5, 2.0], np.float32)},
            {"axis": draw(st.integers(-1 - idx.ndim, idx.ndim))},
        )
    if kind == "SpaceToDepth":
        b = draw(st.integers(1, 2))
        return NodeCase(kind, {"x": draw_floats(draw, (1, 2, 2 * b, 3 * b))}, attrs={"blocksize": b})
    if kind == "ResizeSizes":
        shape = (1, 1, draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        sizes = [1, 1, draw(st.integers(1, 7)), draw(st.integers(1, 7))]
        mode = draw(st.sampled_from(["nearest", "linear", "cubic"]))
        attrs = {
            "mode": mode,
            "keep_aspect_ratio_policy": draw(st.sampled_from(["stretch", "not_larger", "not_smaller"])),
        }
        if mode != "nearest":
            attrs["antialias"] = draw(st.integers(0, 1))
        return NodeCase(
            "Resize",
            {"x": draw_floats(draw, shape)},
            {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32), "sizes": np.array(sizes, np.int64)},
            attrs,
        )
    if kind == "GridSample":
        h, w = draw(st.integers(2, 4)), draw(st.integers(2, 4))
        grid = rng.uniform(-1.2, 1.2, (1, draw(st.integers(1, 3)), draw(st.integers(1, 3)), 2)).astype(np.float32)
        return NodeCase(
            kind,
            {"x": draw_floats(draw, (1, 1, h, w)), "g": grid},
            attrs={
                "mode": draw(st.sampled_from(["linear", "nearest", "cubic"])),
                "padding_mode": draw(st.sampled_from(["zeros", "border", "reflection"])),
                "align_corners": draw(st.integers(0, 1)),
            },
            opset=20,
        )  # the mode names of opset 20, which ONNX Runtime runs (onnx.reference's
        # cubic + border differs from ORT's and ours: it does not clamp the sampling point first)
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return NodeCase("EyeLike", {"x": draw_floats(draw, shape)}, attrs={"k": draw(st.integers(-3, 3))})


STRATEGIES = {
    "nn_more": nn_more(),
    "integer": integer(),
    "binary": binary(),
    "unary": unary(),
    "reduce": reduce(),
    "softmax_like": softmax_like(),
    "movement": movement(),
    "nn": nn(),
}
