"""write_literals: each literal main's device code reads is uploaded once, at finalize."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass


@dataclass(frozen=True)
class WriteLiterals(Pass):
    """Each literal main's device code reads gets `hip::hip_copy_literal`: uploaded once when the
    program is finalized, never copied per run."""

    name: ClassVar[str] = "write_literals"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        changed = False
        for k, ins in enumerate(list(module)):
            if not ins.is_literal():
                continue
            users = [u for u in ins.outputs if u.name != "hip::hip_copy_literal"]
            if not users:
                continue
            copy = module.insert_after(ins, Op("hip::hip_copy_literal", id=f"main:@literal:{k}"), [ins])
            for u in users:
                module.replace_instruction(u, inputs=[copy if i is ins else i for i in u.inputs])
            changed = True
        return changed
