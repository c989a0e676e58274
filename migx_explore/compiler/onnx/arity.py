"""Input counts checked before any handler runs, so a malformed node is refused with a message
naming it instead of an IndexError deep in its handler.

For ONNX's own domain the counts come from the operator schema of the model's opset (min / max
inputs, and which positional inputs may not be left empty); onnx.checker checks the same on the
main graph, but not on nodes it never sees (expanded function bodies, a model read with the checker
relaxed). For com.microsoft ops, which the installed onnx has no schema for, the minimum is
declared here from ONNX Runtime's contrib schemas (its ContribOperators.md); likewise for the few
legacy and extension ops no schema describes.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import onnx

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext

# com.microsoft op -> the fewest inputs a valid node has (optional inputs in between count as
# present: they are given as empty names).
MSFT_MIN_INPUTS: dict[str, int] = {
    "Attention": 2,
    "BiasAdd": 3,
    "BiasGelu": 2,
    "BiasSplitGelu": 2,
    "EmbedLayerNormalization": 7,
    "FastGelu": 1,
    "GatherBlockQuantized": 3,
    "Gelu": 1,
    "GroupNorm": 3,
    "GroupQueryAttention": 7,
    "MatMulBnb4": 3,
    "MatMulIntegerToFloat": 4,
    "MatMulNBits": 3,
    "MultiHeadAttention": 1,
    "NhwcConv": 2,
    "QLinearAdd": 7,
    "QLinearAveragePool": 4,
    "QLinearConcat": 5,
    "QLinearGlobalAveragePool": 4,
    "QLinearLeakyRelu": 4,
    "QLinearMul": 7,
    "QLinearSigmoid": 4,
    "QuickGelu": 1,
    "QGemm": 6,
    "QLinearSoftmax": 4,
    "QLinearWhere": 8,
    "RotaryEmbedding": 4,
    "SimplifiedLayerNormalization": 2,
    "SkipLayerNormalization": 3,
    "SkipSimplifiedLayerNormalization": 3,
}
# ... and the most, for those with a fixed list.
MSFT_MAX_INPUTS: dict[str, int] = {
    "BiasAdd": 3,
    "BiasGelu": 2,
    "BiasSplitGelu": 2,
    "EmbedLayerNormalization": 9,
    "FastGelu": 2,
    "GatherBlockQuantized": 4,
    "Gelu": 1,
    "GroupNorm": 3,
    "NhwcConv": 3,
    "QuickGelu": 1,
    "QGemm": 9,
    "QLinearSoftmax": 5,
    "QLinearWhere": 9,
}
# Ops the installed onnx has no schema for at all (legacy ONNX ops removed from the standard,
# MIGraphX's own extensions): the fewest inputs their handlers read.
LEGACY_MIN_INPUTS: dict[str, int] = {
    "ImageScaler": 1,
    "DynamicScale": 1,
    "MXFixNeuron": 1,
    "MXQuantizeDequantize": 1,
}
_OPTIONAL = onnx.defs.OpSchema.FormalParameterOption.Optional
_ANY = (0, 99)
_RNN = {0: 3, 1: 3, 2: 3, 3: 2, 4: 1, 5: 3, 6: 3, 7: 2}  # X, W, R, B, sequence_lens, initial_h, initial_c, P
# Input ranks the handlers rely on (input index -> exact rank, or an inclusive (min, max) range),
# checked with the counts; an input absent or left empty is not checked.
INPUT_RANKS: dict[str, dict[int, int | tuple[int, int]]] = {
    "LSTM": _RNN,
    "GRU": _RNN,
    "RNN": _RNN,
    "Slice": {0: (1, 99), 1: 1, 2: 1, 3: 1, 4: 1},
    "Split": {0: (1, 99), 1: 1},
    "GatherElements": {0: (1, 99), 1: (1, 99)},
    "ReverseSequence": {0: (2, 99), 1: 1},
    "MatMulInteger": {0: (1, 99), 1: (1, 99)},
    "Multinomial": {0: 2},
    "NonZero": {0: (1, 99)},
    "NonMaxSuppression": {0: 3, 1: 3},
    "AffineGrid": {0: 3, 1: 1},
    "BiasSplitGelu": {0: 3, 1: 1},
    # input_ids, segment_ids, the three tables, gamma, beta, mask, position_ids
    "EmbedLayerNormalization": {0: 2, 1: 2, 2: 2, 3: 2, 4: 2, 5: 1, 6: 1, 7: 2, 8: (1, 2)},
    "GatherBlockQuantized": {0: (1, 99)},
    "QGemm": {0: 2, 3: 2},
    "QLinearSoftmax": {0: (1, 99)},
    "DynamicScale": {0: (1, 99)},
    "MXFixNeuron": {0: (1, 99)},
    "MXQuantizeDequantize": {0: (1, 99)},
}


def _schema(node: onnx.NodeProto, opset: int) -> onnx.defs.OpSchema | None:
    if node.domain not in ("", "ai.onnx"):
        return None
    return _onnx_schema(node.op_type, opset)


@functools.cache
def _onnx_schema(op_type: str, opset: int) -> onnx.defs.OpSchema | None:
    # once per op and opset: a 100,000-node graph asked 100,000 times
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


@functools.cache
def _formals(op_type: str, opset: int) -> tuple:
    schema = _onnx_schema(op_type, opset)
    return tuple(schema.inputs) if schema is not None else ()


def check_inputs(ctx: NodeContext, args: list) -> None:
    """Refuse a node with too few or too many inputs, or an empty required one (ImportError_)."""
    node = ctx.node
    n = len(args)
    schema = _schema(node, ctx.opset)
    if schema is None:
        low = MSFT_MIN_INPUTS.get(node.op_type) or LEGACY_MIN_INPUTS.get(node.op_type, 0)
        if n < low:
            raise ctx.error(f"takes at least {low} inputs, got {n}")
        high = MSFT_MAX_INPUTS.get(node.op_type)
        if high is not None and n > high:
            raise ctx.error(f"takes at most {high} inputs, got {n}")
        _check_ranks(ctx, args, [])
        return
    low, high = schema.min_input, schema.max_input
    if not low <= n <= high:
        want = f"{low}" if low == high else f"{low} to {high}" if high < 2**31 - 1 else f"at least {low}"
        raise ctx.error(f"takes {want} inputs, got {n}")
    formals = _formals(node.op_type, ctx.opset)
    for k, a in enumerate(args):
        formal = formals[min(k, len(formals) - 1)] if formals else None
        # Only an optional input may be left empty (a variadic one, Sum's or Concat's, may not).
        if a is None and formal is not None and formal.option != _OPTIONAL:
            raise ctx.error(f"input {k} ({formal.name!r}) is required but the node leaves it empty")
    _check_ranks(ctx, args, [f.name for f in formals])


def _check_ranks(ctx: NodeContext, args: list, names: list[str]) -> None:
    for k, want in INPUT_RANKS.get(ctx.node.op_type, {}).items():
        a = args[k] if k < len(args) else None
        if a is None or a.shape.is_tuple:
            continue
        lo, hi = (want, want) if isinstance(want, int) else want
        r = a.shape.ndim
        if not lo <= r <= hi:
            rule = f"rank {lo}" if lo == hi else f"rank >= {lo}" if hi == _ANY[1] else f"rank {lo} to {hi}"
            name = f" ({names[k]!r})" if k < len(names) else ""
            raise ctx.error(f"input {k}{name} must have {rule}, got rank {r} ({list(a.shape.lens)})")


__all__ = ["INPUT_RANKS", "LEGACY_MIN_INPUTS", "MSFT_MAX_INPUTS", "MSFT_MIN_INPUTS", "check_inputs"]
