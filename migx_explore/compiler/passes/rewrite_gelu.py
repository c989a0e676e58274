"""rewrite_gelu (MIGraphX src/rewrite_gelu.cpp, field fast_math).

Both forms are replaced by the exp form of the tanh approximation,
    0.5 x (1 + tanh(z)) = x / (1 + exp(-2 z)),  z = sqrt(2/pi) (x + 0.044715 x^3):
* fast_math: find_gelu_erf rewrites erf-GELU *and* tanh-GELU, for fp16 only (for erf-GELU this
  is an approximation, ~1e-3 relative; MIGraphX accepts it only where fp16 already rounds that
  much).
* otherwise: find_tanh_fast_gelu rewrites tanh-GELU in any type (an exact rearrangement that
  avoids tanh overflow).

Recognised shapes (constants may be broadcast literals; values compared with a 1e-3 tolerance so
fp16 literals match):
    erf:  0.5 * x * (1 + erf(x / sqrt(2)))      (x * 1/sqrt(2) also; the three factors in any order)
    tanh: 0.5 * x * (1 + tanh(g(x)))   or   x * (0.5 + 0.5 * tanh(g(x)))
          g(x) = sqrt(2/pi) * (x + 0.044715 * x^3)   or   0.797885 * x + 0.035677 * x^3
Unlike MIGraphX's matchers, every occurrence of x must be the same value (MIGraphX binds only one).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction
from ..matcher import name
from ..op import Op
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_with_op
from ..ref import eval_instruction
from .rewrite import sweep
from .rule_helpers import broadcast_scalar


def _is(ins: Instruction, value: float) -> bool:
    if not ins.can_eval():
        return False
    v = np.asarray(eval_instruction(ins), np.float64)
    return v.size > 0 and bool(np.allclose(v, value, rtol=1e-3, atol=0))


def _once(ins: Instruction) -> bool:
    return len(ins.outputs) == 1


def _pair(ins: Instruction, op: str, value: float) -> Instruction | None:
    """For op(c, y) or op(y, c) with c == value: y."""
    if ins.name != op:
        return None
    a, b = ins.inputs
    if _is(b, value):
        return a
    return b if _is(a, value) and op in ("mul", "add") else None


def _erf_arg(x: Instruction | None) -> Instruction | None:
    """erf(x / sqrt 2) -> x."""
    if x is None or x.name != "erf" or not _once(x) or not _once(x.inputs[0]):
        return None
    e = x.inputs[0]
    return _pair(e, "mul", math.sqrt(0.5)) or (_pair(e, "div", math.sqrt(2)) if e.name == "div" else None)


def _cube_of(ins: Instruction | None) -> Instruction | None:
    if ins is None or ins.name != "pow" or not _once(ins) or not _is(ins.inputs[1], 3.0):
        return None
    return ins.inputs[0]


def _tanh_arg(t: Instruction | None) -> Instruction | None:
    """tanh(g(x)) -> x for either polynomial form of g."""
    if t is None or t.name != "tanh" or not _once(t):
        return None
    g = t.inputs[0]
    inner = _pair(g, "mul", math.sqrt(2 / math.pi))
    if inner is not None and inner.name == "add":  # sqrt(2/pi) * (x + 0.044715 x^3)
        for a, b in itertools.permutations(inner.inputs):
            if _cube_of(_pair(b, "mul", 0.044715)) is a:
                return a
    if g.name == "add":  # 0.797885 x + 0.035677 x^3
        for a, b in itertools.permutations(g.inputs):
            x = _pair(a, "mul", 0.797885)
            if x is not None and _cube_of(_pair(b, "mul", 0.035677)) is x:
                return x
    return None


def _gate(add: Instruction) -> tuple[str, Instruction] | None:
    """1 + erf(x/sqrt2) or 1 + tanh(g(x)) -> (kind, x)."""
    if add.name != "add" or not _once(add):
        return None
    y = _pair(add, "add", 1.0)
    x = _erf_arg(y)
    if x is not None:
        return "erf", x
    x = _tanh_arg(y)
    return ("tanh", x) if x is not None else None


def _half_gate(add: Instruction) -> Instruction | None:
    """0.5 + 0.5 * tanh(g(x)) -> x."""
    if add.name != "add" or not _once(add):
        return None
    h = _pair(add, "add", 0.5)
    return _tanh_arg(_pair(h, "mul", 0.5)) if h is not None and _once(h) else None


def gelu_input(root: Instruction) -> tuple[str, Instruction] | None:
    """(kind, x) when `root` is the final mul of an erf- or tanh-GELU of x."""
    if root.name != "mul":
        return None
    for inner, other in itertools.permutations(root.inputs):
        if inner.name == "mul" and _once(inner):
            for half, gate, x in itertools.permutations([*inner.inputs, other]):
                got = _gate(gate) if _is(half, 0.5) else None
                if got is not None and got[1] is x:
                    return got
        if _half_gate(other) is inner:
            return "tanh", inner
    return None


class Gelu(Rule):
    def __init__(self, rule_name: str, kinds: tuple[str, ...], fp16_only: bool):
        self.name, self.kinds, self.fp16_only = rule_name, kinds, fp16_only

    def pattern(self):
        return name("mul")

    def check(self, m, r):
        found = gelu_input(r.root)
        if found is None:
            return "not an erf- or tanh-GELU"
        kind, x = found
        if kind not in self.kinds:
            return f"{kind}-GELU is not rewritten by {self.name}"
        if self.fp16_only and x.shape.type != "float16":
            return f"{x.shape.type} input (fast-math GELU is rewritten for fp16 only)"
        return lambda: _tanh_exp_gelu(m, r.root, x)


def _tanh_exp_gelu(m, ins: Instruction, x: Instruction) -> None:
    c0 = -2.0 * math.sqrt(2 / math.pi)
    c1 = 0.044715 * c0

    def op(name_, *args):
        return m.insert_instruction(ins, Op(name_), list(args))

    u = op(
        "mul",
        x,
        op("add", op("mul", x, op("mul", x, broadcast_scalar(m, ins, c1, x))), broadcast_scalar(m, ins, c0, x)),
    )
    den = op("add", broadcast_scalar(m, ins, 1.0, x), op("exp", u))
    replace_with_op(m, ins, Op("div"), [x, den])


GELU_ERF = Gelu("find_gelu_erf", ("erf", "tanh"), fp16_only=True)
TANH_FAST_GELU = Gelu("find_tanh_fast_gelu", ("tanh",), fp16_only=False)


@dataclass(frozen=True)
class RewriteGelu(Pass):
    name: ClassVar[str] = "rewrite_gelu"
    fast_math: bool = True

    def apply_module(self, module, ctx) -> bool:
        rule = GELU_ERF if self.fast_math else TANH_FAST_GELU
        return sweep(module, [rule], with_dce=False, rewriter=rewriter_of(ctx))
