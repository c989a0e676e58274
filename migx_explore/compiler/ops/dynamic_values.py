"""Ops whose output shape follows a runtime value (dynamic shapes, issue 37).

Exporters compute target shapes from the inputs' shapes (Shape -> Gather -> Concat -> Reshape /
Expand / ConstantOfShape / Slice). With a dynamic input those values are known only at run time,
so the shape-taking ONNX ops become these ops, which take the value as an input (as MIGraphX's
2-input `reshape`, `broadcast_with_dims`, `allocate` + `fill` and the input-bounds `slice` do):

    reshape_with_dims(x, dims)      ONNX Reshape (0 copies an input dim, -1 is inferred)
    broadcast_with_dims(x, dims)    ONNX Expand (numpy broadcast of x and dims)
    fill_with_dims(dims)            ONNX ConstantOfShape
    slice_with_bounds(x, starts, ends)   ONNX Slice with runtime bounds

Their shape rule cannot see the value, so each carries the range of its output as an attribute
(`output_shape`, a dynamic shape): the importer finds it by evaluating the shape computation with
the dynamic dimension at its ends. `broadcast_for_dot(x, y)` (MIGraphX's op) broadcasts x's batch
dims to those of x and y, leaving the last two (numpy matmul broadcasting with a dynamic batch).

Once split_single_dyn_dim makes the parameters static, the value inputs fold to literals and
`static_form` turns each op into its static equivalent (simplify_dyn_ops's rules), so no GPU
pipeline sees them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..op import GpuCode, Op, defop
from ..shape import DynDim, Shape
from .common import A
from .views import common_dyn_dims, reshape_dims

_FOLDED = "a runtime shape value; split_single_dyn_dim folds it to a static op before the GPU pipelines"


# --- the static output lens each op gives for concrete values --------------------------------
def reshape_lens(in_lens: Sequence[int], dims: Sequence[int]) -> tuple[int, ...]:
    return reshape_dims(tuple(in_lens), [int(d) for d in dims])


def expand_lens(in_lens: Sequence[int], dims: Sequence[int]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(tuple(in_lens), tuple(int(d) for d in dims)))
    except ValueError:
        raise ShapeError(f"broadcast_with_dims: cannot expand {list(in_lens)} to {list(dims)}") from None


def onnx_slice_range(n: int, start: int, end: int, step: int) -> range:
    """The indices ONNX Slice takes on an axis of n: negative bounds count from the end, then
    clamp to [0, n] ([0, n - 1] / [-1, n - 1] for a negative step)."""
    if step == 0:
        raise ShapeError("slice: step must not be 0")
    if n == 0:
        return range(0)
    start, end = start + n if start < 0 else start, end + n if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), n), min(max(end, 0), n), step)
    return range(min(max(start, 0), n - 1), min(max(end, -1), n - 1), step)


def slice_lens(in_lens, axes, starts, ends, steps) -> tuple[int, ...]:
    lens = list(in_lens)
    for a, st, en, sp in zip(axes, starts, ends, steps):
        lens[a] = len(onnx_slice_range(lens[a], int(st), int(en), int(sp)))
    return tuple(lens)


def dyn_range_shape(type: str, lo: Sequence[int], hi: Sequence[int]) -> Shape:
    """One shape covering lens `lo` and `hi` (static where they agree)."""
    if len(lo) != len(hi):
        raise ShapeError(f"output rank changes over the dynamic range ({list(lo)} vs {list(hi)})")
    if tuple(lo) == tuple(hi):
        return Shape.of(type, lo)
    return Shape.dynamic(type, [DynDim(min(a, b), max(a, b)) for a, b in zip(lo, hi)])


# --- specs ------------------------------------------------------------------------------------
def _from_attr(op, s, mods):
    out = op["output_shape"]
    t = s[0].type if op.name != "fill_with_dims" else out.type
    return Shape(t, out.lens, out.strides, out.dyn_dims) if out.type != t else out


_OUT = A("output_shape", "shape", Shape.scalar("float32"), show=True)


def _ints(v) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


defop(
    "reshape_with_dims",
    _from_attr,
    lambda op, a, out, run: np.reshape(a[0], reshape_lens(np.shape(a[0]), _ints(a[1]))),
    attrs=[_OUT],
    nargs=2,
    doc="Reshape x to the runtime dims (input 1; 0 copies an input dim, -1 is inferred); "
    "output_shape is the range it can take.",
    gpu=GpuCode.host(_FOLDED),
)

defop(
    "broadcast_with_dims",
    _from_attr,
    lambda op, a, out, run: np.broadcast_to(a[0], expand_lens(np.shape(a[0]), _ints(a[1]))),
    attrs=[_OUT],
    nargs=2,
    doc="Numpy-broadcast x with the runtime dims (input 1), as ONNX Expand; output_shape is the range.",
    gpu=GpuCode.host(_FOLDED),
)


def _fill_compute(op, a, out, run):
    dims = _ints(a[0])
    if any(d < 0 for d in dims):
        raise ShapeError(f"fill_with_dims: negative dimension in {dims}")
    return np.full(dims, op["value"], dtype=dtypes.np_dtype(out.type))


defop(
    "fill_with_dims",
    _from_attr,
    _fill_compute,
    attrs=[A("value", "float", 0.0, show=True), _OUT],
    nargs=1,
    doc="A tensor of the runtime dims (input 0) filled with value, as ONNX ConstantOfShape.",
    gpu=GpuCode.host(_FOLDED),
)


def _slice_compute(op, a, out, run):
    x = np.asarray(a[0])
    idx = [slice(None)] * x.ndim
    for ax, st, en, sp in zip(op["axes"], _ints(a[1]), _ints(a[2]), op["steps"]):
        r = onnx_slice_range(x.shape[ax], st, en, sp)
        idx[ax] = slice(r.start, r.stop if r.stop >= 0 else None, r.step)
    return x[tuple(idx)]


defop(
    "slice_with_bounds",
    _from_attr,
    _slice_compute,
    attrs=[A("axes", "ints", (), show=True), A("steps", "ints", (), show=True), _OUT],
    nargs=3,
    doc="ONNX Slice with runtime starts and ends (inputs 1, 2) on `axes` with `steps`; "
    "output_shape is the range it can take.",
    gpu=GpuCode.host(_FOLDED),
)


def _bfd_shape(op, s, mods):
    x = s[0]
    if any(t.ndim < 2 for t in s):
        raise ShapeError(f"broadcast_for_dot: inputs need rank >= 2, got {', '.join(map(str, s))}")
    batch = common_dyn_dims([Shape.dynamic(t.type, _dd(t)[:-2]) if t.ndim > 2 else Shape.of(t.type, []) for t in s])
    dims = (*batch, *_dd(x)[-2:])
    if all(d.is_fixed for d in dims):
        return Shape.of(x.type, [d.min for d in dims])
    return Shape.dynamic(x.type, dims)


def _dd(s: Shape) -> tuple[DynDim, ...]:
    return s.dyn_dims if s.dyn_dims is not None else tuple(DynDim(n, n) for n in s.lens)


def _bfd_compute(op, a, out, run):
    x = np.asarray(a[0])
    batch = np.broadcast_shapes(*(np.shape(v)[:-2] for v in a))
    return np.broadcast_to(x, (*batch, *x.shape[-2:]))


defop(
    "broadcast_for_dot",
    _bfd_shape,
    _bfd_compute,
    nargs=(2, -1),
    doc="Broadcast x's batch dims (all but the last two) to the common batch dims of all inputs "
    "(MIGraphX's op for matmul with dynamic batch dims); simplify_dyn_ops makes it static.",
    gpu=GpuCode.host(_FOLDED),
)


DYNAMIC_VALUE_OPS = frozenset(
    {"reshape_with_dims", "broadcast_with_dims", "fill_with_dims", "slice_with_bounds", "broadcast_for_dot"}
)


# --- static forms (simplify_dyn_ops; split_single_dyn_dim applies them per size) ----------------
def static_form(op: Op, inputs: Sequence, values: Sequence[np.ndarray | None]) -> tuple[Op, list] | None:
    """The static op (and inputs) equivalent to a dynamic one whose value inputs are known
    (`values[k]` is input k's value or None) and whose data input is static; None if not."""
    x = inputs[0]
    shapes = [i.shape for i in inputs]
    if op.name == "broadcast_for_dot":
        if any(s.dyn_dims is not None for s in shapes):
            return None
        return Op("multibroadcast", out_lens=_bfd_shape(op, shapes, []).lens), [x]
    if op.name in ("reshape_with_dims", "broadcast_with_dims", "slice_with_bounds"):
        if shapes[0].dyn_dims is not None or any(v is None for v in values[1:]):
            return None
        lens = shapes[0].lens
        if op.name == "reshape_with_dims":
            return Op("reshape", dims=reshape_lens(lens, _ints(values[1]))), [x]
        if op.name == "broadcast_with_dims":
            return Op("multibroadcast", out_lens=expand_lens(lens, _ints(values[1]))), [x]
        starts, ends, steps = _ints(values[1]), _ints(values[2]), op["steps"]
        if all(s == 1 for s in steps):
            ranges = [onnx_slice_range(lens[a], st, en, 1) for a, st, en in zip(op["axes"], starts, ends)]
            return Op("slice", axes=op["axes"], starts=[r.start for r in ranges], ends=[r.stop for r in ranges]), [x]
        exact = Shape.of(shapes[0].type, slice_lens(lens, op["axes"], starts, ends, steps))
        return op.with_(output_shape=exact), list(inputs)
    return None
