"""Input counts checked before any handler runs, so a malformed node is refused with a message
naming it instead of an IndexError deep in its handler.

For ONNX's own domain the counts come from the operator schema of the model's opset (min / max
inputs, and which positional inputs may not be left empty); onnx.checker checks the same on the
main graph, but not on nodes it never sees (expanded function bodies, a model read with the checker
relaxed). For com.microsoft ops, which the installed onnx has no schema for, the minimum is
declared here from ONNX Runtime's contrib schemas (its ContribOperators.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext

# com.microsoft op -> the fewest inputs a valid node has (optional inputs in between count as
# present: they are given as empty names).
MSFT_MIN_INPUTS: dict[str, int] = {
    "Attention": 2, "BiasAdd": 3, "BiasGelu": 2, "BiasSplitGelu": 2, "FastGelu": 1, "Gelu": 1,
    "GroupNorm": 3, "GroupQueryAttention": 7, "MatMulBnb4": 3, "MatMulIntegerToFloat": 4, "MatMulNBits": 3,
    "MultiHeadAttention": 1, "NhwcConv": 2, "QLinearAdd": 7, "QLinearAveragePool": 4, "QLinearConcat": 3,
    "QLinearGlobalAveragePool": 4, "QLinearLeakyRelu": 4, "QLinearMul": 7, "QLinearSigmoid": 4, "QuickGelu": 1,
    "RotaryEmbedding": 4, "SimplifiedLayerNormalization": 2, "SkipLayerNormalization": 3,
    "SkipSimplifiedLayerNormalization": 3,
}
_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single


def _schema(node: onnx.NodeProto, opset: int) -> onnx.defs.OpSchema | None:
    if node.domain not in ("", "ai.onnx"):
        return None
    try:
        return onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


def check_inputs(ctx: NodeContext, args: list) -> None:
    """Refuse a node with too few or too many inputs, or an empty required one (ImportError_)."""
    node = ctx.node
    n = len(args)
    schema = _schema(node, ctx.opset)
    if schema is None:
        low = MSFT_MIN_INPUTS.get(node.op_type, 0)
        if n < low:
            raise ctx.error(f"takes at least {low} inputs, got {n}")
        return
    low, high = schema.min_input, schema.max_input
    if not low <= n <= high:
        want = f"{low}" if low == high else f"{low} to {high}" if high < 2 ** 31 - 1 else f"at least {low}"
        raise ctx.error(f"takes {want} inputs, got {n}")
    formals = list(schema.inputs)
    for k, a in enumerate(args):
        formal = formals[min(k, len(formals) - 1)] if formals else None
        if a is None and formal is not None and formal.option == _SINGLE:
            raise ctx.error(f"input {k} ({formal.name!r}) is required but the node leaves it empty")


__all__ = ["MSFT_MIN_INPUTS", "check_inputs"]
