"""Shape and view ops. Shape-like inputs (Reshape's shape, Slice's starts, Expand's shape, ...) are
evaluated at import time (`ctx.need_const`), so exporter chains such as Shape -> Gather ->
Unsqueeze -> Concat -> Reshape import to static shapes. Shape, Size, Range and ConstantOfShape
of static values become literals, as in MIGraphX's parsers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..ops.common import norm_axes, norm_axis
from ..ops.dynamic_values import dyn_range_shape, expand_lens, onnx_slice_range, reshape_lens, slice_lens
from .context import common_lens
from .registry import register
from .tensors import ir_type

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _axis(ctx, value, ndim, *, allow_end=False, attr="axis"):
    try:
        return norm_axis(int(value), ndim, ctx.op_type, allow_end=allow_end)
    except ShapeError as e:
        raise ctx.bad_attr(attr, str(e)) from None


def _axes(ctx, values, ndim, attr="axes"):
    try:
        return norm_axes([int(v) for v in values], ndim, ctx.op_type)
    except ShapeError as e:
        raise ctx.bad_attr(attr, str(e)) from None


def _axes_arg(ctx, args, index: int, since: int) -> list[int] | None:
    """Axes given as an attribute before opset `since` and as an optional input from it on."""
    if ctx.opset >= since:
        return ctx.const_ints(args[index], "axes") if len(args) > index and args[index] is not None else None
    v = ctx.attr("axes", None)
    return None if v is None else list(v)


@register("Reshape")
def parse_reshape(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    if ctx.opset < 5:
        dims = list(ctx.attr("shape"))
    else:
        dims, ends = shape_value(ctx, args[1], "shape")
        if ends is not None and not ctx.attr("allowzero", 0):
            lo, hi = (reshape_lens(lens_at(x.shape, e), v) for e, v in zip(("min", "max"), ends))
            out = dyn_range_shape(x.shape.type, lo, hi)
            return ctx.add("reshape_with_dims", [ctx.contiguous(x), args[1]], output_shape=out)
        if ends is not None:
            ctx.need_const(args[1], "shape")  # allowzero with a runtime shape: refused, naming the inputs
    if ctx.attr("allowzero", 0) and 0 in dims:
        # A literal 0 dim: the result holds no elements, so it is an (empty) literal.
        if -1 in dims or x.shape.elements() != 0:
            raise ctx.error(f"allowzero shape {dims} is incompatible with input {list(x.shape.lens)}")
        return ctx.literal(np.zeros(dims, dtype=x.shape.dtype.np_dtype))
    return ctx.add("reshape", [ctx.contiguous(x)], dims=dims)


@register("Transpose")
def parse_transpose(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    perm = ctx.attr("perm", None)
    perm = list(range(x.shape.ndim))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(x.shape.ndim)):
        raise ctx.bad_attr("perm", f"{perm} is not a permutation of rank {x.shape.ndim}")
    return ctx.add("transpose", [x], permutation=perm)


@register("Flatten")
def parse_flatten(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    axis = ctx.attr("axis", 1)
    # ONNX counts a negative axis from rank (r + axis), the IR's allow_end rule from rank + 1.
    axis = axis + x.shape.ndim if axis < 0 else axis
    return ctx.add("flatten", [x], axis=_axis(ctx, axis, x.shape.ndim, allow_end=True))


@register("Squeeze")
def parse_squeeze(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    axes = _axes_arg(ctx, args, 1, 13)
    axes = _axes(ctx, axes, x.shape.ndim) if axes else ()
    return ctx.add("squeeze", [x], axes=axes)


@register("Unsqueeze")
def parse_unsqueeze(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    axes = _axes_arg(ctx, args, 1, 13) or []
    return ctx.add("unsqueeze", [x], axes=sorted(_axes(ctx, axes, x.shape.ndim + len(axes))))


@register("Concat")
def parse_concat(ctx: NodeContext, args: Args) -> Result:
    return ctx.add("concat", args, axis=_axis(ctx, ctx.attr("axis"), args[0].shape.ndim))


def slice_axis(ctx, x, axis: int, start: int, end: int, step: int = 1):
    """x[start:end:step] on one axis, with ONNX/Python clamping, as slice + reverse + step views."""
    n = x.shape.lens[axis]
    if step == 0:
        raise ctx.error("slice step must not be 0")
    # unlike Python's slice, a negative step's start below the range clamps to 0 (one element)
    r = onnx_slice_range(n, start, end, step)
    if len(r) == 0:
        return ctx.add("slice", [x], axes=[axis], starts=[0], ends=[0])
    lo, hi = (r[0], r[-1]) if step > 0 else (r[-1], r[0])
    y = x if (lo, hi) == (0, n - 1) else ctx.add("slice", [x], axes=[axis], starts=[lo], ends=[hi + 1])
    if step < 0:
        y = ctx.add("reverse", [y], axes=[axis])
    if abs(step) > 1:
        y = ctx.add("step", [y], axes=[axis], steps=[abs(step)])
    return y


@register("Slice")
def parse_slice(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    nd = x.shape.ndim
    if ctx.opset < 10:
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes = ctx.attr("axes", None)
        steps = None
    else:
        (starts, start_ends), (ends, end_ends) = shape_value(ctx, args[1], "starts"), shape_value(ctx, args[2], "ends")
        axes = ctx.const_ints(args[3], "axes") if len(args) > 3 and args[3] is not None else None
        steps = ctx.const_ints(args[4], "steps") if len(args) > 4 and args[4] is not None else None
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error("starts, ends, axes and steps must have the same length")
    axes = _axes(ctx, axes, nd)
    loose = x.shape.dynamic_shape and any(not x.shape.dyn_dims[a].is_fixed for a in axes)
    if ctx.opset >= 10 and (start_ends is not None or end_ends is not None or loose):
        return _runtime_slice(ctx, x, args, axes, steps, (starts, start_ends), (ends, end_ends))
    # One plain `slice` when every step is 1 (the common exporter case, and MIGraphX's form).
    if all(s == 1 for s in steps):
        b = [range(*slice(st, en).indices(x.shape.lens[a])) for a, st, en in zip(axes, starts, ends)]
        return ctx.add("slice", [x], axes=axes, starts=[r.start for r in b], ends=[max(r.stop, r.start) for r in b])
    y = x
    for a, st, en, sp in zip(axes, starts, ends, steps):
        y = slice_axis(ctx, y, a, st, en, sp)
    return y


def _runtime_slice(ctx, x, args, axes, steps, starts, ends):
    """Slice whose bounds (or sliced axes) follow the dynamic dims: slice_with_bounds, its output
    range found at both ends of the range."""

    def at(value, e):
        return value[0] if value[1] is None else value[1][0 if e == "min" else 1]

    lo, hi = (slice_lens(lens_at(x.shape, e), axes, at(starts, e), at(ends, e), steps) for e in ("min", "max"))
    bounds = [
        a if v[1] is not None else ctx.literal(np.asarray(v[0], np.int64)) for a, v in zip(args[1:3], (starts, ends))
    ]
    out = dyn_range_shape(x.shape.type, lo, hi)
    return ctx.add("slice_with_bounds", [x, *bounds], axes=list(axes), steps=list(steps), output_shape=out)


@register("Split")
def parse_split(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    axis = _axis(ctx, ctx.attr("axis", 0), x.shape.ndim)
    n = x.shape.lens[axis]
    if ctx.opset >= 13:
        sizes = ctx.const_ints(args[1], "split") if len(args) > 1 and args[1] is not None else None
    else:
        sizes = ctx.attr("split", None)
    if not sizes:
        count = ctx.attr("num_outputs", None) if ctx.opset >= 18 else None
        count = len(ctx.node.output) if count is None else count
        if count <= 0:
            raise ctx.bad_attr("num_outputs", f"must be positive, got {count}")
        chunk = -(-n // count) if ctx.opset >= 18 else n // count
        if ctx.opset < 18 and n % count:
            raise ctx.error(f"axis {axis} of size {n} does not split evenly into {count} outputs")
        sizes = [chunk] * (count - 1) + [n - chunk * (count - 1)]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise ctx.error(f"split sizes {list(sizes)} do not add up to {n} (axis {axis} of {list(x.shape.lens)})")
    outs, start = [], 0
    for s in sizes:
        outs.append(ctx.add("slice", [x], axes=[axis], starts=[start], ends=[start + s]))
        start += s
    return outs


@register("Expand")
def parse_expand(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    shape, ends = shape_value(ctx, args[1], "shape")
    if ends is not None or x.shape.dynamic_shape:
        lo, hi = (expand_lens(lens_at(x.shape, e), v) for e, v in zip(("min", "max"), ends or (shape, shape)))
        out = dyn_range_shape(x.shape.type, lo, hi)
        dims = args[1] if ends is not None else ctx.literal(np.asarray(shape, np.int64))
        return ctx.add("broadcast_with_dims", [x, dims], output_shape=out)
    lens = common_lens([x.shape.lens, shape])
    if lens is None:
        raise ctx.error(f"cannot expand {list(x.shape.lens)} to {shape}")
    return ctx.broadcast_to(x, lens)


@register("Tile")
def parse_tile(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    reps = ctx.const_ints(args[1], "repeats")
    lens = x.shape.lens
    if len(reps) != len(lens) or any(r < 0 for r in reps):
        raise ctx.error(f"repeats {reps} must hold one non-negative value per axis of {list(lens)}")
    if all(r == 1 for r in reps):
        return x
    if 0 in reps:  # an empty result; a reshape's 0 would copy the input's dim instead
        return ctx.literal(np.zeros([r * n for r, n in zip(reps, lens)], dtypes.np_dtype(x.shape.type)))
    # [a, b] tiled [r, s]: unsqueeze to [1, a, 1, b], broadcast to [r, a, s, b], merge pairs.
    u = ctx.add("unsqueeze", [x], axes=[2 * i for i in range(len(lens))])
    b = ctx.broadcast_to(u, [v for pair in zip(reps, lens) for v in pair])
    return ctx.add("reshape", [ctx.contiguous(b)], dims=[r * n for r, n in zip(reps, lens)])


@register("Shape")
def parse_shape(ctx: NodeContext, args: Args) -> Result:
    """A literal, or for a dynamic input MIGraphX's dimensions_of (the dims are known at run time)."""
    lens = list(args[0].shape.lens)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    if args[0].shape.dynamic_shape:
        return ctx.add("dimensions_of", [args[0]], start=start, end=end)
    return ctx.literal(np.asarray(lens[slice(start, end)], dtype=np.int64))


