"""inline_module (MIGraphX src/inline_module.cpp): an `if` whose condition is a compile-time
constant is replaced by the instructions of the branch it would run; the branch's params take the
`if`'s inputs, and uses of the `if` (or of its get_tuple_elems) take the branch's returns. The
branch modules are left for dead_code_elimination to remove."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..pass_infra import Pass
from ..ref import eval_instruction
from .fusion_helpers import copy_body


def inline_branch(module: Module, ins: Instruction, branch: Module) -> None:
    rets = copy_body(branch, module, {p.id: x for p, x in zip(branch.params(), ins.inputs[1:])}, before=ins)
    if not ins.shape.is_tuple:
        module.replace_all_uses(ins, rets[0])
    else:
        for u in list(ins.outputs):
            if u.name != "get_tuple_elem":
                raise ValueError(f"inline_module: tuple-valued if #{ins.id} is read by {u.name}")
            module.replace_all_uses(u, rets[u.op["index"]])
            module.remove_instruction(u)
    module.remove_instruction(ins)


@dataclass(frozen=True)
class InlineModule(Pass):
    """Inline the chosen branch of every `if` with a constant condition."""

    name: ClassVar[str] = "inline_module"

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in list(module):
            if ins.name != "if" or not ins.alive or not ins.inputs[0].can_eval():
                continue
            cond = bool(np.asarray(eval_instruction(ins.inputs[0])).reshape(-1)[0])
            with module.program.provenance([ins]):
                inline_branch(module, ins, ins.module_inputs[0 if cond else 1])
            changed = True
        return changed
