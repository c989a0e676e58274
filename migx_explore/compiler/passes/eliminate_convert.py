"""eliminate_convert: collapse chains of converts and drop converts to the type a value already has
(MIGraphX's find_nested_convert and find_nop_converts).

One deliberate difference: MIGraphX collapses convert(convert(x, int32), float) to x, dropping the
truncation. We collapse a chain only when every intermediate conversion is a float rounding or a
widening (it can only lose precision, never change the value class); a chain through an integral
or bool type, or through a narrower integer, is kept and `near_misses` says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import dtypes
from ..matcher import arg, name, pred
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_value
from .rewrite import sweep


def _value_preserving(src: str, mid: str) -> bool:
    """Does converting `src` values to `mid` keep them up to float rounding?"""
    s, t = dtypes.dtype(src), dtypes.dtype(mid)
    if s.name == t.name or t.is_float:
        return True  # float targets only round (fp32 -> fp16 -> fp32 is what MIGraphX wants gone)
    if s.is_float or s.name == "bool" or t.name == "bool":
        return s.name == "bool" and t.name != "bool"  # bool widens into any integer
    # integer -> integer: the target range must contain the source range
    si, ti = dtypes.np_dtype(src), dtypes.np_dtype(mid)
    return bool(np.iinfo(ti).min <= np.iinfo(si).min and np.iinfo(ti).max >= np.iinfo(si).max)


class NestedConvert(Rule):
    """convert(convert(...convert(x))) -> convert(x), or x when the types round-trip."""

    name = "find_nested_convert"

    def pattern(self):
        return name("convert")(arg(0)(name("convert")))

    def check(self, m, r):
        ins = r.root
        chain, x = [], ins.inputs[0]
        while x.name == "convert":
            chain.append(x.shape.type)
            x = x.inputs[0]
        for mid in reversed(chain):
            if not _value_preserving(x.shape.type, mid):
                return f"the chain converts {x.shape.type} through {mid}, which changes values (not only rounding)"
        if x.shape.type == ins.shape.type:
            return lambda: replace_value(m, ins, x)
        return lambda: m.replace_instruction(ins, ins.op, [x])


class NopConvert(Rule):
    """convert(x) to x's own type -> x."""

    name = "find_nop_converts"

    def pattern(self):
        return name("convert")(
            pred(
                "same_type",
                lambda i: i.shape.type == i.inputs[0].shape.type,
                lambda i: f"converts {i.inputs[0].shape.type} to {i.shape.type}",
            )
        )

    def check(self, m, r):
        return lambda: replace_value(m, r.root, r.root.inputs[0])


RULES = (NestedConvert(), NopConvert())


@dataclass(frozen=True)
class EliminateConvert(Pass):
    name: ClassVar[str] = "eliminate_convert"

    def apply_module(self, module, ctx) -> bool:
        return sweep(module, RULES, with_dce=False, rewriter=rewriter_of(ctx))
