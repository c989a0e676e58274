"""Shape and view ops: reshape, transpose, (multi)broadcast, squeeze/unsqueeze, flatten, slice,
step, contiguous, layout, concat. Views keep strides (no data movement on the GPU); in the
reference evaluator every value is a logical numpy array, so views are plain numpy reshapes."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..op import GpuCode, Op, defop
from ..shape import DynDim, Shape
from .common import A, norm_axes, norm_axis, normalizer, same_type


def _alias0(op, s):
    return 0


# --- reshape ------------------------------------------------------------------------------------
def reshape_dims(in_lens, dims) -> tuple[int, ...]:
    dims = list(dims)
    out = [in_lens[i] if d == 0 and i < len(in_lens) else d for i, d in enumerate(dims)]
    n = math.prod(in_lens)
    if out.count(-1) > 1:
        raise ShapeError(f"reshape: more than one -1 in dims {tuple(dims)}")
    if -1 in out:
        rest = math.prod(d for d in out if d != -1)
        if rest == 0 or n % rest:
            raise ShapeError(f"reshape: cannot infer -1 in {tuple(dims)} from {n} elements")
        out[out.index(-1)] = n // rest
    if math.prod(out) != n:
        raise ShapeError(f"reshape: {list(in_lens)} ({n} elements) cannot become {out}")
    return tuple(out)


defop(
    "reshape",
    lambda op, s, m: Shape.of(s[0].type, reshape_dims(s[0].lens, op["dims"])),
    lambda op, a, out, run: np.reshape(a[0], out.lens),
    attrs=[A("dims", "ints", (), show=True)],
    traits={"view", "require_std_shape"},
    nargs=1,
    output_alias=_alias0,
    doc="New dims (0 copies an input dim, -1 is inferred). Needs a standard input.",
)


# --- transpose ----------------------------------------------------------------------------------
def _transpose_shape(op, s, m):
    x = s[0]
    perm = op["permutation"]
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: permutation {perm} is not a permutation of rank {x.ndim}")
    return Shape.of(x.type, [x.lens[p] for p in perm], [x.strides[p] for p in perm])


defop(
    "transpose",
    _transpose_shape,
    lambda op, a, out, run: np.transpose(a[0], op["permutation"]),
    attrs=[A("permutation", "ints", (), show=True)],
    traits={"view"},
    nargs=1,
    output_alias=_alias0,
)


# --- broadcasts ---------------------------------------------------------------------------------
def _multibroadcast_shape(op, s, m):
    x = s[0]
    if len(s) > 1:
        return _multibroadcast_to(x, s[1:])
    out = tuple(op["out_lens"])
    if len(out) < x.ndim:
        raise ShapeError(f"multibroadcast: cannot broadcast {list(x.lens)} to lower rank {list(out)}")
    off = len(out) - x.ndim
    strides = [0] * len(out)
    for i, (n, st) in enumerate(zip(x.lens, x.strides)):
        o = out[off + i]
        if n == o:
            strides[off + i] = st if n != 1 else 0
        elif n == 1:
            strides[off + i] = 0
        else:
            raise ShapeError(f"multibroadcast: dimension {i} of {list(x.lens)} is incompatible with {list(out)}")
    return Shape.of(x.type, out, strides)


def _within(fixed: DynDim, rng: DynDim) -> bool:
    return fixed.is_fixed and fixed.min != 1 and rng.min <= fixed.min <= rng.max


def common_dyn_dims(shapes) -> tuple[DynDim, ...]:
    """Numpy broadcasting over (possibly dynamic) dims: a fixed 1 yields to the other side."""
    rank = max(s.ndim for s in shapes)
    out = [DynDim(1, 1)] * rank
    for s in shapes:
        dd = s.dyn_dims if s.dyn_dims is not None else tuple(DynDim(n, n) for n in s.lens)
        for k, d in enumerate(dd, rank - len(dd)):
            if d == out[k] or (d.is_fixed and d.min == 1):
                continue
            if out[k].is_fixed and out[k].min == 1:
                out[k] = d
            elif _within(d, out[k]) or _within(out[k], d):
                # A fixed n against a range that holds n (a probe at the range's end clamped, say a
                # Slice past a table): the runtime shapes must agree, so the dim is n there.
                out[k] = d if d.is_fixed else out[k]
            else:
                raise ShapeError(f"multibroadcast: {', '.join(map(str, shapes))} cannot be broadcast together")
    return tuple(out)


def _multibroadcast_to(x: Shape, likes: list[Shape]) -> Shape:
    """MIGraphX's multi-input form: x broadcast to the common (possibly dynamic) shape of all inputs."""
    if x.dyn_dims is None and all(s.dyn_dims is None for s in likes):
        lens = tuple(np.broadcast_shapes(x.lens, *(s.lens for s in likes)))
        return _multibroadcast_shape(Op("multibroadcast", out_lens=lens), [x], [])
    return Shape.dynamic(x.type, common_dyn_dims([x, *likes]))


