"""capture_arguments: the calibration probes of quantize_int8 / quantize_fp8 (MIGraphX
src/quantize_8bits.cpp, capture_arguments_pass).

Every float input of a selected instruction (dot and convolution for int8; every op but convert
for fp8, as MIGraphX's quantize_fp8 selects) is routed through `capture[ins_index=k]`, an
identity the reference evaluator runs like any op. quantize_8bits then evaluates the program on
the calibration feeds, reads the largest magnitude each probe saw, and replaces the probe with a
quantizelinear / dequantizelinear pair of that scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from ..op import Op
from ..pass_infra import Pass

QUANTIZABLE_TYPES = ("float32", "float64", "float16")


@dataclass(frozen=True)
class CaptureArguments(Pass):
    name: ClassVar[str] = "capture_arguments"
    ins_names: tuple[str, ...] = ("dot", "convolution")

    def _selected(self, name: str) -> bool:
        if name in ("convert", "capture") or name.startswith("@"):
            return False
        return "all" in self.ins_names or name in self.ins_names

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":  # calibration runs main; submodule inputs are not probed
            return False
        index = 1 + max((ins.op["ins_index"] for ins in module if ins.name == "capture"), default=-1)
        changed = False
        for ins in list(module):
            if not self._selected(ins.name) or ins.is_param() or ins.is_literal() or ins.module_inputs:
                continue
            new_inputs = []
            for x in ins.inputs:
                if x.shape.type in QUANTIZABLE_TYPES:  # weights too: their scale comes from their values
                    with module.program.provenance([x]):
                        x = module.insert_instruction(ins, Op("capture", ins_index=index), [x])
                    index += 1
                new_inputs.append(x)
            if new_inputs != list(ins.inputs):
                module.replace_instruction(ins, ins.op, new_inputs)
                changed = True
        return changed
