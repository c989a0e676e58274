"""Conv, ConvTranspose, pooling, Gemm and MatMul, decomposed the MIGraphX way: a conv bias becomes
broadcast + add, Gemm becomes transposes + dot + alpha/beta scaling + broadcast add, and MatMul
broadcasts batch dims explicitly (1-D operands through unsqueeze/squeeze)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _spatial_attr(ctx, key: str, nd: int, default: int) -> list[int]:
    v = ctx.attr(key, None)
    v = [default] * nd if not v else [int(x) for x in v]
    if len(v) != nd:
        raise ctx.bad_attr(key, f"needs {nd} values for {nd} spatial dims, got {v}")
    return v


def _pads(ctx, nd: int, in_lens, kernel, strides, dilations) -> list[int]:
    """ONNX pads (begins then ends), with auto_pad SAME_UPPER/SAME_LOWER/VALID resolved."""
    auto = ctx.attr_choice("auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"), "NOTSET")
    if auto == "VALID":
        return [0] * (2 * nd)
    if auto.startswith("SAME"):
        begins, ends = [], []
        for n, k, s, d in zip(in_lens, kernel, strides, dilations):
            out = -(-n // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
            small = total // 2
            begins.append(small if auto == "SAME_UPPER" else total - small)
            ends.append(total - begins[-1])
        return begins + ends
    pads = ctx.attr("pads", None)
    pads = [0] * (2 * nd) if not pads else [int(p) for p in pads]
    if len(pads) != 2 * nd:
        raise ctx.bad_attr("pads", f"needs {2 * nd} values (begins then ends), got {pads}")
    return pads


def _compact(pads: list[int]) -> list[int]:
    """MIGraphX prints symmetric padding with one value per spatial dim."""
    nd = len(pads) // 2
    return pads[:nd] if pads[:nd] == pads[nd:] else pads


def _add_bias(ctx, y, bias):
    if bias is None:
        return y
    if y.shape.dynamic_shape:  # [C] -> [1, C, 1, ...], then to y's runtime shape
        u = ctx.add("unsqueeze", [bias], axes=[0, *range(2, y.shape.ndim)])
        return ctx.add("add", [y, ctx.broadcast_to(u, y)])
    b = ctx.add("broadcast", [bias], axis=1, out_lens=y.shape.lens)
    return ctx.add("add", [y, b])


@register("Conv")
def parse_conv(ctx: NodeContext, args: Args) -> Result:
    x, w = args[0], args[1]
    nd = x.shape.ndim - 2
    if nd < 1:
        raise ctx.error(f"input {list(x.shape.lens)} needs rank >= 3")
    strides = _spatial_attr(ctx, "strides", nd, 1)
    dil = _spatial_attr(ctx, "dilations", nd, 1)
    kernel = list(w.shape.lens[2:])
    pads = _pads(ctx, nd, x.shape.lens[2:], kernel, strides, dil)
    y = ctx.add("convolution", [x, w], padding=_compact(pads), stride=strides, dilation=dil, group=ctx.attr("group", 1))
    return _add_bias(ctx, y, args[2] if len(args) > 2 else None)


@register("ConvTranspose")
def parse_conv_transpose(ctx: NodeContext, args: Args) -> Result:
    x, w = args[0], args[1]
    nd = x.shape.ndim - 2
    strides = _spatial_attr(ctx, "strides", nd, 1)
    dil = _spatial_attr(ctx, "dilations", nd, 1)
    out_pad = _spatial_attr(ctx, "output_padding", nd, 0)
    kernel = list(w.shape.lens[2:])
    full = [(n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(x.shape.lens[2:], strides, kernel, dil)]
    auto = ctx.attr_choice("auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"), "NOTSET")
    out_shape = ctx.attr("output_shape", None)
    if out_shape or auto.startswith("SAME"):
        # ONNX: total padding from the requested output size; SAME_UPPER puts the odd one at the end.
        target = [int(v) for v in out_shape[-nd:]] if out_shape else [n * s for n, s in zip(x.shape.lens[2:], strides)]
        total = [f + op - t for f, op, t in zip(full, out_pad, target)]
        if auto == "SAME_UPPER":
            begins = [t // 2 for t in total]
        else:
            begins = [t - t // 2 for t in total]
        ends = [t - b - op for t, b, op in zip(total, begins, out_pad)]
    else:
        pads = [0] * (2 * nd) if auto == "VALID" else _pads(ctx, nd, x.shape.lens[2:], kernel, strides, dil)
        begins, ends = pads[:nd], [e - op for e, op in zip(pads[nd:], out_pad)]
    # convolution_backwards crops non-negative padding; output_padding / a larger output_shape
    # need room beyond the full result, which holds zeros (no input contributes there).
    crop_b, crop_e = [max(b, 0) for b in begins], [max(e, 0) for e in ends]
    y = ctx.add(
        "convolution_backwards",
        [x, w],
        padding=_compact(crop_b + crop_e),
        stride=strides,
        dilation=dil,
        group=ctx.attr("group", 1),
    )
    grow = [max(-b, 0) for b in begins] + [max(-e, 0) for e in ends]
    if any(grow):
        y = ctx.add("pad", [y], pads=[0, 0] + grow[:nd] + [0, 0] + grow[nd:])
    return _add_bias(ctx, y, args[2] if len(args) > 2 else None)


def _pool(ctx, args, mode: str):
    x = args[0]
    nd = x.shape.ndim - 2
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.error("the Indices output of MaxPool is not supported")
    kernel = _spatial_attr(ctx, "kernel_shape", nd, 1)
    strides = _spatial_attr(ctx, "strides", nd, 1)
    dil = _spatial_attr(ctx, "dilations", nd, 1)
    pads = _pads(ctx, nd, x.shape.lens[2:], kernel, strides, dil)
    if ctx.attr("storage_order", 0):
        raise ctx.bad_attr("storage_order", "column-major indices are not supported")
    extra = {}
    if mode == "lpnorm":
        extra["lp_order"] = ctx.attr("p", 2)
    if mode == "average":
        extra["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    return ctx.add(
        "pooling",
        [x],
        mode=mode,
        padding=_compact(pads),
        stride=strides,
        lengths=kernel,
        dilations=dil,
        ceil_mode=bool(ctx.attr("ceil_mode", 0)),
        **extra,
    )


@register("MaxPool")
def parse_max_pool(ctx: NodeContext, args: Args) -> Result:
    return _pool(ctx, args, "max")


@register("AveragePool")
def parse_average_pool(ctx: NodeContext, args: Args) -> Result:
    return _pool(ctx, args, "average")


@register("LpPool")
def parse_lp_pool(ctx: NodeContext, args: Args) -> Result:
    return _pool(ctx, args, "lpnorm")


@register("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def parse_global_pool(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    nd = x.shape.ndim - 2
    mode = {"GlobalAveragePool": "average", "GlobalMaxPool": "max", "GlobalLpPool": "lpnorm"}[ctx.op_type]
    extra = {"lp_order": ctx.attr("p", 2)} if mode == "lpnorm" else {}
    return ctx.add(
        "pooling",
        [x],
        mode=mode,
        padding=[0] * nd,
        stride=[1] * nd,
        lengths=list(x.shape.lens[2:]),
        dilations=[1] * nd,
        **extra,
    )


@register("LRN")
def parse_lrn(ctx: NodeContext, args: Args) -> Result:
    return ctx.add(
        "lrn", [args[0]], alpha=ctx.attr("alpha"), beta=ctx.attr("beta"), bias=ctx.attr("bias"), size=ctx.attr("size")
    )


@register("Gemm")
def parse_gemm(ctx: NodeContext, args: Args) -> Result:
    a, b = args[0], args[1]
    c = args[2] if len(args) > 2 else None
    alpha, beta = ctx.attr("alpha"), ctx.attr("beta")
    if a.shape.ndim != 2 or b.shape.ndim != 2:
        raise ctx.error(f"A {list(a.shape.lens)} and B {list(b.shape.lens)} must be 2-D")
    if ctx.attr("transA", 0):
        a = ctx.add("transpose", [a], permutation=[1, 0])
    if ctx.attr("transB", 0):
        b = ctx.add("transpose", [b], permutation=[1, 0])
    y = ctx.add("dot", [a, b])
    if alpha != 1.0:
        y = ctx.add("mul", [y, ctx.scalar_like(alpha, y)])
    if c is not None and beta != 0.0:
        cb = ctx.broadcast_to(c, y)
        if beta != 1.0:
            cb = ctx.add("mul", [cb, ctx.scalar_like(beta, cb)])
        y = ctx.add("add", [y, cb])
    return y


def matmul(ctx, a, b):
    """numpy matmul semantics on IR ops: 1-D operands promoted, batch dims broadcast explicitly."""
    squeeze = []
    if a.shape.ndim == 0 or b.shape.ndim == 0:
        raise ctx.error("MatMul operands must have rank >= 1")
    if a.shape.ndim == 1:
        a = ctx.add("unsqueeze", [a], axes=[0])
        squeeze.append(-2)
    if b.shape.ndim == 1:
        b = ctx.add("unsqueeze", [b], axes=[1])
        squeeze.append(-1)
    from .context import common_lens

    if a.shape.dynamic_shape or b.shape.dynamic_shape:  # batch dims follow the runtime shapes
        a, b = _dot_batch(ctx, a, b), _dot_batch(ctx, b, a)
        return _squeezed(ctx, ctx.add("dot", [a, b]), squeeze)
    batch = common_lens([a.shape.lens[:-2], b.shape.lens[:-2]])
    if batch is None:
        raise ctx.error(f"batch dims of {list(a.shape.lens)} and {list(b.shape.lens)} do not broadcast")
    a = ctx.broadcast_to(a, batch + a.shape.lens[-2:])
    b = ctx.broadcast_to(b, batch + b.shape.lens[-2:])
    return _squeezed(ctx, ctx.add("dot", [a, b]), squeeze)


def _dot_batch(ctx, x, other):
    """x with its batch dims broadcast to those of x and other (broadcast_for_dot, unless they
    already are)."""
    from ..op import Op, compute_shape

    want = compute_shape(Op("broadcast_for_dot"), [x.shape, other.shape])
    if want.ndim == x.shape.ndim and want.dyn_dims == x.shape.dyn_dims and want.lens == x.shape.lens:
        return x
    return ctx.add("broadcast_for_dot", [x, other])


def _squeezed(ctx, y, squeeze: list[int]):
    if squeeze:
        nd = y.shape.ndim
        y = ctx.add("squeeze", [y], axes=sorted(nd + s for s in squeeze))
    return y


@register("MatMul")
def parse_matmul(ctx: NodeContext, args: Args) -> Result:
    return matmul(ctx, args[0], args[1])
