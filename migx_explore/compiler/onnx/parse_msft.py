"""ONNX Runtime's fused ops (com.microsoft domain) that optimized transformer exports contain,
decomposed into plain IR the way MIGraphX's parsers do: bias + GELU variants, skip / simplified
layer norms, Attention (fused QKV projection), MultiHeadAttention (separate or packed QKV / KV,
padding mask, attention bias) and GroupQueryAttention (per-entry
lengths, past key/value concatenated), MatMulNBits and MatMulBnb4 (4-bit weights unpacked at
import into uint4 / codebook-index literals and dequantized in the graph), RotaryEmbedding, NHWC
GroupNorm and NhwcConv. Semantics follow ORT's contrib op docs and are checked against onnxruntime
(tests/onnx/test_msft_quant_ops.py)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from onnx import helper

from .functions import import_expansion
from .registry import MSFT_OPS, register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result

MSFT_OPS.add("Gelu")  # com.microsoft.Gelu is the erf GELU, which the ONNX handler's default gives


def _opt(args, i):
    return args[i] if len(args) > i else None


def _gelu(ctx, x, approximate: str = "none"):
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    return import_expansion(ctx, {"x": x}, [node], ["y"], opset=20)[0]


@register("BiasAdd", msft=True, dynamic="any")
def parse_bias_add(ctx: NodeContext, args: Args) -> Result:
    x, bias, skip = args
    return ctx.add_common("add", ctx.add_common("add", x, bias), skip)


@register("BiasGelu", "FastGelu", msft=True, dynamic="any")
def parse_bias_gelu(ctx: NodeContext, args: Args) -> Result:
    x, bias = args[0], _opt(args, 1)
    if bias is not None:
        x = ctx.add_common("add", x, bias)
    return _gelu(ctx, x, "tanh" if ctx.op_type == "FastGelu" else "none")


@register("BiasSplitGelu", msft=True)
def parse_bias_split_gelu(ctx: NodeContext, args: Args) -> Result:
    x = ctx.add_common("add", args[0], args[1])
    half = x.shape.lens[-1] // 2
    nd = x.shape.ndim
    left = ctx.add("slice", [x], axes=[nd - 1], starts=[0], ends=[half])
    right = ctx.add("slice", [x], axes=[nd - 1], starts=[half], ends=[2 * half])
    return ctx.add("mul", [left, _gelu(ctx, right)])


@register("QuickGelu", msft=True, dynamic="any")
def parse_quick_gelu(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    alpha = ctx.scalar_like(float(ctx.attr("alpha", 1.702)), x)
    return ctx.add("mul", [x, ctx.add("sigmoid", [ctx.add("mul", [x, alpha])])])


def _rms_norm(ctx, x, gamma, eps: float, axis: int = -1):
    axis = axis + x.shape.ndim if axis < 0 else axis
    axes = list(range(axis, x.shape.ndim))
    ms = ctx.add("reduce_mean", [ctx.add("mul", [x, x])], axes=axes)
    inv = ctx.add("rsqrt", [ctx.add("add", [ms, ctx.scalar_like(eps, ms)])])
    return ctx.add_common("mul", ctx.add_common("mul", x, inv), gamma), inv


def layer_norm(ctx, x, gamma, beta, eps: float):
    node = helper.make_node(
        "LayerNormalization",
        ["x", "g"] + (["b"] if beta is not None else []),
        ["y", "mean", "inv"],
        axis=-1,
        epsilon=eps,
    )
    return import_expansion(ctx, {"x": x, "g": gamma, "b": beta}, [node], ["y", "mean", "inv"], opset=17)


@register("SimplifiedLayerNormalization", msft=True, dynamic="any")
def parse_simplified_layer_norm(ctx: NodeContext, args: Args) -> Result:
    y, inv = _rms_norm(ctx, args[0], args[1], float(ctx.attr("epsilon", 1e-5)), int(ctx.attr("axis", -1)))
    return [y, inv]


def _skip_sum(ctx, args, bias_index: int):
    s = ctx.add_common("add", args[0], args[1])
    bias = _opt(args, bias_index)
    return ctx.add_common("add", s, bias) if bias is not None else s


@register("SkipLayerNormalization", msft=True, dynamic="any")
def parse_skip_layer_norm(ctx: NodeContext, args: Args) -> Result:
    s = _skip_sum(ctx, args, 4)
    y, mean, inv = layer_norm(ctx, s, args[2], _opt(args, 3), float(ctx.attr("epsilon", 1e-12)))
    return [y, mean, inv, s]


@register("SkipSimplifiedLayerNormalization", msft=True, dynamic="any")
def parse_skip_simplified_layer_norm(ctx: NodeContext, args: Args) -> Result:
    s = _skip_sum(ctx, args, 3)
    y, inv = _rms_norm(ctx, s, args[2], float(ctx.attr("epsilon", 1e-12)))
    # The mean output: an RMS norm subtracts none, and ORT returns zeros of inv_std_var's shape.
    mean = (
        ctx.add("contiguous", [ctx.scalar_like(0.0, inv)]) if len(ctx.node.output) > 1 and ctx.node.output[1] else None
    )
    return [y, mean, inv, s]


# --- attention ------------------------------------------------------------------------------------
def _keep(x, lens: list[int]) -> list[int]:
    """Reshape dims for x: a dynamic x keeps its leading (batch, seq) dims as 0, "copy this dim"."""
    return [0 if x.shape.dynamic_shape and k < 2 else v for k, v in enumerate(lens)]


def _heads(ctx, x, n: int):
    """[B, S, n*d] -> [B, n, S, d]."""
    b, s, hidden = x.shape.lens
    dims = _keep(x, [b, s, n, hidden // n])
    return ctx.add("transpose", [ctx.add("reshape", [ctx.contiguous(x)], dims=dims)], permutation=[0, 2, 1, 3])


def _merge_heads(ctx, x):
    b, n, s, d = x.shape.lens
    t = ctx.contiguous(ctx.add("transpose", [x], permutation=[0, 2, 1, 3]))
    return ctx.add("reshape", [t], dims=_keep(t, [b, s, n * d]))


def _sdpa(ctx, q, k, v, scale: float, causal: bool, bias=None, allowed=None):
    """softmax(q k^T * scale [+ bias] [causal] [allowed]) v on [B, N, S, d] tensors; `allowed` is a
    bool mask broadcastable to the scores."""
    scores = ctx.add("dot", [q, ctx.add("transpose", [k], permutation=[0, 1, 3, 2])])
    scores = ctx.add("mul", [scores, ctx.scalar_like(scale, scores)])
    if bias is not None:
        scores = ctx.add_common("add", scores, bias)
    if causal and allowed is None:
        s, total = scores.shape.lens[-2:]
        # query i sits at absolute position total - s + i and sees keys up to it
        allowed = ctx.literal(np.arange(total)[None, :] <= (np.arange(s)[:, None] + total - s))
    if allowed is not None:
        mask = ctx.broadcast_to(allowed, scores)
        scores = ctx.add("where", [mask, scores, ctx.scalar_like(-np.inf, scores)])
    return ctx.add("dot", [ctx.add("softmax", [scores], axis=3), v])


def _seqlens_mask(ctx, seqlens_k, s: int, total: int, prompt: bool):
    """GQA's per-batch causal mask ([B, 1, s, total] bool) as ONNX Runtime defines it: batch b holds
    seqlens_k[b] + 1 valid keys. In a prompt (no past) query i sits at position i (a right-padded
    entry's extra queries see its valid keys only); with a past, the queries are the last s
    positions."""
    b = seqlens_k.shape.elements()
    last = ctx.add("reshape", [ctx.convert(seqlens_k, "int64")], dims=[b, 1, 1, 1])  # seqlens_k = valid - 1
    if prompt:
        rows = ctx.literal(np.arange(s, dtype=np.int64).reshape(1, 1, s, 1))
        reach = ctx.add_common("min", last, rows)
    else:
        rows = ctx.literal(np.arange(s, dtype=np.int64).reshape(1, 1, s, 1) - (s - 1))
        reach = ctx.add_common("add", last, rows)  # [B, 1, s, 1]: the last key each query sees
    keys = ctx.literal(np.arange(total, dtype=np.int64).reshape(1, 1, 1, total))
    return ctx.add("not", [ctx.add_common("greater", keys, reach)])


def _unpack(ctx, x, parts: int) -> list:
    """ORT's packed layout [B, S, N, parts, H] -> `parts` tensors [B, S, N*H]."""
    b, s, n, p, h = x.shape.lens
    if p != parts:
        raise ctx.error(f"packed input {list(x.shape.lens)}: axis 3 must be {parts}")
    return [
        ctx.add(
            "reshape", [ctx.contiguous(ctx.add("slice", [x], axes=[3], starts=[i], ends=[i + 1]))], dims=[b, s, n * h]
        )
        for i in range(parts)
    ]


@register("MultiHeadAttention", msft=True)
def parse_multi_head_attention(ctx: NodeContext, args: Args) -> Result:
    q, k, v = args[0], _opt(args, 1), _opt(args, 2)
    bias = _opt(args, 3)
    if k is None and v is None and q.shape.ndim == 5:  # packed QKV: query [B, S, N, 3, H]
        q, k, v = _unpack(ctx, q, 3)
    elif v is None and k is not None and k.shape.ndim == 5:  # packed KV: key [B, L, N, 2, H]
        k, v = _unpack(ctx, k, 2)
    if k is None or v is None or k.shape.ndim != 3 or q.shape.ndim != 3:
        raise ctx.error(
            "query, key and value must be 3-D [batch, length, hidden], or packed as QKV "
            "[batch, length, heads, 3, head_size] / KV [batch, length, heads, 2, head_size]"
        )
    pad_mask, attn_bias = _opt(args, 4), _opt(args, 5)
    if any(a is not None for a in args[6:]):
        raise ctx.error("past key/value inputs are not supported")
    if pad_mask is not None and pad_mask.shape.ndim != 2:
        raise ctx.error(f"key_padding_mask {list(pad_mask.shape.lens)}: only the [batch, kv_length] form is supported")
    n = int(ctx.attr("num_heads"))
    if bias is not None:
        dq, dk = q.shape.lens[-1], k.shape.lens[-1]
        parts = [
            ctx.add("slice", [bias], axes=[0], starts=[a], ends=[b])
            for a, b in ((0, dq), (dq, dq + dk), (dq + dk, bias.shape.lens[0]))
        ]
        q, k, v = (ctx.add_common("add", x, p) for x, p in zip((q, k, v), parts))
    d = q.shape.lens[-1] // n
    scale = float(ctx.attr("scale", 0.0)) or 1 / math.sqrt(d)
    causal = bool(ctx.attr("unidirectional", 0))
    allowed = None
    if pad_mask is not None:  # [B, L], nonzero = attend: as [B, 1, 1, L]
        b, length = pad_mask.shape.lens
        allowed = ctx.add("reshape", [ctx.convert(pad_mask, "bool")], dims=[b, 1, 1, length])
        if causal:
            s_, total = q.shape.lens[1], length
            tri = ctx.literal((np.arange(total)[None, :] <= (np.arange(s_)[:, None] + total - s_))[None, None])
            allowed = ctx.add_common("logical_and", allowed, tri)
    out = _sdpa(
        ctx, _heads(ctx, q, n), _heads(ctx, k, n), _heads(ctx, v, n), scale, causal, bias=attn_bias, allowed=allowed
    )
    return _merge_heads(ctx, out)


def ms_attention(ctx: NodeContext, args: Args) -> Result:
    """com.microsoft.Attention: x [B, S, D] @ weights [D, Dq + Dk + Dv] (+ bias) split into Q, K, V
    (qkv_hidden_sizes, default three equal parts), multi-head attention with an optional key mask
    (mask_index: [B, T] 1 = attend, or [B] valid lengths; masked scores get mask_filter_value
    added, as ORT does) and attention_bias; unidirectional is causal. No past/present state."""
    x, w, bias = args[0], args[1], _opt(args, 2)
    mask, past, attn_bias = _opt(args, 3), _opt(args, 4), _opt(args, 5)
    if past is not None or any(a is not None for a in args[6:]) or any(o for o in ctx.node.output[1:]):
        raise ctx.error("past/present key-value state is not supported")
    if x.shape.ndim != 3 or w.shape.ndim != 2:
        raise ctx.error(
            f"input {list(x.shape.lens)} must be [batch, seq, hidden] and weights "
            f"{list(w.shape.lens)} [hidden, q + k + v hidden]"
        )
    n = int(ctx.attr("num_heads"))
    total = w.shape.lens[1]
    sizes = [int(v) for v in ctx.attr("qkv_hidden_sizes", [])] or [total // 3] * 3
    if len(sizes) != 3 or sum(sizes) != total or sizes[0] != sizes[1] or any(v % n for v in sizes):
        raise ctx.bad_attr(
            "qkv_hidden_sizes",
            f"{sizes} must be 3 sizes summing to the weights' {total} columns, "
            f"q and k equal, each divisible by num_heads {n}",
        )
    if x.shape.dynamic_shape:
        qkv = ctx.add("dot", [x, ctx.add("broadcast_for_dot", [w, x])])
    else:
        qkv = ctx.add("dot", [x, ctx.broadcast_to(w, [x.shape.lens[0], *w.shape.lens])])
    if bias is not None:
        qkv = ctx.add_common("add", qkv, bias)
    edges = np.cumsum([0, *sizes])
    q, k, v = (ctx.add("slice", [qkv], axes=[2], starts=[int(a)], ends=[int(b)]) for a, b in zip(edges, edges[1:]))
    scale = float(ctx.attr("scale", 0.0)) or 1 / math.sqrt(sizes[0] // n)
    b, s = x.shape.lens[:2]
    add = attn_bias
    if mask is not None:
        keep = _key_mask(ctx, mask, b, s, s)
        fill = ctx.literal(np.float32(ctx.attr("mask_filter_value", -10000.0)), x.shape.type)
        penalty = ctx.add_common("where", keep, ctx.scalar_like(0.0, fill), fill)
        add = penalty if add is None else ctx.add_common("add", add, penalty)
    out = _sdpa(
        ctx,
        _heads(ctx, q, n),
        _heads(ctx, k, n),
        _heads(ctx, v, n),
        scale,
        bool(ctx.attr("unidirectional", 0)),
        bias=add,
    )
    return [_merge_heads(ctx, out)]


def _key_mask(ctx, mask, b: int, total: int, s: int | None = None):
    """mask_index as a bool mask broadcastable to the scores (True = attend), in ORT's forms: the
    raw [B, T] or [B, S, T] mask (1 = attend), [B] end positions (right padding), or [2B] end
    positions then start positions (keys in [start, end) attend)."""
    keys = ctx.literal(np.arange(total, dtype=np.int64).reshape(1, total))
    if mask.shape.lens == (b, total) or (s is not None and mask.shape.lens == (b, s, total)):
        keep = ctx.add_common("not", ctx.add_common("equal", mask, ctx.scalar_like(0, mask)))
        return ctx.add("unsqueeze", [keep], axes=[1] if keep.shape.ndim == 3 else [1, 2])
    if mask.shape.lens == (b,):
        ends = ctx.add("unsqueeze", [ctx.convert(mask, "int64")], axes=[1])
        keep = ctx.add_common("less", keys, ends)
    elif mask.shape.lens == (2 * b,):
        bounds = ctx.add("reshape", [ctx.convert(mask, "int64")], dims=[2, b, 1])
        ends, starts = (
            ctx.add("squeeze", [ctx.add("slice", [bounds], axes=[0], starts=[i], ends=[i + 1])], axes=[0])
            for i in (0, 1)
        )
        before_start = ctx.add_common("less", keys, starts)
        keep = ctx.add_common("logical_and", ctx.add_common("less", keys, ends), ctx.add("not", [before_start]))
    else:
        raise ctx.error(
            f"mask_index {list(mask.shape.lens)}: the forms are [batch, total_length], [batch, seq, "
            "total_length], [batch] and [2 * batch]"
        )
    return ctx.add("unsqueeze", [keep], axes=[1, 2])


def _repeat_kv(ctx, x, groups: int):
    """[B, kv, S, d] -> [B, kv*groups, S, d], each kv head shared by `groups` query heads."""
    if groups == 1:
        return x
    b, kv, s, d = x.shape.lens
    wide = ctx.broadcast_to(ctx.add("unsqueeze", [x], axes=[2]), [b, kv, groups, s, d])
    return ctx.add("reshape", [ctx.contiguous(wide)], dims=[b, kv * groups, s, d])


@register("GroupQueryAttention", msft=True)
def parse_group_query_attention(ctx: NodeContext, args: Args) -> Result:
    q, k, v = args[0], _opt(args, 1), _opt(args, 2)
    past_k, past_v = _opt(args, 3), _opt(args, 4)
    if k is None or v is None:
        raise ctx.error("packed QKV input is not supported (give key and value)")
    if int(ctx.attr("do_rotary", 0)) or int(ctx.attr("local_window_size", -1)) != -1:
        raise ctx.error("do_rotary and local_window_size are not supported")
    n, kv = int(ctx.attr("num_heads")), int(ctx.attr("kv_num_heads"))
    qh, kh, vh = _heads(ctx, q, n), _heads(ctx, k, kv), _heads(ctx, v, kv)
    prompt = past_k is None or past_k.shape.lens[2] == 0
    if not prompt:
        kh = ctx.add("concat", [past_k, kh], axis=2)
        vh = ctx.add("concat", [past_v, vh], axis=2)
    d = qh.shape.lens[-1]
    scale = float(ctx.attr("scale", 0.0)) or 1 / math.sqrt(d)
    softcap = float(ctx.attr("softcap", 0.0))
    if softcap:
        raise ctx.error("softcap is not supported")
    seqlens = _opt(args, 5)
    allowed = None if seqlens is None else _seqlens_mask(ctx, seqlens, qh.shape.lens[2], kh.shape.lens[2], prompt)
    out = _sdpa(ctx, qh, _repeat_kv(ctx, kh, n // kv), _repeat_kv(ctx, vh, n // kv), scale, True, allowed=allowed)
    return [_merge_heads(ctx, out), kh, vh]


def ms_rotary_embedding(ctx: NodeContext, args: Args) -> Result:
    """com.microsoft RotaryEmbedding(input, position_ids, cos_cache, sin_cache) as the ONNX op."""
    x, pos, cos, sin = args[:4]
    if pos.shape.elements() == 1:  # a start offset: positions offset .. offset + S - 1
        b, s = x.shape.lens[0], x.shape.lens[-2] if x.shape.ndim == 4 else x.shape.lens[1]
        ramp = ctx.literal(np.arange(s, dtype=np.int64)[None, :])
        pos = ctx.add_common(
            "add", ctx.broadcast_to(ctx.add("reshape", [ctx.convert(pos, "int64")], dims=[1, 1]), [1, s]), ramp
        )
        pos = ctx.broadcast_to(pos, [b, s])
    attrs = {"interleaved": int(ctx.attr("interleaved", 0))}
    for key in ("num_heads", "rotary_embedding_dim"):
        if ctx.attr(key, 0):
            attrs[key] = int(ctx.attr(key))
    # ORT's 4-D input is [B, N, S, H], the ONNX op's 4-D layout too: no transpose needed.
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], **attrs)
    return import_expansion(
        ctx, {"x": x, "cos": cos, "sin": sin, "pos": ctx.convert(pos, "int64")}, [node], ["y"], opset=23
    )[0]


# --- 4-bit weights ----------------------------------------------------------------------------------
def _nibbles(packed: np.ndarray, high_first: bool) -> np.ndarray:
    lo, hi = packed & 0x0F, packed >> 4
    pair = (hi, lo) if high_first else (lo, hi)
    return np.stack(pair, axis=-1).reshape(*packed.shape[:-1], -1)


def _block_expand(ctx, v, n: int, blocks: int, block: int, k: int):
    """[n * blocks] per-block values -> [n, k] (each repeated over its block)."""
    v = ctx.add("reshape", [v], dims=[n, blocks, 1])
    v = ctx.add("reshape", [ctx.contiguous(ctx.broadcast_to(v, [n, blocks, block]))], dims=[n, blocks * block])
    return ctx.add("slice", [v], axes=[1], starts=[0], ends=[k]) if blocks * block != k else v


@register("MatMulNBits", msft=True)
def parse_matmul_nbits(ctx: NodeContext, args: Args) -> Result:
    a, b, scales = args[:3]
    zp, bias = _opt(args, 3), _opt(args, 5)
    if _opt(args, 4) is not None:
        raise ctx.error("g_idx (act-order) is not supported")
    k, n, block = int(ctx.attr("K")), int(ctx.attr("N")), int(ctx.attr("block_size"))
    if int(ctx.attr("bits", 4)) != 4:
        raise ctx.bad_attr("bits", "only 4-bit weights are supported")
    blocks = -(-k // block)
    q = _nibbles(ctx.need_const(b, "B").astype(np.uint8), high_first=False).reshape(n, -1)[:, :k]
    import ml_dtypes

    wq = ctx.literal(q.astype(ml_dtypes.uint4))
    s = _block_expand(ctx, ctx.add("reshape", [scales], dims=[n * blocks]), n, blocks, block, k)
    if zp is None:
        z = np.full((n, blocks), 8, np.uint8)
    else:
        z = ctx.need_const(zp, "zero_points")
        z = (
            _nibbles(z.astype(np.uint8), high_first=False).reshape(n, -1)[:, :blocks]
            if z.dtype == np.uint8
            else z.reshape(n, blocks)
        )
    zq = _block_expand(ctx, ctx.literal(z.reshape(-1).astype(ml_dtypes.uint4)), n, blocks, block, k)
    w = ctx.add("dequantizelinear", [wq, s, zq])  # [N, K]
    node = helper.make_node("MatMul", ["a", "wt"], ["y"])
    [y] = import_expansion(ctx, {"a": a, "wt": ctx.add("transpose", [w], permutation=[1, 0])}, [node], ["y"])
    return ctx.add_common("add", y, bias) if bias is not None else y


# bitsandbytes' 4-bit codebooks (quant_type 0: FP4, 1: NF4), index = the 4-bit code.
_BNB_CODEBOOKS = {
    0: [
        0.0,
        0.0052083333,
        0.6666667,
        1.0,
        0.3333333,
        0.5,
        0.1666667,
        0.25,
        -0.0,
        -0.0052083333,
        -0.6666667,
        -1.0,
        -0.3333333,
        -0.5,
        -0.1666667,
        -0.25,
    ],
    1: [
        -1.0,
        -0.6961928009986877,
        -0.5250730514526367,
        -0.39491748809814453,
        -0.28444138169288635,
        -0.18477343022823334,
        -0.09105003625154495,
        0.0,
        0.07958029955625534,
        0.16093020141124725,
        0.24611230194568634,
        0.33791524171829224,
        0.44070982933044434,
        0.5626170039176941,
        0.7229568362236023,
        1.0,
    ],
}


@register("MatMulBnb4", msft=True)
def parse_matmul_bnb4(ctx: NodeContext, args: Args) -> Result:
    a, b, absmax = args[:3]
    k, n, block = int(ctx.attr("K")), int(ctx.attr("N")), int(ctx.attr("block_size"))
    qt = int(ctx.attr("quant_type", 1))
    if qt not in _BNB_CODEBOOKS:
        raise ctx.bad_attr("quant_type", f"must be 0 (FP4) or 1 (NF4), got {qt}")
    codes = _nibbles(ctx.need_const(b, "B").astype(np.uint8).reshape(-1), high_first=True)[: n * k]
    book = ctx.literal(np.asarray(_BNB_CODEBOOKS[qt], dtype=np.float32))
    w = ctx.add("gather", [book, ctx.literal(codes.astype(np.int32).reshape(n, k))], axis=0)
    w = ctx.convert(w, absmax.shape.type)
    blocks = -(-n * k // block)
    scale = ctx.add(
        "reshape",
        [ctx.contiguous(ctx.broadcast_to(ctx.add("reshape", [absmax], dims=[blocks, 1]), [blocks, block]))],
        dims=[blocks * block],
    )
    if blocks * block != n * k:
        scale = ctx.add("slice", [scale], axes=[0], starts=[0], ends=[n * k])
    w = ctx.add("mul", [w, ctx.add("reshape", [scale], dims=[n, k])])
    node = helper.make_node("MatMul", ["a", "wt"], ["y"])
    return import_expansion(ctx, {"a": a, "wt": ctx.add("transpose", [w], permutation=[1, 0])}, [node], ["y"])[0]


# --- NHWC ops -------------------------------------------------------------------------------------------
def _to_nchw(ctx, x):
    nd = x.shape.ndim
    return ctx.add("transpose", [x], permutation=[0, nd - 1] + list(range(1, nd - 1)))


def _to_nhwc(ctx, x):
    nd = x.shape.ndim
    return ctx.add("transpose", [x], permutation=[0] + list(range(2, nd)) + [1])


@register("NhwcConv", msft=True)
def parse_nhwc_conv(ctx: NodeContext, args: Args) -> Result:
    attrs = {a.name: helper.get_attribute_value(a) for a in ctx.node.attribute}
    bind = {"x": _to_nchw(ctx, args[0]), "w": args[1], "b": _opt(args, 2)}
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if bind["b"] is not None else []), ["y"], **attrs)
    return _to_nhwc(ctx, import_expansion(ctx, bind, [node], ["y"])[0])


@register("GroupNorm", msft=True)
def parse_contrib_group_norm(ctx: NodeContext, args: Args) -> Result:
    x, gamma, beta = args[:3]
    channels_last = int(ctx.attr("channels_last", 1))
    xc = _to_nchw(ctx, x) if channels_last else x
    node = helper.make_node(
        "GroupNormalization",
        ["x", "g", "b"],
        ["y"],
        num_groups=int(ctx.attr("groups")),
        epsilon=float(ctx.attr("epsilon", 1e-5)),
    )
    y = import_expansion(ctx, {"x": xc, "g": gamma, "b": beta}, [node], ["y"], opset=21)[0]
    if int(ctx.attr("activation", 0)):  # SiLU
        y = ctx.add("mul", [y, ctx.add("sigmoid", [y])])
    return _to_nhwc(ctx, y) if channels_last else y
