"""The op-type table: ONNX op_type -> handler, filled by the parse_*.py modules (one per op
family, like MIGraphX's src/onnx/parse_*.cpp op_parsers).

A handler is `fn(ctx: NodeContext, args: list[Instruction | None]) -> Instruction | list`; it
returns one instruction per node output (a list for multi-output nodes). Empty optional inputs
arrive as None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Instruction
    from .context import NodeContext

Args = list  # the node's inputs: list[Instruction | None] (None for an empty optional input)
Result = Union["Instruction", Sequence["Instruction"]]
Handler = Callable[["NodeContext", Args], Result]

HANDLERS: dict[str, Handler] = {}
# Op types also accepted from ONNX Runtime's com.microsoft domain (the handler reads
# ctx.node.domain where the two domains' semantics differ, e.g. RotaryEmbedding).
MSFT_OPS: set[str] = set()
# com.microsoft ops whose parsers follow dynamic dims: "any" dim, or only the leading batch dim
# ("batch"); the others take fixed dims (rule contrib-ops-fixed-dims, docs/dynamic_shapes.md).
MSFT_DYNAMIC: dict[str, str] = {}


def register(*op_types: str, msft: bool = False, dynamic: str = "") -> Callable[[Handler], Handler]:
    """Decorator: `@register("Relu", "Sigmoid")` maps those op types to the function; msft=True
    also accepts them from the com.microsoft domain, `dynamic` ("any" / "batch") says which of
    their dims may be a dynamic range there."""

    def deco(fn: Handler) -> Handler:
        for t in op_types:
            if t in HANDLERS:
                raise ValueError(f"ONNX op {t} has two handlers")
            HANDLERS[t] = fn
            if msft:
                MSFT_OPS.add(t)
                if dynamic:
                    MSFT_DYNAMIC[t] = dynamic
        return fn

    return deco


def register_fn(op_type: str, fn: Handler) -> None:
    register(op_type)(fn)
