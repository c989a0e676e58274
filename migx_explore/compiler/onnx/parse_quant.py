"""Quantized ops, decomposed as MIGraphX's parsers do: QLinear* become DequantizeLinear -> float op
-> QuantizeLinear (simplify_qdq later turns dequantize -> dot/conv -> quantize into quant_dot /
quant_convolution), ConvInteger / MatMulInteger subtract zero points and compute exactly, and the
MX (microscaling fp4) ops scale blocks of 32 by a power of two, as parse_mxqdq.cpp does."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from onnx import helper

from .functions import import_expansion
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _node_attrs(ctx: NodeContext, drop: tuple[str, ...] = ()) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in ctx.node.attribute if a.name not in drop}


def _dq(name: str, x: str, s: str, z: str | None, **attrs) -> object:
    return helper.make_node("DequantizeLinear", [x, s] + ([z] if z else []), [name], **attrs)


def _per_axis(ctx, scale, axis: int) -> dict:
    return {"axis": axis} if scale is not None and scale.shape.elements() > 1 else {}


def _qlinear(ctx: NodeContext, groups: list[tuple], op_type: str, ys, yz, attrs: dict, extra=None) -> Result:
    """groups: (x, scale, zero, dq attrs) per quantized input; the float op gets their dequantized
    values (plus `extra` inputs), its result is quantized with (ys, yz)."""
    bind, nodes, fin = {}, [], []
    for k, (x, s, z, dq_attrs) in enumerate(groups):
        bind.update({f"x{k}": x, f"s{k}": s, f"z{k}": z})
        nodes.append(_dq(f"f{k}", f"x{k}", f"s{k}", f"z{k}" if z is not None else None, **dq_attrs))
        fin.append(f"f{k}")
    for k, e in enumerate(extra or []):
        bind[f"e{k}"] = e
        fin.append(f"e{k}" if e is not None else "")
    nodes.append(helper.make_node(op_type, fin, ["y"], **attrs))
    if ys is None:  # QGemm without y_scale: a float output
        return import_expansion(ctx, bind, nodes, ["y"])[0]
    bind.update({"ys": ys, "yz": yz})
    nodes.append(helper.make_node("QuantizeLinear", ["y", "ys"] + (["yz"] if yz is not None else []), ["q"]))
    return import_expansion(ctx, bind, nodes, ["q"])[0]


def _opt(args, i):
    return args[i] if len(args) > i else None


@register("QLinearConv")
def parse_qlinear_conv(ctx: NodeContext, args: Args) -> Result:
    x, xs, xz, w, ws, wz, ys, yz = args[:8]
    bias = _opt(args, 8)
    extra = []
    if bias is not None:  # int32 bias in units of xs * ws
        scale = ctx.add_common("mul", xs, ws) if ws.shape.elements() > 1 else ctx.add("mul", [xs, ws])
        extra = [ctx.add_common("mul", ctx.convert(bias, "float32"), scale)]
    return _qlinear(ctx, [(x, xs, xz, {}), (w, ws, wz, _per_axis(ctx, ws, 0))], "Conv", ys, yz, _node_attrs(ctx), extra)


@register("QLinearMatMul")
def parse_qlinear_matmul(ctx: NodeContext, args: Args) -> Result:
    """B's parameters per tensor, per column (1-D, length N), or ONNX Runtime's N-D form for a
    batched B, [..., 1, N]: one row of column parameters per batch matrix. The N-D form is not a
    DequantizeLinear axis; it is dequantized here with the parameters broadcast to B."""
    a, a_s, az, b, bs, bz, ys, yz = args[:8]
    if bs.shape.ndim < 2 or bs.shape.elements() == 1:
        return _qlinear(
            ctx, [(a, a_s, az, {}), (b, bs, bz, _per_axis(ctx, bs, b.shape.ndim - 1))], "MatMul", ys, yz, {}
        )
    if bs.shape.ndim != b.shape.ndim or bs.shape.lens[-2] != 1:
        raise ctx.error(
            f"b_scale {list(bs.shape.lens)} must be a scalar, 1-D of B's columns, or [..., 1, N] "
            f"for B {list(b.shape.lens)}"
        )
    params = [ctx.broadcast_to(p, b) for p in ([bs, bz] if bz is not None else [bs])]
    fb = ctx.add("dequantizelinear", [b, *params])
    return _qlinear(ctx, [(a, a_s, az, {})], "MatMul", ys, yz, {}, [fb])


@register("QGemm", msft=True)
def parse_qgemm(ctx: NodeContext, args: Args) -> Result:
    """com.microsoft.QGemm: alpha * A' B' + C with C an int32 bias in units of alpha * a_scale *
    b_scale (zero point 0); quantized with (y_scale, y_zero_point) when y_scale is given, else a
    float32 output. B's scale is per tensor or per output column (axis 0 of B when transB)."""
    a, a_s, az, b, bs, bz = args[:6]
    bias, ys, yz = _opt(args, 6), _opt(args, 7), _opt(args, 8)
    alpha, trans_b = float(ctx.attr("alpha", 1.0)), int(ctx.attr("transB", 0))
    extra = []
    if bias is not None:
        scale = ctx.add_common("mul", a_s, bs) if bs.shape.elements() > 1 else ctx.add("mul", [a_s, bs])
        scale = ctx.add_common("mul", scale, ctx.literal(np.array(alpha, np.float32)))
        extra = [ctx.add_common("mul", ctx.convert(bias, "float32"), scale)]
    attrs = {"alpha": alpha, "transA": int(ctx.attr("transA", 0)), "transB": trans_b}
    return _qlinear(
        ctx, [(a, a_s, az, {}), (b, bs, bz, _per_axis(ctx, bs, 0 if trans_b else 1))], "Gemm", ys, yz, attrs, extra
    )


