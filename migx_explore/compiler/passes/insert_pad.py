"""insert_pad (MIGraphX src/insert_pad.cpp): turn asymmetric padding (begins != ends) of
convolution / pooling into a `pad` op plus symmetric attribute padding, because kernels take one
pad per spatial dim. eliminate_pad folds it back where it can."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from ..op import Op
from ..pass_infra import Pass
from .eliminate_pad import LOWEST, PADDED_OPS, ceil_mode_pooling, split_padding


@dataclass(frozen=True)
class InsertPad(Pass):
    name: ClassVar[str] = "insert_pad"
    ops: tuple[str, ...] = PADDED_OPS

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in module:
            if ins.name not in self.ops or ins.name not in PADDED_OPS or not ins.inputs:
                continue
            x = ins.inputs[0]
            if x.shape.dyn_dims is not None:
                continue
            nd = x.shape.ndim - 2
            pb, pe = split_padding(ins.op["padding"], nd)
            if pb == pe or ceil_mode_pooling(ins):
                continue
            if ins.name == "pooling":
                if ins.op["mode"] == "average":
                    continue  # the divisor would count the explicit padding
                value = LOWEST if ins.op["mode"] == "max" else 0.0
            else:
                value = 0.0
            with module.program.provenance([ins]):
                pad = module.insert_instruction(ins, Op("pad", pads=[0, 0, *pb, 0, 0, *pe], value=value), [x])
            module.replace_instruction(ins, ins.op.with_(padding=[0] * (2 * nd)), [pad, *ins.inputs[1:]])
            changed = True
        return changed