@register("Size")
def parse_size(ctx: NodeContext, args: Args) -> Result:
    return ctx.literal(np.asarray(args[0].shape.elements(), dtype=np.int64))


@register("Range")
def parse_range(ctx: NodeContext, args: Args) -> Result:
    if all(a is not None for a in args) and any(ctx.const(a) is None for a in args):
        lens = sorted(len(_probe_range(ctx, args, end)) for end in ("min", "max"))
        return ctx.add("range", list(args), lens=lens)
    start, limit, delta = (ctx.need_const(a, n).reshape(()) for a, n in zip(args, ("start", "limit", "delta")))
    if delta == 0:
        raise ctx.error("delta must not be 0")
    count = (
        max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
        if np.isfinite([start, limit, delta]).all()
        else -1
    )
    if count < 0:
        raise ctx.error(f"start {start}, limit {limit} and delta {delta} must be finite")
    ctx.check_size([count], start.dtype.itemsize)
    return ctx.literal(np.arange(start, limit, delta).astype(start.dtype))


@register("ConstantOfShape")
def parse_constant_of_shape(ctx: NodeContext, args: Args) -> Result:
    dims, ends = shape_value(ctx, args[0], "input")
    value = ctx.attr("value", np.zeros(1, np.float32))
    if ends is not None:
        out = dyn_range_shape(dtypes.dtype(value.dtype).name, *ends)
        return ctx.add("fill_with_dims", [args[0]], value=float(value.reshape(-1)[0]), output_shape=out)
    if any(d < 0 for d in dims):
        raise ctx.error(f"negative dimension in shape {dims}")
    ctx.check_size(dims, value.dtype.itemsize)
    return ctx.literal(np.full(dims, value.reshape(-1)[0], dtype=value.dtype))


