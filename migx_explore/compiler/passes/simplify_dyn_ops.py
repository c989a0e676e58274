"""simplify_dyn_ops (MIGraphX src/simplify_dyn_ops.cpp).

Makes dynamic ops static where their inputs allow: a multi-input multibroadcast whose inputs are
all static becomes `multibroadcast{out_lens}`; a runtime-shape op whose data input is static and
whose value inputs are literals becomes its static form (reshape, multibroadcast, slice;
compiler/ops/dynamic_values.py); `dimensions_of` a static shape becomes an int64 literal of those
dimensions when they are fixed, even in a dynamic shape (find_static_dimensions_of); and, last, a
select_module gets as output shapes the ranges that cover its submodules' outputs, static where
they all agree (simplify_select_module_output_shape). A no-op on programs without dynamic ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..op import Op
from ..ops.dynamic_values import DYNAMIC_VALUE_OPS, static_form
from ..pass_infra import Pass
from ..shape import Shape


def _range(s: Shape) -> list[tuple[int, int]]:
    return [(d.min, d.max) for d in s.dyn_dims] if s.dyn_dims is not None else [(n, n) for n in s.lens]


def _select_output_shapes(ins: Instruction) -> Shape | None:
    """MIGraphX simplify_select_module_output_shape: per output, the range that covers that output
    of every submodule (static where they all agree); None where outputs differ in rank or type."""
    per_mod = [list(m.output_shapes()) for m in ins.module_inputs]
    if not per_mod:
        return None
    first = per_mod[0]
    if any([(s.type, s.ndim) for s in outs] != [(s.type, s.ndim) for s in first] for outs in per_mod[1:]):
        return None
    shapes = []
    for k, s0 in enumerate(first):
        ranges = [_range(outs[k]) for outs in per_mod]
        lo = [min(r[a][0] for r in ranges) for a in range(s0.ndim)]
        hi = [max(r[a][1] for r in ranges) for a in range(s0.ndim)]
        shapes.append(Shape.of(s0.type, lo) if lo == hi else Shape.dynamic(s0.type, list(zip(lo, hi))))
    return Shape.tuple_of(shapes)


def _static_form(ins: Instruction):
    """A runtime-shape op (reshape_with_dims, broadcast_with_dims, slice_with_bounds,
    broadcast_for_dot) made static when its data input is static and its value inputs literals."""
    if ins.name == "fill_with_dims":
        return None  # all its inputs are values: propagate_constant folds it
    values = [i.literal.data if i.is_literal() else None for i in ins.inputs]
    found = static_form(ins.op, ins.inputs, values)
    return None if found is None or found[0] == ins.op else found


def _fixed_dims(s: Shape, start: int, end: int) -> list[int] | None:
    """The lens from start to end when all of them are fixed (find_static_dimensions_of)."""
    if s.is_tuple:
        return None
    if s.dyn_dims is None:
        return list(s.lens[start:end])
    dims = s.dyn_dims[start:end]
    return [d.min for d in dims] if all(d.min == d.max for d in dims) else None


@dataclass(frozen=True)
class SimplifyDynOps(Pass):
    """Turn dynamic ops static where the inputs allow it."""

    name: ClassVar[str] = "simplify_dyn_ops"
    must_follow: ClassVar[tuple[str, ...]] = ("split_single_dyn_dim",)

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in list(module):
            if (
                ins.name == "multibroadcast"
                and len(ins.inputs) > 1
                and all(i.shape.dyn_dims is None for i in ins.inputs)
            ):
                with module.program.provenance([ins]):
                    new = module.insert_instruction(ins, Op("multibroadcast", out_lens=ins.shape.lens), [ins.inputs[0]])
                module.replace_all_uses(ins, new)
                module.remove_instruction(ins)
                changed = True
            elif (
                ins.name == "dimensions_of"
                and (lens := _fixed_dims(ins.inputs[0].shape, ins.op["start"], ins.op["end"])) is not None
            ):
                with module.program.provenance([ins]):
                    lit = module.add_literal(np.asarray(lens, np.int64), ins.shape)
                module.replace_all_uses(ins, lit)
                changed = True
            elif ins.name in DYNAMIC_VALUE_OPS and (found := _static_form(ins)) is not None:
                op, args = found
                with module.program.provenance([ins]):
                    new = module.insert_instruction(ins, op, args)
                module.replace_all_uses(ins, new)
                module.remove_instruction(ins)
                changed = True
        for ins in list(module):
            if ins.name != "select_module":
                continue
            out = _select_output_shapes(ins)
            if out is not None and out != ins.op["output_dyn_shapes"]:
                module.replace_instruction(ins, ins.op.with_(output_dyn_shapes=out))
                changed = True
        return changed
