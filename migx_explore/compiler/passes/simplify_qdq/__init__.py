"""simplify_qdq (MIGraphX src/simplify_qdq.cpp), its steps in MIGraphX's order:

  0. remove_zero_scales: a dequantizelinear with a constant all-zero scale is a zero.
  1. match_find_quantizable_ops (skipped when remove_qdq_only; quant_op_rules.py): dot /
     convolution of two dequantized int8 / fp8 values becomes quant_dot / quant_convolution,
     rescaled by one dequantizelinear (product of scales, zero-point cross terms); per-tensor and
     per-axis scales, symmetric and asymmetric zero points, shape ops between replayed.
  2. remove_qdq_pairs: dequantizelinear(quantizelinear(x, s, z), s', z') with the same scale and
     zero point values (through broadcasts / slices / reshapes) is fake quantization: x is used
     directly. Pairs with different parameters stay (they change values). Removing a pair drops
     the rounding, so numerics move by up to one quantization step, as in MIGraphX -- and drops
     the clamp to [(qmin - z) s, (qmax - z) s], which is not a small change: ONNX Runtime's
     quantizer removes a ReLU before a uint8 quantizelinear whose zero point is 0 because that
     clamp does its work. With keep_qdq_pairs (what the GPU pipelines set, except under the --int8 /
     --fp8 stage, whose own calibration pairs are fake quantization) a pair is removed only
     where that is exact: x is itself dequantizelinear(y, s, z) of the same type and parameters,
     so round and clamp give y back. The kept pairs are lowered to pointwise ops by
     rewrite_quantization and fuse with their neighbours.
  3. match_qlinear_reused: when x feeds both a quantizelinear and one pointwise op after it, the
     pointwise op reads the dequantized value instead, so the pair can fuse later.
  4. match_concat_qlinear: quantizelinear(concat(..)) with a pointwise concat input quantizes
     each concat input (sliced scale and zero point) and concatenates the 8-bit results.
  5. remove_zero_point: a constant all-zero zero point is dropped from dequantizelinear.

Not here: use_mx_quant (MIGraphX's block-scaled MX formats; there are no fp4 types) and the int4
pack/unpack pair (no unpack_int4 op).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ... import dtypes
from ...ir import Instruction, Module
from ...op import Op
from ...pass_infra import Pass, rewriter_of
from ...ref import eval_instruction
from ...shape import Shape
from ..dead_code_elimination import DeadCodeElimination
from .quant_op_rules import FindQuantizableOps

_BROADCASTS = ("broadcast", "multibroadcast")
# what remove_qdq_pairs looks through between the dequantizelinear and its quantizelinear (MIGraphX
# also lists pad and the fp4 pack/unpack pair, which we do not have or cannot replay exactly)
_PAIR_SKIP = ("broadcast", "slice", "reshape", "reshape_lazy")


def _constant_values(x: Instruction) -> np.ndarray | None:
    """x's values with one broadcast layer looked through (MIGraphX's compare_literals), or None."""
    if x.name in _BROADCASTS:
        x = x.inputs[0]
    return np.asarray(eval_instruction(x), np.float64) if x.can_eval() else None


def _same_value(a: Instruction, b: Instruction) -> bool:
    """The same instruction, or constants with equal values: identical arrays, or both uniform
    at one value (a per-tensor scale written at different shapes)."""
    if a is b:
        return True
    x, y = _constant_values(a), _constant_values(b)
    if x is None or y is None or x.size == 0:
        return False
    if x.shape == y.shape and np.array_equal(x, y, equal_nan=False):
        return True
    first = x.reshape(-1)[0]

    def at_first(v: np.ndarray) -> bool:
        return bool(np.all((v == first) | (np.isinf(v) & np.isinf(first))))

    return at_first(x) and at_first(y)


def _same_scale_zero(dq: Instruction, q: Instruction) -> bool:
    if len(dq.inputs) != len(q.inputs) or not _same_value(dq.inputs[1], q.inputs[1]):
        return False
    return len(dq.inputs) == 2 or _same_value(dq.inputs[2], q.inputs[2])


def _exact_pair(q: Instruction) -> bool:
    """q = quantizelinear(dequantizelinear(y, s, z), s, z) with y of q's type: q gives y back."""
    x = q.inputs[0]
    return x.name == "dequantizelinear" and x.inputs[0].shape.type == q.shape.type and _same_scale_zero(x, q)


