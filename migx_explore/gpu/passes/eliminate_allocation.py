"""eliminate_allocation: leftover allocations become loads from one `memory` parameter
(the naive layout, used when memory_coloring is off); and the arena alignment both share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass
from migx_explore.compiler.shape import Shape

ALIGN = 256  # byte alignment of every buffer in an arena (BLAS and vector loads like it)


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class EliminateAllocation(Pass):
    """Any `hip::allocate` left (memory_coloring switched off) becomes a `load` from one `memory`
    parameter, each buffer at its own offset: the naive layout, no reuse."""

    name: ClassVar[str] = "eliminate_allocation"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        allocs = [i for i in module if i.name == "hip::allocate"]
        if not allocs:
            return False
        total = sum(aligned(a.shape.bytes()) for a in allocs)
        mem = module.add_parameter("memory", Shape.of("int8", [max(total, 1)]))
        offset = 0
        for a in allocs:
            load = module.insert_instruction(a, Op("load", shape=a.shape, offset=offset), [mem])
            module.replace_all_uses(a, load)
            module.remove_instruction(a)
            offset += aligned(a.shape.bytes())
        return True
