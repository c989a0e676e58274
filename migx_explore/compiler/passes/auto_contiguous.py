"""auto_contiguous (MIGraphX src/auto_contiguous.cpp).

1. Walking backwards, every op with the `require_std_shape` trait gets a `contiguous` in front of
   each input that is not standard (unless that input already is a contiguous).
2. Walking forwards, a `contiguous` follows every instruction with a non-standard result that is
   used (or is the last instruction), so later ops see packed row-major data. Skipped, as in
   MIGraphX: layout, contiguous, params, @return, dynamic and tuple shapes, scalars that are not
   broadcasts, and standard literals. We also skip a value whose users are all contiguous already
   (step 1 copied it), which MIGraphX leaves for eliminate_contiguous to clean up.

The backend's eliminate_contiguous then removes every copy whose consumer accepts the strided input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from ..op import Op
from ..pass_infra import Pass

SKIP = ("layout", "contiguous", "@return", "@param")


def contiguous_inputs(module: Module) -> bool:
    changed = False
    for ins in reversed(module):
        if not ins.op.has("require_std_shape"):
            continue
        args = [
            x
            if x.name == "contiguous" or x.shape.standard() or x.shape.dyn_dims is not None
            else module.insert_instruction(ins, Op("contiguous"), [x])
            for x in ins.inputs
        ]
        if args != list(ins.inputs):
            module.replace_instruction(ins, inputs=args)
            changed = True
    return changed


def contiguous_outputs(module: Module) -> bool:
    changed = False
    last = module.last
    for ins in list(module):
        if ins.name in SKIP or (not ins.outputs and ins is not last):
            continue
        s = ins.shape
        if s.dyn_dims is not None or s.is_tuple or s.standard() or s.elements() == 0:
            continue
        if s.scalar_shape() and "broadcast" not in ins.name:
            continue
        if ins.outputs and all(u.name == "contiguous" for u in ins.outputs):
            continue
        with module.program.provenance([ins]):
            c = module.insert_after(ins, Op("contiguous"), [ins])
        module.replace_all_uses(ins, c)
        changed = True
    return changed


@dataclass(frozen=True)
class AutoContiguous(Pass):
    """Insert `contiguous` where an op needs standard inputs, and after non-standard results."""

    name: ClassVar[str] = "auto_contiguous"

    def apply_module(self, module: Module, ctx) -> bool:
        a = contiguous_inputs(module)
        b = contiguous_outputs(module)
        return a or b
