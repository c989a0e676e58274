"""The remaining MIGraphX-parsed ops: ConstantFill and ImageScaler (legacy Caffe2 exports),
ReverseSequence, Unique, ATen's embedding_bag, the Random* generators and Multinomial.

Random ops are deterministic here: the sample is drawn at import into a literal (as MIGraphX's
parser does) from numpy's RandomState seeded with the node's `seed` attribute, the generator and
draws ONNX's reference implementation uses, so a seeded node gives the same numbers as
onnx.reference; without a seed we use 0 rather than a fresh one. Multinomial keeps its logits
input live: its uniform draws are such a literal, and the sampling (inverse CDF through a prefix
sum) is plain IR.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from onnx import helper

from .. import dtypes
from .functions import import_expansion
from .registry import register
from .tensors import ir_type

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


@register("ConstantFill")
def parse_constant_fill(ctx: NodeContext, args: Args) -> Result:
    t = ir_type(ctx.attr("dtype", 1), f"node {ctx.name} attribute 'dtype'")
    if ctx.attr("input_as_shape", 0):
        shape = ctx.const_ints(args[0] if args else None, "input")
    else:
        shape = list(ctx.attr("shape", []))
    shape += list(ctx.attr("extra_shape", []))
    return ctx.literal(np.full(shape, ctx.attr("value", 0.0)), t)


@register("ImageScaler")
def parse_image_scaler(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    scale = ctx.scalar_like(float(ctx.attr("scale", 1.0)), x)
    bias = np.asarray(ctx.attr("bias", []), dtype=x.shape.dtype.np_dtype)
    y = ctx.add("mul", [x, scale])
    if bias.size:
        y = ctx.add("add", [y, ctx.add("broadcast", [ctx.literal(bias)], axis=1, out_lens=x.shape.lens)])
    return y


@register("ReverseSequence")
def parse_reverse_sequence(ctx: NodeContext, args: Args) -> Result:
    x = args[0]
    lens = ctx.const_ints(args[1], "sequence_lens")
    b_axis, t_axis = int(ctx.attr("batch_axis", 1)), int(ctx.attr("time_axis", 0))
    steps, batch = x.shape.lens[t_axis], x.shape.lens[b_axis]
    if len(lens) != batch:
        raise ctx.error(f"sequence_lens has {len(lens)} entries for a batch of {batch}")
    t = np.arange(steps)[:, None]
    n = np.asarray(lens)[None, :]
    src = np.where(t < n, n - 1 - t, t)  # [time, batch]: where each output step reads from
    if b_axis < t_axis:
        src = src.T
    shape = [1] * x.shape.ndim
    shape[t_axis], shape[b_axis] = steps, batch
    idx = np.broadcast_to(src.reshape(shape), x.shape.lens).astype(np.int64)
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=t_axis)
    return import_expansion(ctx, {"x": x, "i": ctx.literal(idx)}, [node], ["y"])[0]


@register("Unique")
def parse_unique(ctx: NodeContext, args: Args) -> Result:
    """The output length depends on the values, so the input must be known at import time."""
    x = ctx.need_const(args[0], "X")
    axis = ctx.attr("axis", None)
    if axis is not None:
        axis = int(axis) + x.ndim if int(axis) < 0 else int(axis)
    flat = x.reshape(-1) if axis is None else x
    y, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    if not ctx.attr("sorted", 1):  # order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = y[order] if axis is None else np.take(y, order, axis=axis)
        first, counts, inverse = first[order], counts[order], rank[inverse.reshape(-1)]
    return [
        ctx.literal(y),
        ctx.literal(first.astype(np.int64)),
        ctx.literal(inverse.reshape(-1).astype(np.int64)),
        ctx.literal(counts.astype(np.int64)),
    ]


@register("ATen")
def parse_aten(ctx: NodeContext, args: Args) -> Result:
    name = ctx.attr("operator", "")
    if "embedding_bag" not in name:
        raise ctx.bad_attr("operator", f"only embedding_bag is supported, got {name!r}")
    if args[2].shape.elements() != 1:
        raise ctx.error("embedding_bag: only a single bag (offsets of size 1) is supported")
    rows = ctx.add("gather", [args[0], args[1]], axis=0)
    mode = int(ctx.attr("mode", 0))
    reduce = {0: "reduce_sum", 1: "reduce_mean", 2: "reduce_max"}.get(mode)
    if reduce is None:
        raise ctx.bad_attr("mode", f"must be 0 (sum), 1 (mean) or 2 (max), got {mode}")
    return ctx.add(reduce, [rows], axes=[0])


# --- random ---------------------------------------------------------------------------------------
def random_state(ctx) -> np.random.RandomState:
    seed = ctx.attr("seed", None)
    return np.random.RandomState(0 if seed is None or np.isnan(seed) else int(seed))


def _random_shape_type(ctx, args) -> tuple[list[int], str]:
    like = ctx.op_type.endswith("Like")
    if like:
        x = args[0]
        t = ir_type(ctx.attr("dtype"), "dtype") if ctx.has_attr("dtype") else x.shape.type
        return list(x.shape.lens), t
    return list(ctx.attr("shape")), ir_type(ctx.attr("dtype", 1), f"node {ctx.name} attribute 'dtype'")


@register("RandomNormal", "RandomNormalLike")
def parse_random_normal(ctx: NodeContext, args: Args) -> Result:
    shape, t = _random_shape_type(ctx, args)
    npt = dtypes.np_dtype(t)
    draw = np.asarray(random_state(ctx).randn(*shape))  # asarray: a rank-0 draw is a Python float
    v = draw.astype(npt) * npt.type(ctx.attr("scale", 1.0)) + npt.type(ctx.attr("mean", 0.0))
    return ctx.literal(v, t)


@register("RandomUniform", "RandomUniformLike")
def parse_random_uniform(ctx: NodeContext, args: Args) -> Result:
    shape, t = _random_shape_type(ctx, args)
    npt = dtypes.np_dtype(t)
    low, high = npt.type(ctx.attr("low", 0.0)), npt.type(ctx.attr("high", 1.0))
    return ctx.literal(np.asarray(random_state(ctx).rand(*shape)).astype(npt) * (high - low) + low, t)


@register("Multinomial")
def parse_multinomial(ctx: NodeContext, args: Args) -> Result:
    """Sample class indices from unnormalized log-probabilities [batch, classes]: the index of the
    first cumulative probability above u * total, u drawn uniformly (a literal)."""
    x = args[0]
    batch, classes = x.shape.lens
    n = int(ctx.attr("sample_size", 1))
    t = ir_type(ctx.attr("dtype", 6), f"node {ctx.name} attribute 'dtype'")
    mx = ctx.broadcast_to(ctx.add("reduce_max", [x], axes=[1]), x)
    cdf = ctx.add("prefix_scan_sum", [ctx.add("exp", [ctx.add("sub", [x, mx])])], axis=1)
    total = ctx.add("slice", [cdf], axes=[1], starts=[classes - 1], ends=[classes])  # [batch, 1]
    u = ctx.literal(random_state(ctx).rand(batch, n, 1), x.shape.type)
    target = ctx.add("mul", [u, ctx.broadcast_to(ctx.add("unsqueeze", [total], axes=[1]), [batch, n, 1])])
    wide = [batch, n, classes]
    below = ctx.add(
        "less", [ctx.broadcast_to(ctx.add("unsqueeze", [cdf], axes=[1]), wide), ctx.broadcast_to(target, wide)]
    )
    count = ctx.add("reduce_sum", [ctx.convert(below, "int32")], axes=[2])  # classes whose cdf < target
    count = ctx.add("squeeze", [count], axes=[2])
    last = ctx.literal(np.full([batch, n], classes - 1, dtype=dtypes.np_dtype("int32")))
    return ctx.convert(ctx.add("min", [count, last]), t)


@register("Compress")
def parse_compress(ctx: NodeContext, args: Args) -> Result:
    """Keep the slices where `condition` holds: a gather of the selected indices, so the condition
    must be known at import (the output length depends on it)."""
    x = args[0]
    cond = ctx.need_const(args[1], "condition").reshape(-1).astype(bool)
    axis = ctx.attr("axis", None)
    if axis is None:
        x = ctx.add("reshape", [ctx.contiguous(x)], dims=[-1])
        axis = 0
    axis = int(axis) + x.shape.ndim if int(axis) < 0 else int(axis)
    keep = np.flatnonzero(cond[: x.shape.lens[axis]])
    return ctx.add("gather", [x, ctx.literal(keep.astype(np.int64))], axis=axis)