def _multibroadcast_compute(op, a, out, run):
    return np.broadcast_to(a[0], np.broadcast_shapes(*(np.shape(v) for v in a)) if len(a) > 1 else out.lens)


defop(
    "multibroadcast",
    _multibroadcast_shape,
    _multibroadcast_compute,
    attrs=[A("out_lens", "ints", (), show=True)],
    traits={"view"},
    nargs=(1, -1),
    output_alias=_alias0,
    doc="Numpy-style broadcast to out_lens (broadcast axes get stride 0); with more inputs, to "
    "their common shape (dynamic shapes; simplify_dyn_ops makes it static).",
)


def _broadcast_shape(op, s, m):
    x = s[0]
    axis = op["axis"]
    out = tuple(op["out_lens"])
    if axis < 0 or axis + x.ndim > len(out):
        raise ShapeError(f"broadcast: {list(x.lens)} at axis {axis} does not fit in {list(out)}")
    strides = [0] * len(out)
    for i, (n, st) in enumerate(zip(x.lens, x.strides)):
        if out[axis + i] != n and n != 1:
            raise ShapeError(f"broadcast: dimension {i} of {list(x.lens)} != {out[axis + i]}")
        strides[axis + i] = st if n != 1 else 0
    return Shape.of(x.type, out, strides)


def _broadcast_compute(op, a, out, run):
    x = a[0]
    axis = op["axis"]
    shp = [1] * axis + list(x.shape) + [1] * (len(out.lens) - axis - x.ndim)
    return np.broadcast_to(x.reshape(shp), out.lens)


defop(
    "broadcast",
    _broadcast_shape,
    _broadcast_compute,
    attrs=[A("axis", "int", 0, show=True), A("out_lens", "ints", (), show=True)],
    traits={"view"},
    nargs=1,
    output_alias=_alias0,
    doc="Place the input's axes at `axis` of out_lens; other axes broadcast.",
)


# --- squeeze / unsqueeze / flatten --------------------------------------------------------------
def _squeeze_shape(op, s, m):
    x = s[0]
    axes = norm_axes(op["axes"], x.ndim, "squeeze") if op["axes"] else tuple(i for i, n in enumerate(x.lens) if n == 1)
    for a in axes:
        if x.lens[a] != 1:
            raise ShapeError(f"squeeze: axis {a} of {list(x.lens)} is not 1")
    keep = [i for i in range(x.ndim) if i not in axes]
    return Shape.of(x.type, [x.lens[i] for i in keep], [x.strides[i] for i in keep]) if keep else Shape.of(x.type, ())


defop(
    "squeeze",
    _squeeze_shape,
    lambda op, a, out, run: np.reshape(a[0], out.lens),
    attrs=[A("axes", "ints", ())],
    traits={"view"},
    nargs=1,
    output_alias=_alias0,
    normalize=normalizer(axes="axes"),
)


def _unsqueeze_shape(op, s, m):
    x = s[0]
    nd = x.ndim + len(op["axes"])
    axes = sorted(norm_axes(op["axes"], nd, "unsqueeze"))
    lens, strides = list(x.lens), list(x.strides)
    for a in axes:
        inner = strides[a] * lens[a] if a < len(lens) else 1
        lens.insert(a, 1)
        strides.insert(a, inner)
    return Shape.of(x.type, lens, strides)


defop(
    "unsqueeze",
    _unsqueeze_shape,
    lambda op, a, out, run: np.reshape(a[0], out.lens),
    attrs=[A("axes", "ints", (), show=True)],
    traits={"view"},
    nargs=1,
    output_alias=_alias0,
)


def _flatten_shape(op, s, m):
    x = s[0]
    axis = norm_axis(op["axis"], x.ndim, "flatten", allow_end=True)
    return Shape.of(x.type, [math.prod(x.lens[:axis]), math.prod(x.lens[axis:])])


defop(
    "flatten",
    _flatten_shape,
    lambda op, a, out, run: np.reshape(a[0], out.lens),
    attrs=[A("axis", "int", 1, show=True)],
    traits={"view", "require_std_shape"},
    nargs=1,
    output_alias=_alias0,
    normalize=normalizer(axis="axis_end"),
)


# --- slice / step -------------------------------------------------------------------------------
def slice_bounds(lens, axes, starts, ends) -> list[tuple[int, int, int]]:
    """(axis, start, end) clamped like ONNX/MIGraphX for positive steps."""
    out = []
    for ax, st, en in zip(axes, starts, ends):
        n = lens[ax]
        st = st + n if st < 0 else st
        en = en + n if en < 0 else en
        st = min(max(st, 0), n)
        en = min(max(en, 0), n)
        out.append((ax, st, max(en, st)))
    return out


