"""Ops imported by expanding the function body their ONNX schema defines (functions.py): the
opset-23 Attention and RotaryEmbedding, the two losses, DynamicQuantizeLinear and newer ops that
ONNX defines in terms of older ones (SwiGLU, LinearAttention, CausalConvWithState, AffineGrid, the
signal windows). ONNX Runtime's com.microsoft Attention and RotaryEmbedding have other
inputs and are handled in parse_msft.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .functions import expand_function
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result

EXPANDED_OPS = (
    "SoftmaxCrossEntropyLoss",
    "NegativeLogLikelihoodLoss",
    "DynamicQuantizeLinear",
    "SwiGLU",
    "CausalConvWithState",
    "LinearAttention",
    "AffineGrid",
    "BlackmanWindow",
    "HammingWindow",
    "HannWindow",
)


WINDOWS = ("BlackmanWindow", "HammingWindow", "HannWindow")


@register(*EXPANDED_OPS)
def parse_expanded(ctx: NodeContext, args: Args) -> Result:
    if ctx.op_type in WINDOWS:  # the function body would give an empty window for a negative size
        size = ctx.const(args[0]) if args else None
        if size is not None and (size.size != 1 or int(size.reshape(-1)[0]) < 0):
            raise ctx.error(f"size must be one integer >= 0, got {size.reshape(-1).tolist()} (ONNX Runtime refuses it)")
    return expand_function(ctx, args)


@register("Attention", msft=True, dynamic="batch")
def parse_attention(ctx: NodeContext, args: Args) -> Result:
    if ctx.node.domain == "com.microsoft":  # ORT's fused QKV projection + attention, other inputs
        from .parse_msft import ms_attention

        return ms_attention(ctx, args)
    return expand_function(ctx, args)


@register("RotaryEmbedding", msft=True)
def parse_rotary_embedding(ctx: NodeContext, args: Args) -> Result:
    if ctx.node.domain == "com.microsoft":
        from .parse_msft import ms_rotary_embedding

        return ms_rotary_embedding(ctx, args)
    return expand_function(ctx, args)
