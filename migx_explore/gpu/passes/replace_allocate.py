"""replace_allocate: `allocate` -> `hip::allocate`, returned buffers -> output parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass

from ..ops import buffer_root


def output_param_name(k: int) -> str:
    return f"main:#output_{k}"


@dataclass(frozen=True)
class ReplaceAllocate(Pass):
    """`allocate` -> `hip::allocate`, except a buffer whose value main returns, which becomes an
    output parameter `main:#output_N` (the executor owns it; results never live in the arena)."""

    name: ClassVar[str] = "replace_allocate"
    offload_copy: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        returned = {}
        ret = module.return_instruction()
        if ret is not None and not self.offload_copy:
            for k, v in enumerate(ret.inputs):
                r = buffer_root(v)
                if r.name == "allocate":
                    returned.setdefault(r.id, k)
        changed = False
        for ins in list(module):
            if ins.name != "allocate":
                continue
            if ins.id in returned:
                new = module.add_parameter(output_param_name(returned[ins.id]), ins.shape)
            else:
                new = module.insert_instruction(ins, Op("hip::allocate", shape=ins.shape))
            module.replace_all_uses(ins, new)
            module.remove_instruction(ins)
            changed = True
        return changed
