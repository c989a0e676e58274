"""Reductions (Reduce*, with axes as an attribute or, from opset 13/18, as an input), ArgMax/ArgMin,
Softmax/LogSoftmax/Hardmax, TopK and CumSum. IR reductions keep the reduced axes (size 1), as in
MIGraphX; keepdims=0 adds a squeeze."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..ops.common import norm_axes, norm_axis
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _axes(ctx, args, ndim: int) -> tuple[int, ...] | None:
    """Normalized reduction axes; None means 'no reduction' (noop_with_empty_axes)."""
    input_from = 13 if ctx.op_type == "ReduceSum" else 18
    if ctx.opset >= input_from:
        axes = ctx.const_ints(args[1], "axes") if len(args) > 1 and args[1] is not None else []
    else:
        axes = list(ctx.attr("axes", []))
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return None
        axes = list(range(ndim))
    try:
        return tuple(sorted(norm_axes(axes, ndim, ctx.op_type)))
    except ShapeError as e:
        raise ctx.bad_attr("axes", str(e)) from None


def _finish(ctx, y, axes):
    if ctx.attr("keepdims", 1) or not axes:
        return y
    return ctx.add("squeeze", [y], axes=axes)


# Value of a reduction over an empty set (ONNX's identity elements).
_EMPTY = {
    "ReduceSum": 0,
    "ReduceL1": 0,
    "ReduceL2": 0,
    "ReduceSumSquare": 0,
    "ReduceProd": 1,
    "ReduceMax": -np.inf,
    "ReduceMin": np.inf,
    "ReduceLogSum": -np.inf,
    "ReduceLogSumExp": -np.inf,
    "ReduceMean": np.nan,
}


def _empty_reduction(ctx, x, axes):
    """A reduction over a zero-size axis does not depend on the data: a literal."""
    lens = [1 if i in axes else n for i, n in enumerate(x.shape.lens)]
    if not ctx.attr("keepdims", 1):
        lens = [n for i, n in enumerate(x.shape.lens) if i not in axes]
    npd = x.shape.dtype.np_dtype
    v = _EMPTY[ctx.op_type]
    if npd.kind in "iub" and not np.isfinite(v):
        info = np.iinfo(npd) if npd.kind != "b" else None
        v = (v > 0) if info is None else (info.max if v > 0 else info.min)
    return ctx.literal(np.full(lens, v, dtype=npd))


def _reduce(ctx, args, pre=None, op="reduce_sum", post=None):
    x = args[0]
    axes = _axes(ctx, args, x.shape.ndim)
    if axes is None:  # ONNX: the input itself (after the elementwise pre/post steps)
        v = pre(x) if pre else x
        return post(v) if post else v
    if any(x.shape.lens[a] == 0 for a in axes):
        return _empty_reduction(ctx, x, axes)
    v = pre(x) if pre else x
    y = ctx.add(op, [v], axes=axes)
    if post:
        y = post(y)
    return _finish(ctx, y, axes)


_SIMPLE = {
    "ReduceSum": "reduce_sum",
    "ReduceMean": "reduce_mean",
    "ReduceMax": "reduce_max",
    "ReduceMin": "reduce_min",
    "ReduceProd": "reduce_prod",
}


@register(*_SIMPLE)
def parse_reduce_simple(ctx: NodeContext, args: Args) -> Result:
    return _reduce(ctx, args, op=_SIMPLE[ctx.op_type])


@register("ReduceL1")
def parse_reduce_l1(ctx: NodeContext, args: Args) -> Result:
    return _reduce(ctx, args, pre=lambda x: ctx.add("abs", [x]))


@register("ReduceL2")
def parse_reduce_l2(ctx: NodeContext, args: Args) -> Result:
    return _reduce(ctx, args, pre=lambda x: ctx.add("mul", [x, x]), post=lambda y: ctx.add("sqrt", [y]))


@register("ReduceSumSquare")
def parse_reduce_sum_square(ctx: NodeContext, args: Args) -> Result:
    return _reduce(ctx, args, pre=lambda x: ctx.add("mul", [x, x]))


@register("ReduceLogSum")
def parse_reduce_log_sum(ctx: NodeContext, args: Args) -> Result:
    return _reduce(ctx, args, post=lambda y: ctx.add("log", [y]))


@register("ReduceLogSumExp")
def parse_reduce_log_sum_exp(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    axes = _axes(ctx, args, x.shape.ndim)
    if axes is None:
        # No reduction: log(exp(x)) is x, which ONNX Runtime returns; computing it overflows for
        # x > 88 in float32 and turns integers into garbage (exp(-4) is 0 as an int).
        return ctx.add("identity", [x])
    if any(x.shape.lens[a] == 0 for a in axes):
        return _empty_reduction(ctx, x, axes)
    # Integers go through float64 and are truncated back, as ONNX Runtime computes them (exp of an
    # integer difference truncated to an integer loses everything; float32 rounding would move a
    # result like 2.9999999 across the integer it truncates to).
    t = x.shape.type
    if not dtypes.dtype(t).is_float:
        x = ctx.convert(x, "float64")
    # log(sum(exp(x - m))) + m with m = max(x): the stable form (the naive one overflows on large x)
    m = ctx.add("reduce_max", [x], axes=axes)
    shifted = ctx.add("exp", [ctx.add("sub", [x, ctx.broadcast_to(m, x)])])
    y = ctx.add("add", [ctx.add("log", [ctx.add("reduce_sum", [shifted], axes=axes)]), m])
    return _finish(ctx, ctx.convert(y, t), axes)


@register("ArgMax", "ArgMin")
def parse_arg(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    try:
        axis = norm_axis(ctx.attr("axis", 0), x.shape.ndim, ctx.op_type)
    except ShapeError as e:
        raise ctx.bad_attr("axis", str(e)) from None
    y = ctx.add(
        "argmax" if ctx.op_type == "ArgMax" else "argmin",
        [x],
        axis=axis,
        select_last_index=bool(ctx.attr("select_last_index", 0)),
    )
    return _finish(ctx, y, (axis,))


def _coerced(ctx, x, fn):
    """Opset < 13 softmax family: the input is viewed as 2-D [prod(:axis), prod(axis:)]."""
    lens = x.shape.lens
    axis = norm_axis(ctx.attr("axis", 1), max(len(lens), 1), ctx.op_type, allow_end=True)
    if axis == len(lens) - 1:
        return fn(x, axis)
    flat = ctx.add("reshape", [ctx.contiguous(x)], dims=[math.prod(lens[:axis]), math.prod(lens[axis:])])
    return ctx.add("reshape", [fn(flat, 1)], dims=list(lens))


def _softmax_like(ctx, args, body):
    x = args[0]
    if ctx.opset < 13:
        return _coerced(ctx, x, body)
    try:
        axis = norm_axis(ctx.attr("axis", -1), x.shape.ndim, ctx.op_type)
    except ShapeError as e:
        raise ctx.bad_attr("axis", str(e)) from None
    return body(x, axis)


@register("Softmax", "LogSoftmax")
def parse_softmax(ctx: NodeContext, args: Args) -> Result:
    name = "softmax" if ctx.op_type == "Softmax" else "logsoftmax"
    return _softmax_like(ctx, args, lambda x, axis: ctx.add(name, [x], axis=axis))


@register("Hardmax")
def parse_hardmax(ctx: NodeContext, args: Args) -> Result:
    def body(x, axis):
        lens = x.shape.lens
        idx = ctx.broadcast_to(ctx.add("argmax", [x], axis=axis), lens)
        pos = np.arange(lens[axis], dtype=np.int64).reshape([-1 if d == axis else 1 for d in range(len(lens))])
        hot = ctx.add("equal", [idx, ctx.broadcast_to(ctx.literal(pos), lens)])
        return ctx.convert(hot, x.shape.type)

    return _softmax_like(ctx, args, body)


@register("TopK")
def parse_topk(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    k = ctx.attr("k") if ctx.opset < 10 else ctx.const_one_int(args[1], "K")
    try:
        axis = norm_axis(ctx.attr("axis", -1), x.shape.ndim, "TopK")
    except ShapeError as e:
        raise ctx.bad_attr("axis", str(e)) from None
    t = ctx.add("topk", [x], k=k, axis=axis, largest=bool(ctx.attr("largest", 1)))
    return [ctx.add("get_tuple_elem", [t], index=0), ctx.add("get_tuple_elem", [t], index=1)]


@register("CumSum")
def parse_cumsum(ctx: NodeContext, args: Args) -> Result:
    axis = ctx.const_one_int(args[1], "axis")
    return ctx.add(
        "prefix_scan_sum",
        [args[0]],
        axis=axis,
        exclusive=bool(ctx.attr("exclusive", 0)),
        reverse=bool(ctx.attr("reverse", 0)),
    )