@register("QLinearAdd", "QLinearMul", msft=True, dynamic="any")
def parse_qlinear_binary(ctx: NodeContext, args: Args) -> Result:
    a, a_s, az, b, bs, bz, ys, yz = (list(args) + [None] * 8)[:8]
    op = {"QLinearAdd": "Add", "QLinearMul": "Mul"}[ctx.op_type]
    return _qlinear(ctx, [(a, a_s, az, {}), (b, bs, bz, {})], op, ys, yz, {})


@register(
    "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool", msft=True, dynamic="any"
)
def parse_qlinear_unary(ctx: NodeContext, args: Args) -> Result:
    x, xs, xz, ys, yz = (list(args) + [None] * 5)[:5]
    op = ctx.op_type.removeprefix("QLinear")
    attrs = _node_attrs(ctx, drop=("channels_last",))
    if ctx.op_type == "QLinearLeakyRelu":
        attrs.setdefault("alpha", 0.01)
    if ctx.attr("channels_last", 0):
        raise ctx.bad_attr("channels_last", "NHWC quantized pooling is not supported")
    return _qlinear(ctx, [(x, xs, xz, {})], op, ys, yz, attrs)


@register("QLinearSoftmax", msft=True, dynamic="any")
def parse_qlinear_softmax(ctx: NodeContext, args: Args) -> Result:
    """com.microsoft.QLinearSoftmax (ONNX Runtime's QOperator softmax): dequantize, Softmax over
    `axis`, quantize. Its `opset` attribute is the softmax semantics; before 13 a softmax flattens
    at `axis`, the same as opset 13's only where axis is the last one."""
    x, xs, xz, ys, yz = (list(args) + [None] * 5)[:5]
    axis = int(ctx.attr("axis", -1))
    if int(ctx.attr("opset", 13)) < 13 and axis % x.shape.ndim != x.shape.ndim - 1:
        raise ctx.bad_attr("axis", f"softmax before opset 13 flattens at axis {axis}; only the last axis is supported")
    return _qlinear(ctx, [(x, xs, xz, {})], "Softmax", ys, yz, {"axis": axis})


@register("QLinearWhere", msft=True, dynamic="any")
def parse_qlinear_where(ctx: NodeContext, args: Args) -> Result:
    """com.microsoft.QLinearWhere: where(condition, dequantized X, dequantized Y), quantized."""
    cond, x, xs, xz, y, ys_in, yz_in, zs, zz = (list(args) + [None] * 9)[:9]
    bind = {"c": cond, "x": x, "xs": xs, "xz": xz, "y": y, "ys": ys_in, "yz": yz_in, "zs": zs, "zz": zz}
    nodes = [
        _dq("fx", "x", "xs", "xz" if xz is not None else None),
        _dq("fy", "y", "ys", "yz" if yz_in is not None else None),
        helper.make_node("Where", ["c", "fx", "fy"], ["w"]),
        helper.make_node("QuantizeLinear", ["w", "zs"] + (["zz"] if zz is not None else []), ["q"]),
    ]
    return import_expansion(ctx, {k: v for k, v in bind.items() if v is not None}, nodes, ["q"])[0]


@register("QLinearConcat", msft=True)
def parse_qlinear_concat(ctx: NodeContext, args: Args) -> Result:
    ys, yz = args[0], args[1]
    rest = list(args[2:])
    groups = [(rest[i], rest[i + 1], rest[i + 2], {}) for i in range(0, len(rest), 3)]
    return _qlinear(ctx, groups, "Concat", ys, yz, {"axis": ctx.attr("axis")})


def _shifted(ctx, x, zero):
    """x - zero point in int32."""
    v = ctx.convert(x, "int32")
    return v if zero is None else ctx.add_common("sub", v, ctx.convert(zero, "int32"))


def _exact_float(ctx, terms: int) -> str:
    """float32 holds every partial sum of `terms` products of 8-bit values exactly up to 2^24."""
    return "float32" if terms * 255 * 255 < 2**24 else "float64"


