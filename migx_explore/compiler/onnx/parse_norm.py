"""Normalizations, decomposed into reductions and pointwise ops with explicit broadcasts, following
MIGraphX's parse_batchnorm / parse_instancenorm / parse_layernorm (sqdiff-based variance)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ShapeError
from ..ops.common import norm_axis
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _per_channel(ctx, p, x):
    """A [C] tensor shaped [C, 1, ..., 1] to line up with axis 1 of x (broadcast later); a rank-1
    x is its own channel axis (onnx.reference and MIGraphX apply the [C] parameters elementwise)."""
    nd = x.shape.ndim
    return ctx.add("unsqueeze", [p], axes=list(range(1, nd - 1))) if nd > 2 else p


@register("BatchNormalization")
def parse_batchnorm(ctx: NodeContext, args: Args) -> Result:
    x, scale, bias, mean, var = args[:5]
    if x.shape.ndim < 1:
        raise ctx.error(f"input {list(x.shape.lens)} needs rank >= 1")
    if ctx.attr("training_mode", 0) or any(o for o in ctx.node.output[1:]):
        if x.shape.ndim < 2:
            raise ctx.error(f"training mode needs an input of rank >= 2, got {list(x.shape.lens)}")
        return _batchnorm_training(ctx, x, scale, bias, mean, var)
    # Opset 15 lets scale/bias (T1) and mean/var (T2) have another float type than X (an fp16
    # model keeps fp32 statistics): compute in X's type, as MIGraphX does.
    scale, bias, mean, var = (ctx.convert(p, x.shape.type) for p in (scale, bias, mean, var))
    scale, bias, mean, var = (_per_channel(ctx, p, x) for p in (scale, bias, mean, var))
    eps = ctx.scalar_like(ctx.attr("epsilon"), var)
    # (x - mean) * (scale * rsqrt(var + eps)) + bias; the bracket is constant-foldable.
    x_sub_mean = ctx.add_common("sub", x, mean)
    mul0 = ctx.add_common("mul", scale, ctx.add("rsqrt", [ctx.add("add", [var, eps])]))
    return ctx.add_common("add", ctx.add_common("mul", x_sub_mean, mul0), bias)


def _batchnorm_training(ctx, x, scale, bias, running_mean, running_var):
    """Normalize with the batch's own statistics; also return the updated running mean and
    variance (momentum-weighted, population variance), as ONNX's training mode defines."""
    axes = [0] + list(range(2, x.shape.ndim))
    y, mean, inv = _normalize(ctx, x, axes, ctx.attr("epsilon"))
    y = ctx.add_common("mul", y, _per_channel(ctx, scale, x))
    y = ctx.add_common("add", y, _per_channel(ctx, bias, x))
    c = x.shape.lens[1]
    batch_mean = ctx.add("reshape", [mean], dims=[c])
    mean_b = ctx.broadcast_to(mean, x)
    batch_var = ctx.add("reshape", [ctx.add("reduce_mean", [ctx.add("sqdiff", [x, mean_b])], axes=axes)], dims=[c])
    momentum = float(ctx.attr("momentum", 0.9))

    def blend(running, batch):
        return ctx.add(
            "add",
            [
                ctx.add("mul", [running, ctx.scalar_like(momentum, running)]),
                ctx.add("mul", [batch, ctx.scalar_like(1 - momentum, batch)]),
            ],
        )

    return [y, blend(running_mean, batch_mean), blend(running_var, batch_var)]


def _normalize(ctx, x, axes, eps):
    """(x - mean) * rsqrt(var + eps) over axes; returns (y, mean, rsqrt)."""
    mean = ctx.add("reduce_mean", [x], axes=axes)
    mean_b = ctx.broadcast_to(mean, x)
    var = ctx.add("reduce_mean", [ctx.add("sqdiff", [x, mean_b])], axes=axes)
    inv = ctx.add("rsqrt", [ctx.add("add", [var, ctx.scalar_like(eps, var)])])
    y = ctx.add("mul", [ctx.add("sub", [x, mean_b]), ctx.broadcast_to(inv, x)])
    return y, mean, inv


