"""dead_code_elimination: remove unused instructions, then unused modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module, Program
from ..pass_infra import Pass


def _removable(ins) -> bool:
    if ins.outputs or ins.is_param() or ins.is_return():
        return False
    if ins.op.has("side_effect"):
        return False
    return True


@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Remove instructions whose results are never used (params, @return, the last instruction and
    side-effecting ops are kept), then, at program level, modules nothing refers to."""

    name: ClassVar[str] = "dead_code_elimination"

    def apply_module(self, module: Module, ctx) -> bool:
        last = module.last
        removed = False
        # Walk backwards so a chain of dead instructions goes in one sweep.
        for ins in reversed(module):
            if ins is last:
                continue
            if _removable(ins):
                module.remove_instruction(ins)
                removed = True
        return removed

    def apply_program(self, program: Program, ctx) -> bool:
        return bool(program.remove_unused_modules())
