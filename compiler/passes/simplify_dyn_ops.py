"""simplify_dyn_ops (MIGraphX src/simplify_dyn_ops.cpp).

Makes dynamic ops static where their inputs allow: a multi-input multibroadcast whose inputs are
all static becomes `multibroadcast{out_lens}`; `dimensions_of` a static shape becomes an int64
literal of those dimensions (find_static_dimensions_of); and, last, a select_module whose submodules all return
the same static shapes gets those as its output shapes (simplify_select_module_output_shape). A
no-op on programs without dynamic ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..op import Op
from ..shape import Shape
from .base import Pass


def _select_output_shapes(ins: Instruction) -> Shape | None:
    """Output shapes that are the same static shapes in every submodule, else None."""
    per_mod = [tuple(Shape.of(s.type, s.lens) for s in m.output_shapes()) for m in ins.module_inputs]
    if any(s.dyn_dims is not None for m in ins.module_inputs for s in m.output_shapes()):
        return None
    if len(set(per_mod)) != 1:
        return None
    return Shape.tuple_of(per_mod[0])


@dataclass(frozen=True)
class SimplifyDynOps(Pass):
    """Turn dynamic ops static where the inputs allow it."""

    name: ClassVar[str] = "simplify_dyn_ops"
    must_follow: ClassVar[tuple[str, ...]] = ("split_single_dyn_dim",)

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in list(module):
            if (ins.name == "multibroadcast" and len(ins.inputs) > 1
                    and all(i.shape.dyn_dims is None for i in ins.inputs)):
                with module.program.provenance([ins]):
                    new = module.insert_instruction(
                        ins, Op("multibroadcast", out_lens=ins.shape.lens), [ins.inputs[0]])
                module.replace_all_uses(ins, new)
                module.remove_instruction(ins)
                changed = True
            elif (ins.name == "dimensions_of" and ins.inputs[0].shape.dyn_dims is None
                  and not ins.inputs[0].shape.is_tuple):
                lens = ins.inputs[0].shape.lens[ins.op["start"]:ins.op["end"]]
                with module.program.provenance([ins]):
                    lit = module.add_literal(np.asarray(lens, np.int64), ins.shape)
                module.replace_all_uses(ins, lit)
                changed = True
        for ins in list(module):
            if ins.name != "select_module":
                continue
            out = _select_output_shapes(ins)
            if out is not None and out != ins.op["output_dyn_shapes"]:
                module.replace_instruction(ins, ins.op.with_(output_dyn_shapes=out))
                changed = True
        return changed
