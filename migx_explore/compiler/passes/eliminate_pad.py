"""eliminate_pad (MIGraphX src/eliminate_pad.cpp): fold a `pad` op into the padding attribute of
convolution / pooling.

Where we differ from MIGraphX, on purpose: MIGraphX folds any zero `pad` into max pooling, whose
own padding acts as -inf, so a window that sees only negative values changes result. We fold into
max pooling only a pad whose value is the lowest float (what insert_pad writes) and into lp-norm
pooling only a zero pad; average pooling is left alone (its divisor depends on what is padding),
as in MIGraphX. Pads on the batch or channel axes are never folded (MIGraphX does not check).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..pass_infra import Pass

LOWEST = float(np.finfo(np.float32).min)
PADDED_OPS = ("convolution", "pooling")


def split_padding(padding, nd: int) -> tuple[list[int], list[int]]:
    pad = list(padding) or [0] * nd
    return (pad, pad) if len(pad) == nd else (pad[:nd], pad[nd:])


def _pad_value_ok(ins: Instruction, value: float) -> bool:
    if ins.name == "convolution":
        return value == 0.0
    mode = ins.op["mode"]
    if mode == "max":
        return value <= LOWEST
    return mode == "lpnorm" and value == 0.0


def ceil_mode_pooling(ins: Instruction) -> bool:
    # A ceil_mode window may start in the end padding only up to a limit measured from the begin
    # padding, so moving padding between the op and a `pad` would change the output size.
    return ins.name == "pooling" and bool(ins.op["ceil_mode"])


@dataclass(frozen=True)
class EliminatePad(Pass):
    name: ClassVar[str] = "eliminate_pad"

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in module:
            if ins.name not in PADDED_OPS or not ins.inputs or ins.inputs[0].name != "pad":
                continue
            pad = ins.inputs[0]
            nd = pad.shape.ndim - 2
            pads = list(pad.op["pads"])
            begin, end = pads[2 : 2 + nd], pads[4 + nd :]
            if pad.op["mode"] != "constant" or pads[:2] != [0, 0] or pads[2 + nd : 4 + nd] != [0, 0]:
                continue
            if not _pad_value_ok(ins, pad.op["value"]) or ceil_mode_pooling(ins):
                continue
            pb, pe = split_padding(ins.op["padding"], nd)
            padding = [a + b for a, b in zip(pb, begin)] + [a + b for a, b in zip(pe, end)]
            module.replace_instruction(ins, ins.op.with_(padding=padding), [pad.inputs[0], *ins.inputs[1:]])
            changed = True
        return changed
