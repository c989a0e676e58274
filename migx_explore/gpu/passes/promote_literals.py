"""promote_literals (mapped): merge identical literals of main so each is uploaded once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.pass_infra import Pass


@dataclass(frozen=True)
class PromoteLiterals(Pass):
    """Literals inside fused bodies are compiled into their kernels as constants, and our IR
    does not let a submodule refer to main, so there is nothing to move up; what MIGraphX gets
    from sharing promoted literals we get by merging identical literals of main, so each is
    uploaded once."""

    name: ClassVar[str] = "promote_literals"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        seen: dict[tuple, object] = {}
        changed = False
        for ins in list(module):
            if not ins.is_literal():
                continue
            key = (ins.shape, ins.literal.content_hash())
            first = seen.get(key)
            if first is not None and first.literal.same_as(ins.literal):
                module.replace_all_uses(ins, first)
                module.remove_instruction(ins)
                changed = True
            else:
                seen.setdefault(key, ins)
        return changed
