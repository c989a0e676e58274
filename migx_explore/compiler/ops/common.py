"""Helpers shared by op specs: axis normalization, shape checks, pointwise output layout."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ShapeError
from ..op import AttrSpec, Op
from ..shape import Shape


def A(name: str, kind: str, default=None, **kw) -> AttrSpec:
    """Short constructor for attribute specs in op tables."""
    return AttrSpec(name, kind, default, **kw)


def norm_axis(axis: int, ndim: int, op: str, *, allow_end: bool = False) -> int:
    hi = ndim + (1 if allow_end else 0)
    a = axis + ndim if axis < 0 else axis  # negative axes count from the rank (ONNX), even for flatten
    if not 0 <= a < max(hi, 1):
        raise ShapeError(f"{op}: axis {axis} is out of range for rank {ndim}")
    return a


def norm_axes(axes: Sequence[int], ndim: int, op: str, *, allow_end: bool = False) -> tuple[int, ...]:
    out = tuple(norm_axis(a, ndim, op, allow_end=allow_end) for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: repeated axis in {tuple(axes)}")
    return out


def same_type(op: str, inputs: Sequence[Shape], *, start: int = 0) -> str:
    types = {s.type for s in inputs[start:]}
    if len(types) > 1:
        raise ShapeError(f"{op}: inputs have different element types {sorted(types)}; insert a convert")
    return inputs[start].type


def same_lens(op: str, inputs: Sequence[Shape]) -> tuple[int, ...]:
    lens = inputs[0].lens
    for s in inputs[1:]:
        if s.lens != lens:
            raise ShapeError(
                f"{op}: input dimensions differ ({', '.join(str(list(x.lens)) for x in inputs)}); "
                "broadcast explicitly with multibroadcast"
            )
    return lens


def pointwise_shape(op: str, inputs: Sequence[Shape], out_type: str) -> Shape:
    """Elementwise output: same lens; keeps a packed common layout (e.g. NHWC) else standard."""
    if not inputs:
        raise ShapeError(f"{op}: needs at least one input")
    s0 = inputs[0]
    if s0.type == out_type and s0.dyn_dims is None and s0.packed() and all(s == s0 for s in inputs[1:]):
        return s0  # what the rules below build, already built (shapes are immutable): most calls
    if any(s.dyn_dims is not None for s in inputs):
        first = inputs[0]
        for s in inputs[1:]:
            if s.dyn_dims != first.dyn_dims:
                raise ShapeError(f"{op}: dynamic input dimensions differ")
        return Shape(out_type, first.lens, (), first.dyn_dims)
    lens = same_lens(op, inputs)
    s0 = inputs[0]
    if all(s.strides == s0.strides for s in inputs) and (s0.packed() or s0.scalar_shape()):
        # Same layout everywhere (e.g. NHWC, or MIGraphX's scalar {1},{0} inside fused modules): keep it.
        return Shape.of(out_type, lens, s0.strides)
    # Broadcast operands (biases, scales) have no layout of their own: follow the dense inputs,
    # as MIGraphX does, so an NHWC conv + broadcast bias stays NHWC.
    dense = [s for s in inputs if not s.broadcasted() and not s.scalar_shape()]
    if dense and dense[0].packed() and all(s.strides == dense[0].strides for s in dense):
        return Shape.of(out_type, lens, dense[0].strides)
    return Shape.of(out_type, lens)


def standard(type: str, lens: Sequence[int]) -> Shape:
    return Shape.of(type, lens)


def keep_layout(s: Shape, lens: Sequence[int], type: str | None = None) -> Shape:
    return Shape.of(type or s.type, lens)


def op_axes(op: Op, key: str, ndim: int) -> tuple[int, ...]:
    return norm_axes(op[key], ndim, op.name)


def normalizer(**keys: str):
    """Build a normalize function that rewrites negative axis attributes to non-negative ones.

    keys maps an attribute name to 'axis' (single) or 'axes' (list); rank comes from input 0."""

    def normalize(op: Op, inputs: list[Shape]) -> Op:
        nd = inputs[0].ndim
        upd = {}
        for k, kind in keys.items():
            v = op[k]
            if v is None:
                continue
            if kind == "axis":
                upd[k] = norm_axis(v, nd, op.name)
            elif kind == "axes":
                upd[k] = (
                    tuple(sorted(norm_axes(v, nd, op.name)))
                    if op.name.startswith("reduce")
                    else norm_axes(v, nd, op.name)
                )
            elif kind == "axis_end":
                upd[k] = norm_axis(v, nd, op.name, allow_end=True)
        return op.with_(**upd) if upd else op

    return normalize


def as_array(x) -> np.ndarray:
    return np.asarray(x)