@register("DepthToSpace")
def parse_depth_to_space(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    b = ctx.attr("blocksize")
    n, c, h, w = _nchw(ctx, x)
    if c % (b * b):
        raise ctx.bad_attr("blocksize", f"channels {c} are not divisible by blocksize^2 = {b * b}")
    if ctx.attr_choice("mode", ("DCR", "CRD"), "DCR") == "DCR":
        dims, perm = [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2]
    else:
        dims, perm = [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3]
    t = ctx.add("transpose", [ctx.add("reshape", [ctx.contiguous(x)], dims=dims)], permutation=perm)
    return ctx.add("reshape", [ctx.contiguous(t)], dims=[n, c // (b * b), h * b, w * b])


@register("SpaceToDepth")
def parse_space_to_depth(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    b = ctx.attr("blocksize")
    n, c, h, w = _nchw(ctx, x)
    if h % b or w % b:
        raise ctx.bad_attr("blocksize", f"spatial dims {h}x{w} are not divisible by {b}")
    r = ctx.add("reshape", [ctx.contiguous(x)], dims=[n, c, h // b, b, w // b, b])
    crd = ctx.attr_choice("mode", ("DCR", "CRD"), "DCR") == "CRD"
    t = ctx.add("transpose", [r], permutation=[0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4])
    return ctx.add("reshape", [ctx.contiguous(t)], dims=[n, c * b * b, h // b, w // b])


def _nchw(ctx, x):
    if x.shape.ndim != 4:
        raise ctx.error(f"needs a 4-D NCHW input, got {list(x.shape.lens)}")
    return x.shape.lens


@register("CenterCropPad")
def parse_center_crop_pad(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    target = ctx.const_ints(args[1], "shape")
    nd = x.shape.ndim
    axes = _axes(ctx, ctx.attr("axes", list(range(nd))), nd)
    if len(axes) != len(target):
        raise ctx.error(f"shape {target} needs one value per axis in {list(axes)}")
    pads = [0] * (2 * nd)
    y = x
    for a, t in zip(axes, target):
        n = x.shape.lens[a]
        if t < n:  # crop, centred; an odd remainder comes off the end
            y = ctx.add("slice", [y], axes=[a], starts=[(n - t) // 2], ends=[(n - t) // 2 + t])
        elif t > n:
            pads[a], pads[a + nd] = (t - n) // 2, t - n - (t - n) // 2
    return ctx.add("pad", [y], pads=pads) if any(pads) else y


@register("EyeLike")
def parse_eye_like(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    if x.shape.ndim != 2:
        raise ctx.error(f"needs a 2-D input, got {list(x.shape.lens)}")
    code = ctx.attr("dtype", None)
    t = ir_type(code, f"node {ctx.name} attribute 'dtype'") if code is not None else x.shape.type
    m, n = x.shape.lens
    ctx.check_size([m, n], 8)
    return ctx.literal(np.eye(m, n, k=ctx.attr("k", 0)), t)


def _probe_range(ctx, args, end: str) -> np.ndarray:
    """Range's value with every dynamic dim at its `end` ("min" or "max"): its inputs may depend
    on the graph inputs only through their shapes (dimensions_of), else the length is not knowable."""
    try:
        start, limit, delta = (probe_value(a, end).reshape(()) for a in args)
    except ValueError:
        ctx.need_const(next(a for a in args if ctx.const(a) is None), "limit")  # raises, naming the inputs
        raise
    if delta == 0:
        raise ctx.error("delta must not be 0")
    return np.arange(start, limit, delta)


def probe_value(ins, end: str) -> np.ndarray:
    """Evaluate a shape computation with each dynamic dim at its min or max; ValueError when it
    reads a graph input's data rather than its shape."""
    from ..ref import run_instruction

    memo: dict[int, np.ndarray] = {}

    def value(i):
        if i.id in memo:
            return memo[i.id]
        if i.is_literal():
            v = i.literal.data
        elif i.name == "dimensions_of":
            x = i.inputs[0].shape
            lens = lens_at(x, end)
            v = np.asarray(lens[slice(i.op["start"], i.op["end"])], dtype=np.int64)
        elif i.is_builtin() or i.op.spec.compute is None:
            raise ValueError(f"{i.name} is not a shape computation")
        else:
            v = np.asarray(run_instruction(i, [value(a) for a in i.inputs], False))
        memo[i.id] = v
        return v

    return value(ins)


def lens_at(s, end: str) -> list[int]:
    """A shape's lens with every dynamic dim at its "min", "mid" or "max"."""
    if s.dyn_dims is None:
        return list(s.lens)
    pick = {"min": lambda d: d.min, "max": lambda d: d.max, "mid": lambda d: (d.min + d.max) // 2}[end]
    return [pick(d) for d in s.dyn_dims]


def shape_value(ctx, ins, what: str) -> tuple[list[int], tuple[list[int], list[int]] | None]:
    """A shape-like input's value: (ints, None) when it is constant over the dynamic range, or
    (value at the range's max, (value at min, value at max)) when it follows the dynamic dims
    through the inputs' shapes (Shape -> Gather -> Concat chains); one that reads an input's data
    is refused (ConstantInputRequired, naming the inputs)."""
    v = ctx.const(ins)
    if v is not None:
        return [int(x) for x in v.reshape(-1)], None
    if ins is None:
        ctx.need_const(ins, what)
    try:
        lo, mid, hi = ([int(x) for x in probe_value(ins, e).reshape(-1)] for e in ("min", "mid", "max"))
    except ValueError:
        ctx.need_const(ins, what)  # raises, naming the graph inputs it reads
        raise
    if lo == mid == hi:
        return hi, None  # follows only fixed dims (e.g. Shape(x)[1] of a dynamic batch)
    return hi, (lo, hi)
