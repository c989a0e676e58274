"""preallocate_param: the `scratch` parameter becomes one arena allocated at finalize."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass


@dataclass(frozen=True)
class PreallocateParam(Pass):
    """The `scratch` parameter becomes `hip::hip_allocate_memory[id=scratch]`: one arena the
    executor allocates once at finalize."""

    name: ClassVar[str] = "preallocate_param"
    param: str = "scratch"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        for p in module.params():
            if p.param_name == self.param:
                mem = module.insert_after(p, Op("hip::hip_allocate_memory", shape=p.shape, id=self.param))
                module.replace_all_uses(p, mem)
                module.remove_instruction(p)
                return True
        return False
