"""fuse_horizontal (MIGraphX src/fuse_horizontal.cpp, gather_horizontal_fusion): four or more
independent embedding lookups, axis-0 gathers from constant 2-D tables with the same row width,
index type and index trailing dims, become one gather over the concatenated tables, with each
index offset by the rows of the tables before it; the result is sliced back apart along axis 0.

    gather(T1, i1), ..., gather(T4, i4)
      ==>  g = gather(concat(T1, ..., T4), concat(i1, i2 + rows(T1), ...))
           slice(g, [0, n1)), slice(g, [n1, n1 + n2)), ...

As MIGraphX: fewer than four gathers, a non-constant or non-2-D table, or a scalar index are left
alone. Where we differ, on purpose: a negative index counts from the end of its own table, and
MIGraphX adds the offset to it as is, so it then reads rows of the table before; we wrap a signed
non-constant index with `mod(i, rows)` first (constant indices are wrapped and offset at compile
time). A table several gathers share is concatenated once.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..op import Op
from ..pass_infra import Pass
from ..ref import eval_instruction
from ..shape import Shape
from .fusion_helpers import depends_on, ensure_order

MIN_GROUP = 4  # MIGraphX gather_horizontal_fusion::min_group_size


def _key(g: Instruction) -> tuple | None:
    """The group a candidate gather joins (MIGraphX's is_candidate and group_key), or None."""
    data, ind = g.inputs
    if data.shape.ndim != 2 or g.op["axis"] % 2 != 0 or not data.can_eval():
        return None
    if (
        data.shape.dyn_dims is not None
        or ind.shape.dyn_dims is not None
        or ind.shape.ndim == 0
        or ind.shape.scalar_shape()
    ):
        return None
    return (data.shape.type, data.shape.lens[1], ind.shape.type, tuple(ind.shape.lens[1:]))


def _offset_index(module: Module, before: Instruction, ind: Instruction, rows: int, offset: int) -> Instruction:
    if ind.can_eval():
        v = np.asarray(eval_instruction(ind)).astype(np.int64)
        v = np.where(v < 0, v + rows, v) + offset
        return module.add_literal(v.astype(ind.shape.dtype.np_dtype), Shape.of(ind.shape.type, ind.shape.lens))
    if offset == 0 and not ind.shape.dtype.is_signed:
        return ind

    def const(v: int) -> Instruction:
        lit = module.add_literal(np.asarray(v, ind.shape.dtype.np_dtype), Shape.scalar(ind.shape.type))
        return module.insert_instruction(before, Op("multibroadcast", out_lens=ind.shape.lens), [lit])

    wrapped = module.insert_instruction(before, Op("mod"), [ind, const(rows)]) if ind.shape.dtype.is_signed else ind
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
        idx = [
            _offset_index(module, before, g.inputs[1], g.inputs[0].shape.lens[0], tables[g.inputs[0].id])
            for g in gathers
        ]
        all_idx = module.insert_instruction(before, Op("concat", axis=0), idx)
        fused = module.insert_instruction(before, Op("gather", axis=0), [table, all_idx])
        start = 0
        for g in gathers:
            n = g.inputs[1].shape.lens[0]
            part = module.insert_instruction(
                before, Op("slice", axes=(0,), starts=(start,), ends=(start + n,)), [fused]
            )
            module.replace_all_uses(g, part)
            start += n
    for g in gathers:
        module.remove_instruction(g)
    ensure_order(module)


@dataclass(frozen=True)
class FuseHorizontal(Pass):
    """Fuse four or more sibling embedding lookups (axis-0 gathers from constant 2-D tables of one
    row width) into one gather."""

    name: ClassVar[str] = "fuse_horizontal"

    def apply_module(self, module: Module, ctx) -> bool:
        groups: dict[tuple, list[Instruction]] = defaultdict(list)
        for ins in module:
            if ins.name == "gather":
                k = _key(ins)
                if k is not None:
                    groups[k].append(ins)
        changed = False
        for members in groups.values():
            chosen: list[Instruction] = []
            for g in members:  # keep only gathers independent of those already chosen
                if not any(depends_on(g, c) or depends_on(c, g) for c in chosen):
                    chosen.append(g)
            if len(chosen) >= MIN_GROUP:
                fuse_group(module, chosen)
                changed = True
        return changed
