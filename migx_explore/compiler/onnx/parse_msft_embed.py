"""ONNX Runtime's com.microsoft embedding ops. EmbedLayerNormalization, what its transformers optimizer
(`optimize_model(model_type="bert")`) fuses a BERT's embeddings into, decomposed into plain IR:

    embedding_sum = word[input_ids] + position[position_ids or 0..S-1] (+ segment[segment_ids])
    output        = LayerNormalization(embedding_sum) * gamma + beta     (epsilon, default 1e-12)
    mask_index    = sum(mask, axis=1) as int32 (zeros without a mask)   (mask_index_type=1)

Inputs: input_ids, segment_ids?, word_embedding, position_embedding, segment_embedding?, gamma,
beta, mask?, position_ids?; outputs: output, mask_index, embedding_sum?.

GatherBlockQuantized (a block-quantized embedding table) is dequantized at import, then gathered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .parse_msft import layer_norm
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _opt(args, i):
    return args[i] if len(args) > i else None


def _need(ctx, args, required: dict[int, str]) -> None:
    # com.microsoft ops have no schema here, so the arity check cannot tell which inputs may be empty
    for k, name in required.items():
        if args[k] is None:
            raise ctx.error(f"input {k} ({name!r}) is required but the node leaves it empty")


def _table_rows(ctx, table, ids):
    return ctx.add("gather", [table, ids], axis=0)


@register("EmbedLayerNormalization", msft=True, dynamic="batch")
def parse_embed_layer_norm(ctx: NodeContext, args: Args) -> Result:
    _need(ctx, args, {0: "input_ids", 2: "word_embedding", 3: "position_embedding", 5: "gamma", 6: "beta"})
    ids, segment_ids, word, position = args[0], _opt(args, 1), args[2], args[3]
    segment, gamma, beta, mask, position_ids = _opt(args, 4), args[5], args[6], _opt(args, 7), _opt(args, 8)
    if ids.shape.ndim != 2:
        raise ctx.error(f"input_ids must be [batch, sequence], got {list(ids.shape.lens)}")
    batch, seq = ids.shape.lens
    total = _table_rows(ctx, word, ids)
    if position_ids is None:
        if seq > position.shape.lens[0]:
            raise ctx.error(f"sequence length {seq} exceeds the {position.shape.lens[0]} position embeddings")
        pos = ctx.add("slice", [position], axes=[0], starts=[0], ends=[seq])
    else:
        pos = _table_rows(ctx, position, position_ids)
    total = ctx.add_common("add", total, pos)
    if segment_ids is not None and segment is not None:
        total = ctx.add_common("add", total, _table_rows(ctx, segment, segment_ids))
    y, _, _ = layer_norm(ctx, total, gamma, beta, float(ctx.attr("epsilon", 1e-12)))
    if int(ctx.attr("mask_index_type", 1)) == 0:
        mask_index = None
    elif mask is None:
        mask_index = ctx.literal(np.zeros([batch], np.int32))
    else:
        summed = ctx.add("reduce_sum", [ctx.convert(mask, "int32")], axes=[1])
        mask_index = ctx.add("squeeze", [summed], axes=[1])
    return [y, mask_index, total]


def _unpack4(a: np.ndarray) -> np.ndarray:
    """uint8 holding two 4-bit values along the last axis, low nibble first."""
    return np.stack([a & 15, a >> 4], -1).reshape(*a.shape[:-1], a.shape[-1] * 2)


@register("GatherBlockQuantized", msft=True)
def parse_gather_block_quantized(ctx: NodeContext, args: Args) -> Result:
    """com.microsoft.GatherBlockQuantized (a quantized embedding table, as ORT's quantizers and
    model builder write it): Gather from `data` dequantized per block of `block_size` along its
    last axis, (q - zero_point) * scale; uint8 data holds 4-bit values in pairs (low nibble
    first) or 8-bit ones; the zero point defaults to 2^(bits-1). The table is a constant, so it is
    dequantized at import into a literal and the lookup is a plain gather."""
    _need(ctx, args, {0: "data", 1: "indices", 2: "scales"})
    data = ctx.need_const(args[0], "data")
    scales = ctx.need_const(args[2], "scales")
    zp = ctx.need_const(args[3], "zero_points") if _opt(args, 3) is not None else None
    bits, block = int(ctx.attr("bits", 4)), int(ctx.attr("block_size", 128))
    gather_axis, quantize_axis = int(ctx.attr("gather_axis", 0)), int(ctx.attr("quantize_axis", 1))
    if data.dtype != np.uint8 or bits not in (4, 8):
        raise ctx.error(f"data of type {data.dtype} with bits={bits}: uint8 data with bits 4 or 8 is supported")
    if quantize_axis % data.ndim != data.ndim - 1:
        raise ctx.bad_attr("quantize_axis", f"{quantize_axis}: only the last axis of the data is supported")
    q = (_unpack4(data) if bits == 4 else data).astype(np.int64)
    k = q.shape[-1]
    ctx.check_size(q.shape, scales.dtype.itemsize)
    if zp is None:
        zero = np.full(scales.shape, 1 << (bits - 1), np.int64)
    else:
        zero = (_unpack4(zp) if bits == 4 else zp).astype(np.int64)[..., : scales.shape[-1]]
    if scales.shape[-1] * block < k or zero.shape != scales.shape:
        raise ctx.error(
            f"scales {list(scales.shape)} / zero points do not cover data of {k} values per row in blocks of {block}"
        )
    per_value = np.repeat(scales, block, axis=-1)[..., :k]
    table = (q - np.repeat(zero, block, axis=-1)[..., :k]) * per_value
    return ctx.add("gather", [ctx.literal(table.astype(scales.dtype)), args[1]], axis=gather_axis)
