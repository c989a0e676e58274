"""rewrite_quantization (MIGraphX src/rewrite_quantization.cpp) lowers what simplify_qdq left to
ordinary ops:
  quantizelinear(x, s[, z])  ->  convert(clip(nearbyint(x / s) [+ z], qmin, qmax))
  (fp8 targets: no nearbyint; the clip is +-448 and the convert rounds)
  dequantizelinear(q, s[, z]) ->  (convert(q) [- convert(z)]) * s
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import dtypes
from ..ir import Instruction, Module
from ..op import Op
from ..ops.nn_extra import FP8_TYPES
from ..pass_infra import Pass
from .rule_helpers import broadcast_literal


def lower_quantizelinear(module: Module, ins: Instruction) -> None:
    x, scale = ins.inputs[0], ins.inputs[1]
    st = scale.shape.type
    if x.shape.type != st:
        x = module.insert_instruction(ins, Op("convert", target_type=st), [x])
    y = module.insert_instruction(ins, Op("div"), [x, scale])
    fp8_limit = FP8_TYPES.get(ins.shape.type)
    if fp8_limit is None:  # integers round half to even; fp8 rounds in the final convert
        y = module.insert_instruction(ins, Op("nearbyint"), [y])
    if len(ins.inputs) == 3:
        zp = module.insert_instruction(ins, Op("convert", target_type=st), [ins.inputs[2]])
        y = module.insert_instruction(ins, Op("add"), [y, zp])
    if fp8_limit is not None:
        lo_v, hi_v = -fp8_limit, fp8_limit
    else:
        lo_v, hi_v = dtypes.int_limits(ins.shape.type)
    lo = broadcast_literal(module, ins, lo_v, st, y.shape.lens)
    hi = broadcast_literal(module, ins, hi_v, st, y.shape.lens)
    clipped = module.insert_instruction(ins, Op("clip"), [y, lo, hi])
    module.replace_all_uses(ins, module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [clipped]))


def lower_dequantizelinear(module: Module, ins: Instruction) -> None:
    scale = ins.inputs[1]
    st = scale.shape.type
    x = module.insert_instruction(ins, Op("convert", target_type=st), [ins.inputs[0]])
    if len(ins.inputs) == 3:
        zp = module.insert_instruction(ins, Op("convert", target_type=st), [ins.inputs[2]])
        x = module.insert_instruction(ins, Op("sub"), [x, zp])
    module.replace_all_uses(ins, module.insert_instruction(ins, Op("mul"), [x, scale]))


@dataclass(frozen=True)
class RewriteQuantization(Pass):
    """Lower quantizelinear / dequantizelinear to convert, div, nearbyint, add, clip, sub, mul."""

    name: ClassVar[str] = "rewrite_quantization"
    must_follow: ClassVar[tuple[str, ...]] = ("simplify_qdq",)

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in list(module):
            if ins.name not in ("quantizelinear", "dequantizelinear") or not ins.alive:
                continue
            with module.program.provenance([ins]):
                (lower_quantizelinear if ins.name == "quantizelinear" else lower_dequantizelinear)(module, ins)
            module.remove_instruction(ins)
            changed = True
        return changed
