"""eliminate_identity: replace every `identity` with its input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from ..pass_infra import Pass


@dataclass(frozen=True)
class EliminateIdentity(Pass):
    """Replace every `identity` with its input. A trailing identity that is the module's last
    instruction (no @return) is removed only when it is its input's one user: the input moves to
    the end so the module still ends in its output value (as MIGraphX does); otherwise it stays."""

    name: ClassVar[str] = "eliminate_identity"

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        last = module.last
        for ins in module:
            if ins.name != "identity":
                continue
            if ins is last:
                x = ins.inputs[0]
                if len(x.outputs) == 1 and not x.is_param():
                    module.remove_instruction(ins)
                    module.move_instruction(x, module.end())
                    changed = True
                break  # the last instruction: nothing follows
            module.replace_all_uses(ins, ins.inputs[0])
            module.remove_instruction(ins)
            changed = True
        return changed
