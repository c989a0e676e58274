"""truncate_float: the pass behind quantize_fp16 / quantize_bf16 (MIGraphX src/truncate_float.cpp,
driven by src/quantization.cpp).

Every selected instruction (all by default) is recomputed in the low float type: each float32 /
float64 input gets a `convert` to the low type, the op is re-inserted on the converted inputs and
its result converted back to its original type, so the program's interface does not change:

    add(x, y)  ->  convert[float32](add(convert[half](x), convert[half](y)))

The optimize_module that quantize_fp16 runs next collapses the back-to-back converts this leaves
between neighbours (find_nested_convert) and folds converted literals (weights stored in half).
As in MIGraphX, `convert` and instructions without inputs are skipped, and an op with a tuple
result (topk) is recomputed in the low type with each get_tuple_elem user converted back. We also
skip instructions with submodules (MIGraphX re-inserts them on converted inputs without converting
back, which changes their result type; If/Loop bodies keep fp32 here).
Reductions stay numerically sound without special-casing: the GPU reduce, softmax and layernorm
kernels and the reference evaluator accumulate half and bf16 in float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import dtypes
from ..errors import MigxError
from ..ir import Module
from ..op import Op
from .base import Pass

LOW_FLOAT_TYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class TruncateFloat(Pass):
    name: ClassVar[str] = "truncate_float"
    note: ClassVar[str] = "instructions with submodules keep their precision"
    ins_names: tuple[str, ...] = ("all",)
    float_type: str = "float16"

    def __post_init__(self):
        if dtypes.dtype(self.float_type).name not in LOW_FLOAT_TYPES:
            raise MigxError(f"truncate_float: float_type must be one of {', '.join(LOW_FLOAT_TYPES)}, "
                            f"got {self.float_type!r}")

    def _selected(self, name: str) -> bool:
        return "all" in self.ins_names or name in self.ins_names

    def apply_module(self, module: Module, ctx) -> bool:
        low = dtypes.dtype(self.float_type).name
        changed = False
        for ins in list(module):
            if (not self._selected(ins.name) or ins.name == "convert" or not ins.inputs or ins.is_return()
                    or ins.module_inputs):
                continue
            if not any(i.shape.type in ("float32", "float64") for i in ins.inputs):
                continue
            with module.program.provenance([ins]):
                inputs = [module.insert_instruction(ins, Op("convert", target_type=low), [i])
                          if i.shape.type in ("float32", "float64") else i for i in ins.inputs]
                low_ins = module.insert_instruction(ins, ins.op, inputs)
                if ins.shape.is_tuple:  # convert back through each get_tuple_elem user
                    for gte in list(ins.outputs):
                        elem = module.insert_instruction(ins, gte.op, [low_ins])
                        back = elem if elem.shape.type == gte.shape.type else module.insert_instruction(
                            ins, Op("convert", target_type=gte.shape.type), [elem])
                        module.replace_all_uses(gte, back)
                        module.remove_instruction(gte)
                    module.remove_instruction(ins)
                    changed = True
                    continue
                out = low_ins
                if low_ins.shape.type != ins.shape.type:
                    out = module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [low_ins])
            module.replace_all_uses(ins, out)
            module.remove_instruction(ins)
            changed = True
        return changed