@register("MatMulInteger")
def parse_matmul_integer(ctx: NodeContext, args: Args) -> Result:
    a, b = args[0], args[1]
    az, bz = _opt(args, 2), _opt(args, 3)
    if bz is not None and bz.shape.elements() > 1 and b.shape.ndim >= 2:
        bz = ctx.add("unsqueeze", [bz], axes=[0]) if bz.shape.ndim == 1 else bz  # per column of B
    if az is not None and az.shape.elements() > 1:
        az = ctx.add("unsqueeze", [az], axes=[az.shape.ndim])  # per row of A
    t = _exact_float(ctx, a.shape.lens[-1])
    fa, fb = ctx.convert(_shifted(ctx, a, az), t), ctx.convert(_shifted(ctx, b, bz), t)
    [y] = import_expansion(ctx, {"a": fa, "b": fb}, [helper.make_node("MatMul", ["a", "b"], ["y"])], ["y"])
    return ctx.convert(y, "int32")


@register("ConvInteger")
def parse_conv_integer(ctx: NodeContext, args: Args) -> Result:
    x, w = args[0], args[1]
    xz, wz = _opt(args, 2), _opt(args, 3)
    if wz is not None and wz.shape.elements() > 1:
        wz = ctx.add("reshape", [wz], dims=[-1] + [1] * (w.shape.ndim - 1))
    t = _exact_float(ctx, math.prod(w.shape.lens[1:]))
    fx, fw = ctx.convert(_shifted(ctx, x, xz), t), ctx.convert(_shifted(ctx, w, wz), t)
    node = helper.make_node("Conv", ["x", "w"], ["y"], **_node_attrs(ctx))
    [y] = import_expansion(ctx, {"x": fx, "w": fw}, [node], ["y"])
    return ctx.convert(y, "int32")


@register("MatMulIntegerToFloat", msft=True)
def parse_matmul_integer_to_float(ctx: NodeContext, args: Args) -> Result:
    a, b, a_s, bs = args[:4]
    az, bz, bias = _opt(args, 4), _opt(args, 5), _opt(args, 6)
    names = {"a": a, "b": b, "as": a_s, "bs": bs, "az": az, "bz": bz, "bias": bias}
    b_axis = {"axis": b.shape.ndim - 1} if bs.shape.elements() > 1 else {}
    nodes = [
        _dq("fa", "a", "as", "az" if az is not None else None),
        _dq("fb", "b", "bs", "bz" if bz is not None else None, **b_axis),
        helper.make_node("MatMul", ["fa", "fb"], ["y"]),
    ]
    if bias is not None:
        nodes.append(helper.make_node("Add", ["y", "bias"], ["yb"]))
    return import_expansion(ctx, names, nodes, ["yb" if bias is not None else "y"])[0]


def _block_scales(ctx: NodeContext, x, axis_attr: str, size_attr: str):
    """(x padded and split into blocks, per-block power-of-two scales / 4, padded lens): MX fp4."""
    nd = x.shape.ndim
    axis = int(ctx.attr(axis_attr, -1 if axis_attr == "axis" else 1))
    axis = axis + nd if axis < 0 else axis
    block = int(ctx.attr(size_attr, 32))
    if block != 32:
        raise ctx.bad_attr(size_attr, f"only blocks of 32 are supported, got {block}")
    n = x.shape.lens[axis]
    pad = -(-n // block) * block - n
    xp = x
    if pad:
        pads = [0] * (2 * nd)
        pads[nd + axis] = pad
        xp = ctx.add("pad", [x], pads=pads)
    lens = list(xp.shape.lens)
    blocked = lens[:axis] + [lens[axis] // block, block] + lens[axis + 1 :]
    amax = ctx.add(
        "reduce_max", [ctx.add("abs", [ctx.add("reshape", [ctx.contiguous(xp)], dims=blocked)])], axes=[axis + 1]
    )
    two, four = ctx.scalar_like(2.0, amax), ctx.scalar_like(4.0, amax)
    scales = ctx.add("div", [ctx.add("pow", [two, ctx.add("floor", [ctx.add("log2", [amax])])]), four])
    return scales, axis, blocked, lens, n


@register("DynamicScale")
def parse_dynamic_scale(ctx: NodeContext, args: Args) -> Result:
    scales, axis, _, _, _ = _block_scales(ctx, args[0], "group_dim", "group_size")
    return ctx.add("squeeze", [scales], axes=[axis + 1])


@register("MXQuantizeDequantize", "MXFixNeuron")
def parse_mx_qdq(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    dtype = ctx.attr("element_dtype", "fp4_e2m1")
    if dtype != "fp4_e2m1":
        raise ctx.bad_attr("element_dtype", f"only fp4_e2m1 (MXFP4) is supported, got {dtype!r}")
    scales, axis, blocked, lens, n = _block_scales(ctx, x, "axis", "block_size")
    s = ctx.add("reshape", [ctx.contiguous(ctx.broadcast_to(scales, blocked))], dims=lens)
    if lens[axis] != n:
        s = ctx.add("slice", [s], axes=[axis], starts=[0], ends=[n])
    q = ctx.convert(ctx.convert(ctx.add("div", [x, s]), "float4e2m1"), x.shape.type)
    return ctx.add("mul", [q, s])
