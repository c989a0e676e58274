"""rewrite_low_precision (MIGraphX src/rewrite_low_precision.cpp): find_pow2_div keeps fp16 from
overflowing in x^2 / n (a variance) by dividing first: (x / n) * x."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..matcher import any_, any_of, arg, has_value, is_constant, name, pred
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import row, to
from .rewrite import sweep

_x = any_().bind("x")
_square = any_of(
    name("pow")(arg(0)(_x), arg(1)(has_value(2.0))),
    name("mul")(pred("same_inputs", lambda i: i.inputs[0] is i.inputs[1], "different inputs"), arg(0)(_x)),
)


def _fp16_only(m, r):
    return None if r["x"].shape.type == "float16" else f"{r['x'].shape.type} does not overflow here (fp16 only)"


POW2_DIV = row(
    # x^2 / n -> (x / n) * x        (fp16)
    "find_pow2_div",
    name("div")(arg(0)(_square), arg(1)(is_constant().bind("n"))),
    to("mul", to("div", "x", "n"), "x"),
    _fp16_only,
)


@dataclass(frozen=True)
class RewriteLowPrecision(Pass):
    name: ClassVar[str] = "rewrite_low_precision"

    def apply_module(self, module, ctx) -> bool:
        return sweep(module, [POW2_DIV], with_dce=False, rewriter=rewriter_of(ctx))
