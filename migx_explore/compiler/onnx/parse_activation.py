"""Activations. Those with a MIGraphX op map 1:1 (LeakyRelu, Elu); the rest decompose into
pointwise ops with scalar literals, the way MIGraphX's parsers do, so fusion has work to do."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .. import dtypes
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Instruction
    from .context import NodeContext
    from .registry import Args, Result


def _k(ctx, value, like):
    return ctx.scalar_like(value, like)


@register("LeakyRelu")
def parse_leaky_relu(ctx: NodeContext, args: Args) -> Result:
    return ctx.add("leaky_relu", [args[0]], alpha=ctx.attr("alpha"))


@register("Elu")
def parse_elu(ctx: NodeContext, args: Args) -> Result:
    return ctx.add("elu", [args[0]], alpha=ctx.attr("alpha"))


@register("Selu")
def parse_selu(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    # gamma * (x > 0 ? x : alpha * (exp(x) - 1))
    neg = ctx.add("mul", [_k(ctx, ctx.attr("alpha"), x), ctx.add("sub", [ctx.add("exp", [x]), _k(ctx, 1, x)])])
    sel = ctx.add("where", [ctx.add("greater", [x, _k(ctx, 0, x)]), x, neg])
    return ctx.add("mul", [sel, _k(ctx, ctx.attr("gamma"), x)])


@register("Celu")
def parse_celu(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    alpha = ctx.attr("alpha")
    if alpha == 0:
        # The formula's value at alpha = 0: x / 0 is inf (nan at 0) for x >= 0, and 0 * inf is nan;
        # for x < 0, 0 * (exp(-inf) - 1) is 0. Built explicitly, because simplify_algebra's
        # find_zero_ops (0 * x -> 0, as in MIGraphX) assumes x is finite and would make it 0.
        keep_nan = ctx.add("not", [ctx.add("less", [x, _k(ctx, 0, x)])])  # x >= 0, or x is nan
        return ctx.add("where", [keep_nan, _k(ctx, float("nan"), x), _k(ctx, 0, x)])
    # max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    e = ctx.add("sub", [ctx.add("exp", [ctx.add("div", [x, _k(ctx, alpha, x)])]), _k(ctx, 1, x)])
    neg = ctx.add("min", [_k(ctx, 0, x), ctx.add("mul", [e, _k(ctx, alpha, x)])])
    return ctx.add("add", [ctx.add("max", [_k(ctx, 0, x), x]), neg])


def _hard_sigmoid(ctx, x, alpha, beta):
    lin = ctx.add("add", [ctx.add("mul", [x, _k(ctx, alpha, x)]), _k(ctx, beta, x)])
    return ctx.add("clip", [lin, _k(ctx, 0, x), _k(ctx, 1, x)])


@register("HardSigmoid")
def parse_hard_sigmoid(ctx: NodeContext, args: Args) -> Result:
    return _hard_sigmoid(ctx, args[0], ctx.attr("alpha"), ctx.attr("beta"))


@register("HardSwish")
def parse_hard_swish(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    return ctx.add("mul", [x, _hard_sigmoid(ctx, x, 1.0 / 6, 0.5)])


def _softplus(ctx, x):
    return ctx.add("log", [ctx.add("add", [ctx.add("exp", [x]), _k(ctx, 1, x)])])


@register("Softplus")
def parse_softplus(ctx: NodeContext, args: Args) -> Result:
    return _softplus(ctx, args[0])


@register("Softsign")
def parse_softsign(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    return ctx.add("div", [x, ctx.add("add", [ctx.add("abs", [x]), _k(ctx, 1, x)])])


@register("Mish")
def parse_mish(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    return ctx.add("mul", [x, ctx.add("tanh", [_softplus(ctx, x)])])


@register("ThresholdedRelu")
def parse_thresholded_relu(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    return ctx.add("where", [ctx.add("greater", [x, _k(ctx, ctx.attr("alpha"), x)]), x, _k(ctx, 0, x)])


@register("Swish")
def parse_swish(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    alpha = ctx.attr("alpha", 1.0)
    scaled = x if alpha == 1.0 else ctx.add("mul", [x, _k(ctx, alpha, x)])
    return ctx.add("mul", [x, ctx.add("sigmoid", [scaled])])


@register("Shrink")
def parse_shrink(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    lambd, bias = ctx.attr("lambd"), ctx.attr("bias")
    if not dtypes.dtype(x.shape.type).is_float:
        # The float lambd and bias compare with and shift integer x in float, and the result is
        # truncated back (ONNX Runtime's static_cast): int8 5 - 1.5 is 3, and -lambd need not fit uint8.
        y = parse_shrink_float(ctx, ctx.convert(x, "float32"), lambd, bias)
        return ctx.convert(y, x.shape.type)
    return parse_shrink_float(ctx, x, lambd, bias)


def parse_shrink_float(ctx: NodeContext, x: Instruction, lambd: float, bias: float) -> Instruction:
    low = ctx.add("less", [x, _k(ctx, -lambd, x)])
    high = ctx.add("greater", [x, _k(ctx, lambd, x)])
    inner = ctx.add("where", [high, ctx.add("sub", [x, _k(ctx, bias, x)]), _k(ctx, 0, x)])
    return ctx.add("where", [low, ctx.add("add", [x, _k(ctx, bias, x)]), inner])


@register("Gelu")
def parse_gelu(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    half_x = ctx.add("mul", [x, _k(ctx, 0.5, x)])
    if ctx.attr_choice("approximate", ("none", "tanh"), "none") == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = ctx.add("mul", [ctx.add("mul", [x, x]), x])
        inner = ctx.add("add", [x, ctx.add("mul", [cube, _k(ctx, 0.044715, x)])])
        t = ctx.add("tanh", [ctx.add("mul", [inner, _k(ctx, math.sqrt(2 / math.pi), x)])])
    else:
        # 0.5 x (1 + erf(x / sqrt(2))): the erf pattern find_gelu-style passes look for
        t = ctx.add("erf", [ctx.add("mul", [x, _k(ctx, 1 / math.sqrt(2), x)])])
    return ctx.add("mul", [half_x, ctx.add("add", [t, _k(ctx, 1, x)])])
