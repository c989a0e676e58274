"""Indexing and data-movement ops: Gather*, Scatter*, Pad, Resize/Upsample, OneHot, Trilu, NonZero,
QuantizeLinear/DequantizeLinear. GatherElements decomposes as in MIGraphX's parse_gather_elements:
flat indices computed with pointwise ops, then one gather on the flattened data."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..ops.common import norm_axis
from ..shape import standard_strides
from .registry import register
from .tensors import ir_type

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _axis(ctx, value, ndim, attr="axis"):
    try:
        return norm_axis(int(value), ndim, ctx.op_type)
    except ShapeError as e:
        raise ctx.bad_attr(attr, str(e)) from None


@register("Gather")
def parse_gather(ctx: NodeContext, args: Args) -> Result:
    data, ind = args
    return ctx.add("gather", [data, ind], axis=_axis(ctx, ctx.attr("axis", 0), data.shape.ndim))


@register("GatherElements")
def parse_gather_elements(ctx: NodeContext, args: Args) -> Result:
    data, ind = args
    r = data.shape.ndim
    axis = _axis(ctx, ctx.attr("axis", 0), r)
    if ind.shape.ndim != r:
        raise ctx.error(f"indices {list(ind.shape.lens)} must have the rank of data {list(data.shape.lens)}")
    ilens = ind.shape.lens
    strides = standard_strides(data.shape.lens)
    # flat = sum_{d != axis} pos_d * stride_d  +  wrap(indices) * stride_axis
    grid = np.indices(ilens, dtype=np.int64) if ilens else np.zeros((0,), np.int64)
    base = sum((grid[d] * strides[d] for d in range(r) if d != axis), np.zeros(ilens, np.int64))
    idx = ctx.convert(ind, "int64")
    n = data.shape.lens[axis]
    wrapped = ctx.add(
        "where", [ctx.add("less", [idx, ctx.scalar_like(0, idx)]), ctx.add("add", [idx, ctx.scalar_like(n, idx)]), idx]
    )
    flat = ctx.add("add", [ctx.literal(base), ctx.add("mul", [wrapped, ctx.scalar_like(strides[axis], idx)])])
    if ctx.const(ind) is None:
        # A fed index outside [-n, n-1] on the axis would land on a valid flat position (a wrong
        # answer); send it one past the end of the flat data instead, which the gather refuses.
        bad = ctx.add(
            "logical_or",
            [
                ctx.add("less", [wrapped, ctx.scalar_like(0, idx)]),
                ctx.add("greater", [wrapped, ctx.scalar_like(n - 1, idx)]),
            ],
        )
        total = int(np.prod(data.shape.lens, dtype=np.int64))
        flat = ctx.add("where", [bad, ctx.scalar_like(total, idx), flat])
    flat_data = ctx.add("reshape", [ctx.contiguous(data)], dims=[-1])
    return ctx.add("gather", [flat_data, flat], axis=0)


@register("GatherND")
def parse_gathernd(ctx: NodeContext, args: Args) -> Result:
    return ctx.add("gathernd", args, batch_dims=ctx.attr("batch_dims", 0))


def _reduction(ctx):
    return ctx.attr_choice("reduction", ("none", "add", "mul", "min", "max"), "none")


@register("ScatterElements", "Scatter")
def parse_scatter_elements(ctx: NodeContext, args: Args) -> Result:
    data = args[0]
    return ctx.add(f"scatter_{_reduction(ctx)}", args, axis=_axis(ctx, ctx.attr("axis", 0), data.shape.ndim))


@register("ScatterND")
def parse_scatternd(ctx: NodeContext, args: Args) -> Result:
    return ctx.add(f"scatternd_{_reduction(ctx)}", args)


@register("Pad")
def parse_pad(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    nd = x.shape.ndim
    mode = ctx.attr_choice("mode", ("constant", "reflect", "edge", "wrap"), "constant")
    if ctx.opset < 11:
        pads, value = [int(p) for p in ctx.attr("pads")], float(ctx.attr("value", 0.0))
    else:
        pads = ctx.const_ints(args[1], "pads")
        v = ctx.need_const(args[2], "constant_value") if len(args) > 2 and args[2] is not None else None
        value = float(v.reshape(-1)[0]) if v is not None and v.size else 0.0
        if len(args) > 3 and args[3] is not None:  # opset 18: pads only for the listed axes
            axes = [_axis(ctx, a, nd, "axes") for a in ctx.const_ints(args[3], "axes")]
            full = [0] * (2 * nd)
            for k, a in enumerate(axes):
                full[a], full[a + nd] = pads[k], pads[k + len(axes)]
            pads = full
    if len(pads) != 2 * nd:
        raise ctx.error(f"pads {pads} needs {2 * nd} values (begins then ends) for input {list(x.shape.lens)}")
    lens = x.shape.lens
    short = [a for a in range(nd) if lens[a] + pads[a] + pads[a + nd] < 0]
    if short:
        a = short[0]
        raise ctx.error(
            f"pads {pads} crop {-(pads[a] + pads[a + nd])} from axis {a}, which has only {lens[a]} "
            f"elements (input {list(lens)})"
        )
    # A reflection wider than the axis would repeat itself (numpy, onnx.reference and MIGraphX do);
    # ONNX Runtime refuses it, and so does the importer (the pad op itself keeps the wider form).
    wide = [(a, p) for a in range(nd) for p in (pads[a], pads[a + nd]) if mode == "reflect" and p > lens[a] - 1]
    if wide:
        a, p = wide[0]
        raise ctx.error(
            f"reflect pad of {p} on axis {a} of {list(lens)} is wider than the axis allows ({max(lens[a] - 1, 0)}); "
            "ONNX Runtime refuses it"
        )
    # Negative pads crop (a slice); the rest is a pad op.
    y = x
    if any(p < 0 for p in pads):
        axes = [a for a in range(nd) if pads[a] < 0 or pads[a + nd] < 0]
        starts = [max(-pads[a], 0) for a in axes]
        ends = [x.shape.lens[a] - max(-pads[a + nd], 0) for a in axes]
        y = ctx.add("slice", [y], axes=axes, starts=starts, ends=ends)
        pads = [max(p, 0) for p in pads]
    return ctx.add("pad", [y], pads=pads, value=value, mode=mode) if any(pads) else y


def _resize_sizes(ctx, x, scales, sizes, axes):
    """Full-rank (sizes, scales) from ONNX's scales-or-sizes inputs, axes and aspect policy."""
    nd = x.shape.ndim
    lens = list(x.shape.lens)
    axes = list(range(nd)) if axes is None else [_axis(ctx, a, nd, "axes") for a in axes]
    if sizes is not None and len(sizes):
        if len(sizes) != len(axes):
            raise ctx.error(f"sizes {list(sizes)} needs one value per axis in {axes}")
        out = list(lens)
        for a, s in zip(axes, sizes):
            out[a] = int(s)
        full_scales = [o / n if n else 1.0 for o, n in zip(out, lens)]
        policy = ctx.attr_choice("keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"), "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(full_scales[a] for a in axes)
            full_scales = [s if a in axes else 1.0 for a in range(nd)]
            out = [int(s * lens[a] + 0.5) if a in axes else lens[a] for a in range(nd)]
        return out, full_scales
    if scales is None or not len(scales):
        raise ctx.error("needs scales or sizes")
    if len(scales) != len(axes):
        raise ctx.error(f"scales {list(scales)} needs one value per axis in {axes}")
    full_scales = [1.0] * nd
    for a, s in zip(axes, scales):
        full_scales[a] = float(s)
    return [int(math.floor(n * s)) for n, s in zip(lens, full_scales)], full_scales


