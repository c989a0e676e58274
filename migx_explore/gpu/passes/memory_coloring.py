"""memory_coloring: liveness-based offsets into one arena, and the arena report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Instruction, Module, Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass
from migx_explore.compiler.shape import Shape

from ..ops import buffer_root
from .eliminate_allocation import aligned

ALLOC = "hip::allocate"


def live_intervals(module: Module, kinds: tuple[str, ...] = (ALLOC,)) -> dict[int, tuple[int, int]]:
    """[first use, last use] (instruction indices, closed) of every allocation in `kinds`, over
    every value living in it (views, kernels writing into it). Results of main live to the end."""
    instrs = list(module)
    allocs = {i.id: i for i in instrs if i.name in kinds}
    span: dict[int, list[int]] = {}
    for k, ins in enumerate(instrs):
        for v in ins.inputs:
            r = buffer_root(v)
            if r.id in allocs:
                s = span.setdefault(r.id, [k, k])
                s[0], s[1] = min(s[0], k), max(s[1], k)
        if ins.is_return():
            for v in ins.inputs:
                r = buffer_root(v)
                if r.id in span:
                    span[r.id][1] = len(instrs)
    return {a: (s[0], s[1]) for a, s in span.items()}


def assign_offsets(sizes: dict[int, int], spans: dict[int, tuple[int, int]]) -> tuple[dict[int, int], int]:
    """First-fit offsets, largest buffers first; buffers whose lifetimes overlap never overlap in
    memory (lifetimes are closed: a kernel's input and output never share bytes). Returns
    (offsets, arena size)."""
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first use, last use)
    offsets: dict[int, int] = {}
    for a in sorted(sizes, key=lambda x: (-sizes[x], spans[x][0], x)):
        size = aligned(max(sizes[a], 1))
        lo, hi = spans[a]
        busy = sorted((o, e) for o, e, s, t in placed if s <= hi and lo <= t)
        off = 0
        for o, e in busy:
            if off + size <= o:
                break
            off = max(off, aligned(e))
        offsets[a] = off
        placed.append((off, off + size, lo, hi))
    peak = max((e for _, e, _, _ in placed), default=0)
    return offsets, aligned(peak)


@dataclass(frozen=True)
class MemoryColoring(Pass):
    """Every `hip::allocate` becomes `load[offset=...]` from one `scratch` arena parameter; buffers
    with disjoint lifetimes share bytes. The arena's size (peak) against the sum of the buffers
    (naive) is what `memory_stats` reports."""

    name: ClassVar[str] = "memory_coloring"
    allocation_op: str = ALLOC

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        spans = live_intervals(module, (self.allocation_op,))
        allocs = {i.id: i for i in module if i.name == self.allocation_op and i.id in spans}
        if not allocs:
            return False
        offsets, peak = assign_offsets({a: i.shape.bytes() for a, i in allocs.items()}, spans)
        scratch = module.add_parameter("scratch", Shape.of("int8", [peak]))
        for a, ins in allocs.items():
            load = module.insert_instruction(ins, Op("load", shape=ins.shape, offset=offsets[a]), [scratch])
            module.replace_all_uses(ins, load)
            module.remove_instruction(ins)
        return True


@dataclass(frozen=True)
class MemoryStats:
    arena_bytes: int  # the planned arena (what is allocated)
    naive_bytes: int  # one buffer per allocation, no reuse
    buffers: int

    @property
    def saving(self) -> float:
        return 1.0 - self.arena_bytes / self.naive_bytes if self.naive_bytes else 0.0


def memory_stats(program: Program) -> MemoryStats:
    """Arena size vs the naive sum, read off a program after memory_coloring."""
    main = program.main
    arena = 0
    for ins in main:
        if ins.name == "hip::hip_allocate_memory" or (ins.is_param() and ins.param_name in ("scratch", "memory")):
            arena += ins.shape.bytes()
    loads: list[Instruction] = [i for i in main if i.name == "load"]
    allocs = [i for i in main if i.name in (ALLOC, "allocate")]
    naive = sum(aligned(i.shape.bytes()) for i in loads + allocs)
    arena += sum(aligned(i.shape.bytes()) for i in allocs)
    return MemoryStats(arena, naive, len(loads) + len(allocs))
