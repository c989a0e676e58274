"""Elementwise ONNX ops: 1:1 unary maps (MIGraphX parse_generic_op), broadcasting binary ops
(parse_binary_op: implicit broadcasting becomes explicit multibroadcast), variadic Sum/Max/Min/Mean,
comparisons, Cast/CastLike, Clip, Where."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from .registry import register, register_fn
from .tensors import ir_type

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result

UNARY = {
    "Abs": "abs",
    "Acos": "acos",
    "Acosh": "acosh",
    "Asin": "asin",
    "Asinh": "asinh",
    "Atan": "atan",
    "Atanh": "atanh",
    "Ceil": "ceil",
    "Cos": "cos",
    "Cosh": "cosh",
    "Erf": "erf",
    "Exp": "exp",
    "Floor": "floor",
    "Log": "log",
    "Neg": "neg",
    "Reciprocal": "recip",
    "Relu": "relu",
    "Round": "nearbyint",
    "Sigmoid": "sigmoid",
    "Sign": "sign",
    "Sin": "sin",
    "Sinh": "sinh",
    "Sqrt": "sqrt",
    "Tan": "tan",
    "Tanh": "tanh",
    "Not": "not",
    "IsNaN": "isnan",
    "BitwiseNot": "bitwise_not",
}

BINARY = {
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "And": "logical_and",
    "Or": "logical_or",
    "Xor": "logical_xor",
    "Equal": "equal",
    "Greater": "greater",
    "Less": "less",
    "BitwiseAnd": "bitwise_and",
    "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
}

VARIADIC = {"Sum": "add", "Max": "max", "Min": "min"}


def _unary(mgx: str):
    return lambda ctx, args: ctx.add(mgx, [args[0]])


def _binary(mgx: str):
    return lambda ctx, args: ctx.add_common(mgx, args[0], args[1])


def _variadic(mgx: str):
    def handler(ctx: NodeContext, args: Args) -> Result:
        acc = args[0]
        for a in args[1:]:
            acc = ctx.add_common(mgx, acc, a)
        return acc

    return handler


for _t, _m in UNARY.items():
    register_fn(_t, _unary(_m))
for _t, _m in BINARY.items():
    register_fn(_t, _binary(_m))
for _t, _m in VARIADIC.items():
    register_fn(_t, _variadic(_m))


def _refuse_integer_zero_divisor(ctx: NodeContext, divisor) -> None:
    """Integer division by zero has no value (numpy would quietly give 0, a GPU garbage): refuse a
    constant divisor holding a zero at import, naming the node."""
    if dtypes.dtype(divisor.shape.type).is_float:
        return
    value = ctx.const(divisor)
    if value is not None and value.size and not np.all(value):
        raise ctx.error("integer division by a constant divisor that holds 0 (the result is undefined)")


@register("Div")
def parse_div(ctx: NodeContext, args: Args) -> Result:
    _refuse_integer_zero_divisor(ctx, args[1])
    return ctx.add_common("div", args[0], args[1])


@register("Mean")
def parse_mean(ctx: NodeContext, args: Args) -> Result:
    total = _variadic("add")(ctx, args)
    return ctx.add("div", [total, ctx.scalar_like(len(args), total)])


@register("GreaterOrEqual", "LessOrEqual")
def parse_compare_or_equal(ctx: NodeContext, args: Args) -> Result:
    strict = ctx.add_common("greater" if ctx.op_type == "GreaterOrEqual" else "less", args[0], args[1])
    return ctx.add("logical_or", [strict, ctx.add_common("equal", args[0], args[1])])


@register("Pow")
def parse_pow(ctx: NodeContext, args: Args) -> Result:
    base, exp = args
    # ONNX lets the exponent have another numeric type; the IR op wants one type. An integer base
    # with a float exponent is computed in float and truncated back, as ONNX Runtime and MIGraphX
    # do (2 ** 1.82 = 3.53 -> 3; converting the exponent to int would give 2 ** 1 = 2).
    if not dtypes.dtype(base.shape.type).is_float and dtypes.dtype(exp.shape.type).is_float:
        ft = "float64" if exp.shape.type == "float64" else "float32"
        out = ctx.add_common("pow", ctx.convert(base, ft), ctx.convert(exp, ft))
        return ctx.convert(out, base.shape.type)
    return ctx.add_common("pow", base, ctx.convert(exp, base.shape.type))


@register("Mod")
def parse_mod(ctx: NodeContext, args: Args) -> Result:
    fmod = ctx.attr("fmod", 0)
    _refuse_integer_zero_divisor(ctx, args[1])
    return ctx.add_common("fmod" if fmod else "mod", args[0], args[1])


@register("BitShift")
def parse_bitshift(ctx: NodeContext, args: Args) -> Result:
    direction = ctx.attr_choice("direction", ("LEFT", "RIGHT"))
    return ctx.add_common("shift_left" if direction == "LEFT" else "shift_right", args[0], args[1])


@register("PRelu")
def parse_prelu(ctx: NodeContext, args: Args) -> Result:
    x, slope = args
    return ctx.add("prelu", [x, ctx.broadcast_to(slope, x)])


@register("IsInf")
def parse_isinf(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    inf = ctx.add("isinf", [x])
    if pos and neg:
        return inf
    if not pos and not neg:
        return ctx.add("logical_and", [inf, ctx.add("not", [inf])])
    side = ctx.add("greater" if pos else "less", [x, ctx.scalar_like(0, x)])
    return ctx.add("logical_and", [inf, side])


@register("Cast")
def parse_cast(ctx: NodeContext, args: Args) -> Result:
    t = ir_type(ctx.attr("to"), f"node {ctx.name} attribute 'to'")
    if t == "float8e8m0" and ctx.attr("round_mode", "up") != "up":
        raise ctx.bad_attr("round_mode", "only 'up' (the default) is supported for float8 e8m0")
    if not ctx.attr("saturate", 1) and args[0].shape.type != t:
        return ctx.add("convert", [args[0]], target_type=t, saturate=False)
    return ctx.convert(args[0], t)


@register("CastLike")
def parse_castlike(ctx: NodeContext, args: Args) -> Result:
    t = args[1].shape.type
    if not ctx.attr("saturate", 1) and args[0].shape.type != t:
        return ctx.add("convert", [args[0]], target_type=t, saturate=False)
    return ctx.convert(args[0], t)


@register("Identity")
def parse_identity(ctx: NodeContext, args: Args) -> Result:
    return args[0]


@register("Dropout")
def parse_dropout(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    training = ctx.need_const(args[2], "training_mode") if len(args) > 2 and args[2] is not None else None
    ratio = (
        float(ctx.need_const(args[1], "ratio").reshape(-1)[0])
        if len(args) > 1 and args[1] is not None
        else float(ctx.attr("ratio", 0.5))
    )
    if ((training is not None and bool(training.reshape(-1)[0])) or ctx.attr("is_test", 1) == 0) and ratio > 0:
        # Training mode: a seeded mask drawn at import (parse_misc.random_state, onnx.reference's draws).
        from .parse_misc import random_state

        keep = random_state(ctx).uniform(0, 1.0, x.shape.lens) >= ratio
        mask = ctx.literal(keep)
        scale = ctx.scalar_like(1.0 / (1.0 - ratio), x)
        return [ctx.add("mul", [ctx.add("mul", [x, ctx.convert(mask, x.shape.type)]), scale]), mask]
    mask = ctx.add("multibroadcast", [ctx.literal(True, "bool")], out_lens=x.shape.lens)
    return [x, mask]


@register("Clip")
def parse_clip(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    if ctx.opset < 11:
        lo = ctx.attr("min", None)
        hi = ctx.attr("max", None)
        lo_i = ctx.scalar_like(lo, x) if lo is not None else None
        hi_i = ctx.scalar_like(hi, x) if hi is not None else None
    else:
        lo_i = ctx.broadcast_to(args[1], x) if len(args) > 1 and args[1] is not None else None
        hi_i = ctx.broadcast_to(args[2], x) if len(args) > 2 and args[2] is not None else None
    if lo_i is not None and hi_i is not None:
        return ctx.add("clip", [x, lo_i, hi_i])
    if lo_i is not None:
        return ctx.add("max", [x, lo_i])
    if hi_i is not None:
        return ctx.add("min", [x, hi_i])
    return x


@register("Where")
def parse_where(ctx: NodeContext, args: Args) -> Result:
    return ctx.add_common("where", *args)


@register("Constant")
def parse_constant(ctx: NodeContext, args: Args) -> Result:
    keys = [k for k in ctx.attrs]
    if len(keys) != 1:
        raise ctx.error(f"needs exactly one value attribute, got {keys or 'none'}")
    key = keys[0]
    v = ctx.attr(key)
    if key == "value":
        return ctx.literal(v)
    kinds = {"value_float": "float32", "value_floats": "float32", "value_int": "int64", "value_ints": "int64"}
    if key not in kinds:
        raise ctx.bad_attr(key, "this kind of constant is not supported")
    return ctx.literal(np.asarray(v), kinds[key])