@register("Resize")
def parse_resize(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    nd = x.shape.ndim
    mode = ctx.attr_choice("mode", ("nearest", "linear", "cubic"), "nearest")
    if ctx.opset < 11:
        scales, sizes, roi = ctx.need_const(args[1], "scales").reshape(-1), None, None
        ctm, nearest = "asymmetric", "floor"
    else:
        ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
        crop = ctm == "tf_crop_and_resize" and len(args) > 1 and args[1] is not None
        roi = ctx.need_const(args[1], "roi") if crop else None
        scales = ctx.need_const(args[2], "scales").reshape(-1) if len(args) > 2 and args[2] is not None else None
        sizes = ctx.const_ints(args[3], "sizes") if len(args) > 3 and args[3] is not None else None
        nearest = ctx.attr("nearest_mode", "round_prefer_floor")
    axes = ctx.attr("axes", None)
    out, full_scales = _resize_sizes(ctx, x, scales, sizes, axes)
    roi_full = []
    if ctm == "tf_crop_and_resize":
        if roi is None or not roi.size:
            raise ctx.error("tf_crop_and_resize needs a constant roi input")
        roi = [float(v) for v in roi.reshape(-1)]
        if axes is not None:
            ax = [_axis(ctx, a, nd, "axes") for a in axes]
            roi_full = [0.0] * nd + [1.0] * nd
            for k, a in enumerate(ax):
                roi_full[a], roi_full[a + nd] = roi[k], roi[k + len(ax)]
        else:
            roi_full = roi
    return ctx.add(
        "resize",
        [x],
        sizes=out,
        scales=full_scales,
        mode=mode,
        coordinate_transformation_mode=ctm,
        nearest_mode=nearest,
        cubic_coeff_a=ctx.attr("cubic_coeff_a", -0.75),
        exclude_outside=bool(ctx.attr("exclude_outside", 0)),
        extrapolation_value=ctx.attr("extrapolation_value", 0.0),
        antialias=bool(ctx.attr("antialias", 0)),
        roi=roi_full,
    )


@register("Upsample")
def parse_upsample(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    scales = ctx.attr("scales") if ctx.opset < 9 else ctx.need_const(args[1], "scales").reshape(-1)
    mode = ctx.attr_choice("mode", ("nearest", "linear", "bilinear"), "nearest")
    small = [float(v) for v in scales if not float(v) >= 1.0]  # NaN too
    if small:  # Upsample only enlarges (Resize downsamples); ORT refuses a scale below 1
        raise ctx.error(f"scales {[float(v) for v in scales]} must all be >= 1 (got {small[0]})")
    out, full_scales = _resize_sizes(ctx, x, scales, None, None)
    return ctx.add(
        "resize",
        [x],
        sizes=out,
        scales=full_scales,
        mode="nearest" if mode == "nearest" else "linear",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )


@register("OneHot")
def parse_onehot(ctx: NodeContext, args: Args) -> Result:
    ind, depth, values = args
    d = ctx.need_const(depth, "depth").reshape(-1)[0]
    axis = ctx.attr("axis", -1)
    return ctx.add("onehot", [ind, values], depth=int(d), axis=axis)


@register("Trilu")
def parse_trilu(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    k = ctx.const_one_int(args[1], "k") if len(args) > 1 and args[1] is not None else 0
    if x.shape.ndim < 2:
        raise ctx.error(f"input {list(x.shape.lens)} needs rank >= 2")
    m, n = x.shape.lens[-2:]
    diff = np.arange(n)[None, :] - np.arange(m)[:, None]
    keep = diff >= k if ctx.attr("upper", 1) else diff <= k
    mask = ctx.broadcast_to(ctx.literal(keep), x)
    return ctx.add("where", [mask, x, ctx.scalar_like(0, x)])


@register("NonZero")
def parse_nonzero(ctx: NodeContext, args: Args) -> Result:
    v = ctx.need_exact(args[0], "X")
    if v is None:  # MIGraphX's answer to the data-dependent shape: [rank, elements], zero-padded
        if args[0].shape.ndim == 0:
            raise ctx.error("NonZero of a non-constant scalar is not supported")
        return ctx.add("get_tuple_elem", [ctx.add("nonzero", [args[0]])], index=0)
    return ctx.literal(np.asarray(np.nonzero(v), dtype=np.int64).reshape(v.ndim, -1))


def _quant_param(ctx, p, x, axis_attr: int, block: int):
    """Scale / zero point broadcast to x's lens: per tensor, per axis, or per block of `block`."""
    lens = x.shape.lens
    like = x if x.shape.dynamic_shape else lens  # a dynamic x: broadcast that follows it at run time
    if p.shape.elements() == 1 and not block:
        if p.shape.ndim > len(lens):
            p = ctx.add("reshape", [p], dims=[1] * len(lens))
        return ctx.broadcast_to(p, like)
    axis = _axis(ctx, axis_attr, len(lens))
    if x.shape.dynamic_shape and not block and p.shape.ndim == 1 and x.shape.dyn_dims[axis].is_fixed:
        if p.shape.lens[0] != lens[axis]:
            raise ctx.error(f"scale/zero point {list(p.shape.lens)} must have {lens[axis]} values for axis {axis}")
        per_axis = [1] * len(lens)
        per_axis[axis] = lens[axis]
        return ctx.broadcast_to(ctx.add("reshape", [p], dims=per_axis), x)
    if block:
        if p.shape.ndim != len(lens):
            raise ctx.error(f"blocked scale {list(p.shape.lens)} must have the rank of the input {list(lens)}")
        n = lens[axis]
        nb = p.shape.lens[axis]
        u = ctx.add("unsqueeze", [p], axes=[axis + 1])
        wide = list(p.shape.lens)
        wide.insert(axis + 1, block)
        full = list(lens)
        full[axis] = nb * block
        r = ctx.add("reshape", [ctx.contiguous(ctx.broadcast_to(u, wide))], dims=full)
        return r if nb * block == n else ctx.add("slice", [r], axes=[axis], starts=[0], ends=[n])
    if p.shape.ndim != 1 or p.shape.lens[0] != lens[axis]:
        raise ctx.error(f"scale/zero point {list(p.shape.lens)} must have {lens[axis]} values for axis {axis}")
    return ctx.add("broadcast", [p], axis=axis, out_lens=lens)


def _quant_args(ctx, args):
    x = args[0]
    axis = ctx.attr("axis", 1)
    block = ctx.attr("block_size", 0)
    out = [x, _quant_param(ctx, args[1], x, axis, block)]
    if len(args) > 2 and args[2] is not None:
        out.append(_quant_param(ctx, args[2], x, axis, block))
    return out


@register("QuantizeLinear")
def parse_quantizelinear(ctx: NodeContext, args: Args) -> Result:
    code = ctx.attr("output_dtype", 0)
    kw = {}
    if code:
        kw["out_type"] = ir_type(code, f"node {ctx.name} attribute 'output_dtype'")
    qargs = _quant_args(ctx, args)
    if qargs[0].shape.type != qargs[1].shape.type and dtypes.dtype(qargs[0].shape.type).is_float:
        qargs[0] = ctx.convert(qargs[0], qargs[1].shape.type)
    return ctx.add("quantizelinear", qargs, **kw)


@register("DequantizeLinear")
def parse_dequantizelinear(ctx: NodeContext, args: Args) -> Result:
    return ctx.add("dequantizelinear", _quant_args(ctx, args))