@register("InstanceNormalization")
def parse_instancenorm(ctx: NodeContext, args: Args) -> Result:
    x, scale, bias = args
    axes = list(range(2, x.shape.ndim))
    y, _, _ = _normalize(ctx, x, axes, ctx.attr("epsilon"))
    y = ctx.add("mul", [y, ctx.add("broadcast", [scale], axis=1, out_lens=x.shape.lens)])
    return ctx.add("add", [y, ctx.add("broadcast", [bias], axis=1, out_lens=x.shape.lens)])


def _axis(ctx, x, default):
    try:
        return norm_axis(ctx.attr("axis", default), x.shape.ndim, ctx.op_type)
    except ShapeError as e:
        raise ctx.bad_attr("axis", str(e)) from None


@register("LayerNormalization")
def parse_layernorm(ctx: NodeContext, args: Args) -> Result:
    x, scale = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    axis = _axis(ctx, x, -1)
    y, mean, inv = _normalize(ctx, x, list(range(axis, x.shape.ndim)), ctx.attr("epsilon"))
    y = ctx.add_common("mul", y, scale)
    if bias is not None:
        y = ctx.add_common("add", y, bias)
    return [y, mean, inv]


@register("RMSNormalization")
def parse_rmsnorm(ctx: NodeContext, args: Args) -> Result:
    x, scale = args[0], args[1]
    # Y has scale's type V, which may differ from X's T (fp16 X, fp32 scale): compute in V.
    x = ctx.convert(x, scale.shape.type)
    axis = _axis(ctx, x, -1)
    ms = ctx.add("reduce_mean", [ctx.add("mul", [x, x])], axes=list(range(axis, x.shape.ndim)))
    inv = ctx.add("rsqrt", [ctx.add("add", [ms, ctx.scalar_like(ctx.attr("epsilon"), ms)])])
    return ctx.add_common("mul", ctx.add_common("mul", x, inv), scale)


@register("GroupNormalization")
def parse_groupnorm(ctx: NodeContext, args: Args) -> Result:
    x, scale, bias = args
    g = ctx.attr("num_groups")
    n, c = x.shape.lens[:2]
    if g <= 0 or c % g:
        raise ctx.bad_attr("num_groups", f"{g} does not divide the {c} channels")
    grouped = ctx.add("reshape", [ctx.contiguous(x)], dims=[n, g, -1])
    y, _, _ = _normalize(ctx, grouped, [2], ctx.attr("epsilon"))
    y = ctx.add("reshape", [y], dims=list(x.shape.lens))

    def channel(p):
        if p.shape.elements() == g and g != c:  # opset 18 wording: one value per group
            p = ctx.add(
                "reshape",
                [ctx.contiguous(ctx.broadcast_to(ctx.add("unsqueeze", [p], axes=[1]), [g, c // g]))],
                dims=[c],
            )
        return ctx.add("broadcast", [p], axis=1, out_lens=x.shape.lens)

    return ctx.add("add", [ctx.add("mul", [y, channel(scale)]), channel(bias)])


@register("LpNormalization")
def parse_lpnorm(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    axis = _axis(ctx, x, -1)
    p = ctx.attr("p", 2)
    if p not in (1, 2):
        raise ctx.bad_attr("p", f"must be 1 or 2, got {p}")
    if p == 1:
        norm = ctx.add("reduce_sum", [ctx.add("abs", [x])], axes=[axis])
    else:
        norm = ctx.add("sqrt", [ctx.add("reduce_sum", [ctx.add("mul", [x, x])], axes=[axis])])
    norm = ctx.broadcast_to(norm, x)
    zero = ctx.scalar_like(0, x)
    # A zero norm gives 0, not 0/0 (as onnx.reference does).
    return ctx.add("where", [ctx.add("equal", [norm, zero]), zero, ctx.add("div", [x, norm])])


@register("MeanVarianceNormalization")
def parse_mvn(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    axes = sorted(norm_axis(a, x.shape.ndim, ctx.op_type) for a in ctx.attr("axes", [0, 2, 3]))
    mean = ctx.broadcast_to(ctx.add("reduce_mean", [x], axes=axes), x)
    sq_mean = ctx.broadcast_to(ctx.add("reduce_mean", [ctx.add("mul", [x, x])], axes=axes), x)
    std = ctx.add("sqrt", [ctx.add("sub", [sq_mean, ctx.add("mul", [mean, mean])])])
    return ctx.add("div", [ctx.add("sub", [x, mean]), ctx.add("add", [std, ctx.scalar_like(1e-9, x)])])
