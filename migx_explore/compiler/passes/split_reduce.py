"""split_reduce (MIGraphX src/split_reduce.cpp): spread a large fused_reduce over many workgroups."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..ir import Instruction, Module
from ..op import Op
from ..pass_infra import Pass
from .fusion_helpers import depends_on, drop_if_unused, new_submodule, param_name


def reduce_size(ins: Instruction) -> int:
    # Inputs can have lower rank than the reduction (broadcast inside the submodule): read the
    # reduced extents from a full-rank input.
    lens = max((i.shape.lens for i in ins.inputs), key=len)
    return math.prod(lens[a] for a in ins.op["axes"])


def _split_plan(rm: Module) -> list[Instruction] | str:
    reduces = [i for i in rm if i.op.has("reduce")]
    if not reduces:
        return "no reduction inside"
    if any(i.name != "reduce_sum" for i in reduces):
        return "only reduce_sum can be split (partial results are added atomically)"
    if any(i.shape.type not in ("float32", "float16") for i in reduces):
        return "only float and half reductions are split"
    if any(depends_on_any(r, reduces) for r in reduces):
        return "a reduction depends on another one (would need two global syncs)"
    return reduces


def depends_on_any(a: Instruction, others: list[Instruction]) -> bool:
    return any(o is not a and depends_on(a, o) for o in others)


def split_fused_reduce(module: Module, ins: Instruction, reduces: list[Instruction]) -> None:
    """ins = fused_reduce(...), [rm]  ==>  split_fused_reduce of the part up to the reductions, then
    the rest of rm inlined into `module` on its results (fuse_pointwise fuses it afterwards)."""
    prog = module.program
    rm = ins.module_inputs[0]
    splitm = new_submodule(prog, rm.name + "_split", exact=True)
    # Part one: the reductions and what they read.
    need: dict[int, Instruction] = {}
    stack = list(reduces)
    while stack:
        x = stack.pop()
        if x.id not in need:
            need[x.id] = x
            stack.extend(x.inputs)
    mapping: dict[int, Instruction] = {}
    inputs: list[Instruction] = []
    for p, x in zip(rm.params(), ins.inputs):
        if p.id in need:
            mapping[p.id] = splitm.add_parameter(param_name(len(inputs)), p.shape)
            inputs.append(x)
    for x in rm:
        if x.id in need and not x.is_param():
            mapping[x.id] = (
                splitm.add_literal(x.literal)
                if x.is_literal()
                else splitm.add_instruction(x.op, [mapping[i.id] for i in x.inputs], x.module_inputs)
            )
    splitm.add_return([mapping[r.id] for r in reduces])
    split = module.insert_instruction(ins, Op("split_fused_reduce", axes=ins.op["axes"]), inputs, [splitm])
    results = (
        [split]
        if len(reduces) == 1
        else [module.insert_instruction(ins, Op("get_tuple_elem", index=k), [split]) for k in range(len(reduces))]
    )
    # Part two: everything after the reductions, recomputed in the parent from the same inputs.
    outer: dict[int, Instruction] = {p.id: x for p, x in zip(rm.params(), ins.inputs)}
    outer.update({r.id: v for r, v in zip(reduces, results)})
    for x in rm:
        if x.id in outer or x.is_param() or x.is_return():
            continue
        if x.is_literal():
            outer[x.id] = module.add_literal(x.literal)
        else:
            outer[x.id] = module.insert_instruction(ins, x.op, [outer[i.id] for i in x.inputs], x.module_inputs)
    module.replace_all_uses(ins, outer[rm.output_instructions()[0].id])
    module.remove_instruction(ins)
    drop_if_unused(prog, [rm])


@dataclass(frozen=True)
class SplitReduce(Pass):
    """A fused_reduce over more than split_size elements becomes a split_fused_reduce (many
    workgroups per output, partial sums added atomically: `assign_add`) followed by its elementwise
    tail, which needs the finished sums and so moves out into the parent (MIGraphX split_reduce)."""

    name: ClassVar[str] = "split_reduce"
    must_follow: ClassVar[tuple[str, ...]] = ("fuse_reduce",)
    split_size: int = 65280

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in list(module):
            if ins.name != "fused_reduce" or not ins.alive or reduce_size(ins) <= self.split_size:
                continue
            plan = _split_plan(ins.module_inputs[0])
            if isinstance(plan, str):
                continue
            with module.program.provenance([ins]):
                split_fused_reduce(module, ins, plan)
            changed = True
        return changed
