"""schedule: a single-stream order with allocations moved next to their first use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...compiler.ir import Module
from ...compiler.passes import Pass
from .memory_coloring import ALLOC


@dataclass(frozen=True)
class Schedule(Pass):
    """Single-stream schedule: a stable topological order, with every allocation moved to just
    before its first use so buffer lifetimes (and so the arena) stay short. The executor runs
    instructions in exactly this recorded order. More streams are not modelled (nstreams > 1 is
    scheduled on one stream)."""

    name: ClassVar[str] = "schedule"
    nstreams: int = 1

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        before = [i.id for i in module]
        module.sort()
        for ins in list(module):
            if ins.name in (ALLOC, "allocate") and ins.outputs:
                order = module.index_of()
                first = min(ins.outputs, key=lambda u: order[u.id])
                if order[first.id] != order[ins.id] + 1:
                    module.move_instruction(ins, first)
        return [i.id for i in module] != before
