"""schedule: a single-stream order with allocations moved next to their first use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.pass_infra import Pass

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
        # Moving an allocation down to its first user keeps the order of everything else, and
        # users of allocations are not allocations: one index serves the whole loop (one per
        # allocation made this pass quadratic on an unrolled LSTM).
        order = module.index_of()
        for ins in list(module):
            if ins.name in (ALLOC, "allocate") and ins.outputs:
                first = min(ins.outputs, key=lambda u: order[u.id])
                if first is not ins.next:
                    module.move_instruction(ins, first)
        return [i.id for i in module] != before