def _slice_shape(op, s, m):
    x = s[0]
    axes = norm_axes(op["axes"], x.ndim, "slice")
    if not (len(axes) == len(op["starts"]) == len(op["ends"])):
        raise ShapeError("slice: axes, starts and ends must have the same length")
    lens = list(x.lens)
    for ax, st, en in slice_bounds(x.lens, axes, op["starts"], op["ends"]):
        lens[ax] = en - st
    return Shape.of(x.type, lens, x.strides)


def _slice_compute(op, a, out, run):
    x = a[0]
    axes = norm_axes(op["axes"], x.ndim, "slice")
    idx = [slice(None)] * x.ndim
    for ax, st, en in slice_bounds(x.shape, axes, op["starts"], op["ends"]):
        idx[ax] = slice(st, en)
    return x[tuple(idx)]


def _slice_normalize(op, inputs):
    x = inputs[0]
    axes = norm_axes(op["axes"], x.ndim, "slice")
    b = slice_bounds(x.lens, axes, op["starts"], op["ends"])
    return op.with_(axes=axes, starts=[t[1] for t in b], ends=[t[2] for t in b])


defop(
    "slice",
    _slice_shape,
    _slice_compute,
    attrs=[A("axes", "ints", (), show=True), A("starts", "ints", (), show=True), A("ends", "ints", (), show=True)],
    traits={"view"},
    nargs=1,
    output_alias=_alias0,
    normalize=_slice_normalize,
    doc="Sub-range [start, end) on each listed axis (negative values count from the end; clamped).",
)


def _step_shape(op, s, m):
    x = s[0]
    axes = norm_axes(op["axes"], x.ndim, "step")
    lens, strides = list(x.lens), list(x.strides)
    for ax, st in zip(axes, op["steps"]):
        if st <= 0:
            raise ShapeError(f"step: steps must be positive, got {st}")
        lens[ax] = (lens[ax] + st - 1) // st
        strides[ax] *= st
    return Shape.of(x.type, lens, strides)


def _step_compute(op, a, out, run):
    x = a[0]
    idx = [slice(None)] * x.ndim
    for ax, st in zip(norm_axes(op["axes"], x.ndim, "step"), op["steps"]):
        idx[ax] = slice(None, None, st)
    return x[tuple(idx)]


defop(
    "step",
    _step_shape,
    _step_compute,
    attrs=[A("axes", "ints", (), show=True), A("steps", "ints", (), show=True)],
    traits={"view"},
    nargs=1,
    output_alias=_alias0,
    doc="Every steps[i]-th element along axes[i].",
)


# --- copies -------------------------------------------------------------------------------------
defop(
    "contiguous",
    lambda op, s, m: Shape.of(s[0].type, s[0].lens),
    lambda op, a, out, run: np.ascontiguousarray(a[0]),
    nargs=1,
    doc="Copy into standard (row-major, packed) layout.",
    gpu=GpuCode.kernel("pointwise"),
)


def _layout_shape(op, s, m):
    perm = op["permutation"]
    if sorted(perm) != list(range(s[0].ndim)):
        raise ShapeError(f"layout: {perm} is not a permutation of rank {s[0].ndim}")
    return Shape.from_permutation(s[0].type, s[0].lens, perm)


defop(
    "layout",
    _layout_shape,
    lambda op, a, out, run: np.ascontiguousarray(a[0]),
    attrs=[A("permutation", "ints", (), show=True)],
    nargs=1,
    doc="Copy into the memory order `permutation` (e.g. {0, 2, 3, 1} = NHWC for NCHW lens).",
    gpu=GpuCode.kernel("pointwise"),
    made_by="layout_convolution",
)


def _concat_shape(op, s, m):
    t = same_type("concat", s)
    nd = s[0].ndim
    axis = norm_axis(op["axis"], nd, "concat")
    for x in s[1:]:
        if x.ndim != nd or any(a != b for i, (a, b) in enumerate(zip(x.lens, s[0].lens)) if i != axis):
            raise ShapeError(f"concat: {list(x.lens)} does not match {list(s[0].lens)} off axis {axis}")
    lens = list(s[0].lens)
    lens[axis] = sum(x.lens[axis] for x in s)
    return Shape.of(t, lens)


defop(
    "concat",
    _concat_shape,
    lambda op, a, out, run: np.concatenate(a, axis=norm_axis(op["axis"], a[0].ndim, "concat")),
    attrs=[A("axis", "int", 0, show=True)],
    nargs=(1, -1),
    normalize=normalizer(axis="axis"),
    gpu=GpuCode.kernel("concat"),
)
