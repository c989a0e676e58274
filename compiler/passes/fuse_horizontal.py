"""fuse_horizontal (MIGraphX src/include/migraphx/fuse_horizontal.hpp): independent gathers along
axis 0 whose tables share the embedding shape (lens[1:]) and type become one gather over the
concatenated tables, with each index offset by the rows of the tables before it; the results are
sliced back apart and reshaped.

    gather(T1, i1), gather(T2, i2)
      ==>  g = gather(concat(T1, T2), concat(flat(i1), flat(i2) + rows(T1)))
           slice(g, [0, n1)) -> reshape,  slice(g, [n1, n1 + n2)) -> reshape

Negative indices count from the end of their own table, so a non-constant index is first wrapped
with `mod(i, rows)`; constant indices are wrapped and offset at compile time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..op import Op
from ..shape import Shape
from ._fusion_util import depends_on, ensure_order
from .base import Pass


def _key(g: Instruction) -> tuple | None:
    data, ind = g.inputs
    if g.op["axis"] % max(data.shape.ndim, 1) != 0 or data.shape.dyn_dims is not None or ind.shape.dyn_dims is not None:
        return None
    return (data.shape.type, data.shape.lens[1:], ind.shape.type)


def _flat_index(module: Module, before: Instruction, ind: Instruction, rows: int, offset: int) -> Instruction:
    n = max(ind.shape.elements(), 1)
    if ind.can_eval():
        v = np.asarray(ind.eval()).reshape(-1).astype(np.int64)
        v = np.where(v < 0, v + rows, v) + offset
        return module.add_literal(v.astype(ind.shape.dtype.np_dtype), Shape.of(ind.shape.type, (n,)))
    flat = module.insert_instruction(before, Op("reshape", dims=(n,)), [
        ind if ind.shape.standard() else module.insert_instruction(before, Op("contiguous"), [ind])])
    if offset == 0 and not ind.shape.dtype.is_signed:
        return flat

    def const(v: int) -> Instruction:
        lit = module.add_literal(np.asarray(v, ind.shape.dtype.np_dtype), Shape.scalar(ind.shape.type))
        return module.insert_instruction(before, Op("multibroadcast", out_lens=(n,)), [lit])

    wrapped = module.insert_instruction(before, Op("mod"), [flat, const(rows)]) if ind.shape.dtype.is_signed else flat
    return module.insert_instruction(before, Op("add"), [wrapped, const(offset)]) if offset else wrapped


def fuse_group(module: Module, gathers: list[Instruction]) -> None:
    order = module.index_of()
    gathers = sorted(gathers, key=lambda g: order[g.id])
    before = gathers[-1]
    with module.program.provenance(gathers):
        tables: dict[int, int] = {}  # a table shared by several gathers is concatenated once
        rows_so_far = 0
        for g in gathers:
            t = g.inputs[0]
            if t.id not in tables:
                tables[t.id] = rows_so_far
                rows_so_far += t.shape.lens[0]
        uniq = list(dict.fromkeys(g.inputs[0] for g in gathers))
        table = module.insert_instruction(before, Op("concat", axis=0), uniq) if len(uniq) > 1 else uniq[0]
        idx = [_flat_index(module, before, g.inputs[1], g.inputs[0].shape.lens[0], tables[g.inputs[0].id])
               for g in gathers]
        all_idx = module.insert_instruction(before, Op("concat", axis=0), idx)
        fused = module.insert_instruction(before, Op("gather", axis=0), [table, all_idx])
        start = 0
        for g in gathers:
            n = max(g.inputs[1].shape.elements(), 1)
            part = module.insert_instruction(before, Op("slice", axes=(0,), starts=(start,), ends=(start + n,)),
                                             [fused])
            module.replace_all_uses(g, module.insert_instruction(before, Op("reshape", dims=g.shape.lens), [part]))
            start += n
    for g in gathers:
        module.remove_instruction(g)
    ensure_order(module)


@dataclass(frozen=True)
class FuseHorizontal(Pass):
    """Fuse sibling embedding lookups (axis-0 gathers with the same row shape) into one gather."""

    name: ClassVar[str] = "fuse_horizontal"

    def apply_module(self, module: Module, ctx) -> bool:
        groups: dict[tuple, list[Instruction]] = defaultdict(list)
        for ins in module:
            if ins.name == "gather" and ins.inputs[0].shape.ndim >= 1:
                k = _key(ins)
                if k is not None:
                    groups[k].append(ins)
        changed = False
        for members in groups.values():
            chosen: list[Instruction] = []
            for g in members:  # keep only gathers independent of those already chosen
                if not any(depends_on(g, c) or depends_on(c, g) for c in chosen):
                    chosen.append(g)
            if len(chosen) >= 2:
                fuse_group(module, chosen)
                changed = True
        return changed
