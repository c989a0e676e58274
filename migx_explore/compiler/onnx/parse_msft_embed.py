"""ONNX Runtime's com.microsoft EmbedLayerNormalization, what its transformers optimizer
(`optimize_model(model_type="bert")`) fuses a BERT's embeddings into, decomposed into plain IR:

    embedding_sum = word[input_ids] + position[position_ids or 0..S-1] (+ segment[segment_ids])
    output        = LayerNormalization(embedding_sum) * gamma + beta     (epsilon, default 1e-12)
    mask_index    = sum(mask, axis=1) as int32 (zeros without a mask)   (mask_index_type=1)

Inputs: input_ids, segment_ids?, word_embedding, position_embedding, segment_embedding?, gamma,
beta, mask?, position_ids?; outputs: output, mask_index, embedding_sum?.
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


def _table_rows(ctx, table, ids):
    return ctx.add("gather", [table, ids], axis=0)


@register("EmbedLayerNormalization", msft=True)
def parse_embed_layer_norm(ctx: NodeContext, args: Args) -> Result:
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