def remove_qdq_pairs(module: Module, *, exact_only: bool = False) -> bool:
    """MIGraphX's remove_qdq_pairs; exact_only keeps every pair whose rounding or clamp can change
    a value (see the module docstring)."""
    changed = False
    for dq in list(module):
        if dq.name != "dequantizelinear" or not dq.alive:
            continue
        chain, q = [], dq.inputs[0]
        while q.name in _PAIR_SKIP and len(q.inputs) == 1:
            chain.append(q)
            q = q.inputs[0]
        if q.name != "quantizelinear" or not _same_scale_zero(dq, q):
            continue
        if exact_only and not _exact_pair(q):
            continue
        x = q.inputs[0]
        if x.shape.type != dq.shape.type:
            continue  # the float value would change type under its users
        for c in reversed(chain):  # the shape ops between, replayed on the float value
            x = module.insert_instruction(dq, c.op, [x])
        module.replace_all_uses(dq, x)
        changed = True
    return changed


def _precedes(a: Instruction, b: Instruction) -> bool:
    n = a.next
    while n is not None:
        if n is b:
            return True
        n = n.next
    return False


def qlinear_reused(module: Module) -> bool:
    """match_qlinear_reused: x -> quantizelinear (its only use) and x -> pointwise op after it."""
    changed = False
    for q in list(module):
        if q.name != "quantizelinear" or len(q.outputs) != 1:
            continue
        x = q.inputs[0]
        if len(x.outputs) != 2:
            continue
        for user in list(x.outputs):
            if user.name == "quantizelinear" or not user.op.has("pointwise") or not _precedes(q, user):
                continue
            dq = module.insert_after(q, Op("dequantizelinear"), [q, *q.inputs[1:]])
            if dq.shape.type != x.shape.type:
                module.remove_instruction(dq)
                continue
            module.replace_instruction(user, None, [dq if i is x else i for i in user.inputs])
            changed = True
    return changed


def concat_qlinear(module: Module) -> bool:
    """match_concat_qlinear: quantizelinear(concat(a, b)) -> concat(quantizelinear(a), quantizelinear(b))."""
    changed = False
    for q in list(module):
        if q.name != "quantizelinear" or not q.alive:
            continue
        cat = q.inputs[0]
        if cat.name != "concat" or len(cat.outputs) != 1 or not any(i.op.has("pointwise") for i in cat.inputs):
            continue
        axis = cat.op["axis"] % cat.shape.ndim
        parts, start = [], 0
        for x in cat.inputs:
            end = start + x.shape.lens[axis]
            sl = Op("slice", axes=[axis], starts=[start], ends=[end])
            params = [module.insert_instruction(q, sl, [p]) for p in q.inputs[1:]]
            parts.append(module.insert_instruction(q, q.op, [x, *params]))
            start = end
        module.replace_all_uses(q, module.insert_instruction(q, cat.op, parts))
        changed = True
    return changed


def _constant_all_zero(x: Instruction) -> bool:
    return x.can_eval() and bool(np.all(np.asarray(eval_instruction(x), np.float64) == 0))


def remove_zero_point(module: Module) -> bool:
    changed = False
    for dq in list(module):
        if dq.name == "dequantizelinear" and len(dq.inputs) == 3 and _constant_all_zero(dq.inputs[2]):
            module.replace_instruction(dq, None, list(dq.inputs[:2]))
            changed = True
    return changed


def remove_zero_scales(module: Module) -> bool:
    changed = False
    for dq in list(module):
        if dq.name == "dequantizelinear" and len(dq.inputs) >= 2 and _constant_all_zero(dq.inputs[1]):
            t = dq.shape.type
            zero = module.add_literal(np.zeros((), dtypes.np_dtype(t)), Shape.scalar(t))
            zeros = module.insert_instruction(dq, Op("multibroadcast", out_lens=list(dq.shape.lens)), [zero])
            module.replace_all_uses(dq, zeros)
            changed = True
    return changed


@dataclass(frozen=True)
class SimplifyQdq(Pass):
    """Fold dequantize -> dot/convolution into 8-bit quant ops; drop fake-quant pairs."""

    name: ClassVar[str] = "simplify_qdq"
    remove_qdq_only: bool = False
    use_mx_quant: bool = False
    # ours: keep q -> dq pairs whose clamp or rounding can change a value (MIGraphX drops them;
    # the GPU pipelines turn this on, MIGraphX's own tests run with the default)
    keep_qdq_pairs: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        dce = DeadCodeElimination()

        def step(changed_now: bool) -> bool:
            if changed_now:
                dce.apply_module(module, ctx)
            return changed_now

        changed = remove_zero_scales(module)
        exact = self.keep_qdq_pairs
        if self.remove_qdq_only:
            return step(remove_qdq_pairs(module, exact_only=exact)) or changed
        changed = step(rewriter_of(ctx).find_matches(module, FindQuantizableOps()) > 0) or changed
        changed = step(remove_qdq_pairs(module, exact_only=exact)) or changed
        changed = step(qlinear_reused(module)) or changed
        changed = step(concat_qlinear(module)) or changed
        return remove_zero_point(module) or changed


__all__ = ["FindQuantizableOps", "SimplifyQdq", "remove_qdq_pairs"]
