"""eliminate_data_type (MIGraphX src/eliminate_data_type.cpp): compute ops that read an unsupported
type in a supported one, through converts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import dtypes
from ..ir import Instruction, Module
from ..op import Op
from ..pass_infra import Pass

# Ops eliminate_data_type leaves alone unless named explicitly (MIGraphX's skip_op_names).
SKIP_OPS = frozenset(
    {
        "convert",
        "get_tuple_elem",
        "if",
        "loop",
        "roialign",
        "nonmaxsuppression",
        "scatternd_add",
        "scatternd_mul",
        "scatternd_none",
        "select_module",
    }
)


# Ops whose computation on other types is another op (MIGraphX's `general_data_type` attribute):
# quant_dot on float inputs is a dot.
GENERAL_DATA_TYPE = {"quant_dot": "dot", "quant_convolution": "convolution"}


def convert_to_supported(module: Module, ins: Instruction, unsupported: frozenset[str], target: str) -> bool:
    """Compute `ins` in `target`: convert its unsupported-typed inputs, convert the result back
    (through each get_tuple_elem user for a tuple result, as MIGraphX)."""
    if ins.module_inputs or not any(i.shape.type in unsupported for i in ins.inputs):
        return False
    if ins.shape.is_tuple and not all(o.name == "get_tuple_elem" for o in ins.outputs):
        return False
    op = ins.op
    if ins.name in GENERAL_DATA_TYPE:
        op = Op(GENERAL_DATA_TYPE[ins.name], dict(ins.op.attrs))
    with module.program.provenance([ins]):
        args = [
            module.insert_instruction(ins, Op("convert", target_type=target), [i]) if i.shape.type in unsupported else i
            for i in ins.inputs
        ]
        out = module.insert_instruction(ins, op, args)
        if ins.shape.is_tuple:
            for gte in list(ins.outputs):
                elem = module.insert_instruction(ins, gte.op, [out])
                if elem.shape.type != gte.shape.type:
                    elem = module.insert_instruction(ins, Op("convert", target_type=gte.shape.type), [elem])
                module.replace_all_uses(gte, elem)
                module.remove_instruction(gte)
        elif out.shape.type != ins.shape.type:
            out = module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [out])
    if not ins.shape.is_tuple:
        module.replace_all_uses(ins, out)
    module.remove_instruction(ins)
    return True


def _literals_fit(ins: Instruction, unsupported: frozenset[str], target: str) -> bool:
    """Every input of an unsupported type is a literal whose values the target type holds."""
    info = np.iinfo(dtypes.np_dtype(target)) if dtypes.np_dtype(target).kind in "iu" else None
    for i in ins.inputs:
        if i.shape.type not in unsupported:
            continue
        if not i.is_literal():
            return False
        v = np.asarray(i.literal.data)
        if info is not None and v.size and (v.min() < info.min or v.max() > info.max):
            return False
    return True


@dataclass(frozen=True)
class EliminateDataType(Pass):
    """Wrap the listed ops (or all) that read an unsupported type in converts so they compute in
    target_type; the result is converted back to the type users expect."""

    name: ClassVar[str] = "eliminate_data_type"
    unsupported_types: tuple[str, ...] = ()
    target_type: str = "float32"
    unsupported_ops: tuple[str, ...] = ("all",)
    # Convert only where every input of an unsupported type is a literal whose values fit the
    # target type: a fed or computed int64 index may not fit int32 (2^32 + 1 would wrap to 1 and
    # pass every range check), so those ops keep their 64-bit inputs.
    literals_that_fit: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        if not self.unsupported_types:
            return False
        bad = frozenset(dtypes.dtype(t).name for t in self.unsupported_types)
        target = dtypes.dtype(self.target_type).name
        every = "all" in self.unsupported_ops
        changed = False
        for ins in list(module):
            if ins.is_builtin() or (ins.name in SKIP_OPS and ins.name not in self.unsupported_ops):
                continue
            if every or ins.name in self.unsupported_ops:
                if self.literals_that_fit and not _literals_fit(ins, bad, target):
                    continue
                changed = convert_to_supported(module, ins, bad, target) or changed
        return changed
