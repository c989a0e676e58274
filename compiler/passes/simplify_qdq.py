"""simplify_qdq (MIGraphX src/simplify_qdq.cpp).

  1. match_find_quantizable_ops (skipped when remove_qdq_only): dot / convolution whose inputs are
     both dequantizelinear of int8 data with constant per-tensor scales and zero (or no) zero
     points becomes the int32 quant_dot / quant_convolution, rescaled by one dequantizelinear:
         dot(dq(a, sa), dq(b, sb))  ->  dequantizelinear(quant_dot(a, b), sa * sb)
  2. remove_qdq_pairs: a dequantizelinear(quantizelinear(x)) that no quantized op consumed is
     fake quantization and is dropped (x is used directly), as MIGraphX does; this removes the
     rounding, so numerics move by up to one quantization step.
  fp8 (float8e4m3fn) data works the same way, giving float32-accumulating quant ops.
  use_mx_quant (MIGraphX's MX-format variant) matches nothing here: there are no fp4 types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import dtypes
from ..ir import Instruction, Module
from ..matcher import MatchResult, name
from ..op import Op
from ..rewrite import Rule, find_matches
from ..shape import Shape
from .base import Pass
from .dead_code_elimination import DeadCodeElimination


def _uniform(x: Instruction) -> float | None:
    """The one value of a constant whose elements are all equal."""
    if not x.can_eval():
        return None
    v = np.asarray(x.eval(), np.float64).reshape(-1)
    return float(v[0]) if v.size and np.all(v == v[0]) else None


def _quantized_input(dq: Instruction) -> tuple[Instruction, float] | str:
    if dq.name != "dequantizelinear":
        return f"input is {dq.name}, not dequantizelinear"
    q = dq.inputs[0]
    if q.shape.type not in ("int8", "float8e4m3fn"):
        return f"quantized data is {q.shape.type}; quant ops take int8 or float8e4m3fn"
    scale = _uniform(dq.inputs[1])
    if scale is None:
        return "scale is not a constant per-tensor value"
    if len(dq.inputs) == 3 and _uniform(dq.inputs[2]) != 0.0:
        return "zero point is not a constant zero"
    return q, scale


class FindQuantizableOps(Rule):
    name = "match_find_quantizable_ops"

    def pattern(self):
        return name("dot", "convolution")

    def check(self, module: Module, r: MatchResult):
        ins = r.root
        parts = [_quantized_input(x) for x in ins.inputs]
        for p in parts:
            if isinstance(p, str):
                return p
        if ins.inputs[0].shape.type != ins.inputs[1].shape.type:
            return "dequantized inputs have different types"
        return parts

    def rewrite(self, module: Module, r: MatchResult, plan) -> None:
        ins = r.root
        (qa, sa), (qb, sb) = plan
        qop = Op("quant_dot") if ins.name == "dot" else Op("quant_convolution", ins.op.attrs)
        q = module.insert_instruction(ins, qop, [qa, qb])
        t = ins.shape.type
        lit = module.add_literal(np.asarray(sa * sb, dtypes.np_dtype(t)), Shape.scalar(t))
        scale = module.insert_instruction(ins, Op("multibroadcast", out_lens=q.shape.lens), [lit])
        out = module.insert_instruction(ins, Op("dequantizelinear"), [q, scale])
        module.replace_all_uses(ins, out)


def remove_qdq_pairs(module: Module) -> bool:
    changed = False
    for ins in list(module):
        if ins.name != "dequantizelinear":
            continue
        q = ins.inputs[0]
        if q.name == "quantizelinear" and q.inputs[0].shape.type == ins.shape.type:
            module.replace_all_uses(ins, q.inputs[0])
            changed = True
    return changed


@dataclass(frozen=True)
class SimplifyQdq(Pass):
    """Fold dequantize -> dot/convolution into int8 quant ops; drop leftover fake-quant pairs."""

    name: ClassVar[str] = "simplify_qdq"
    status: ClassVar[str] = "mapped"
    note: ClassVar[str] = ("int8/fp8 dot/convolution with constant per-tensor scales (zero points must be 0), and "
                           "q -> dq pair removal; no int4, MX or zero-point rewrites")
    remove_qdq_only: bool = False
    use_mx_quant: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        dce = DeadCodeElimination()
        changed = False
        if not self.remove_qdq_only and find_matches(module, FindQuantizableOps()):
            dce.apply_module(module, ctx)
            changed = True
        if remove_qdq_pairs(module):
            dce.apply_module(module, ctx)
            changed = True
        return changed
