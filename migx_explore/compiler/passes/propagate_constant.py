"""propagate_constant: constant folding (MIGraphX src/propagate_constant.cpp).

"Constant" is `Instruction.can_eval()`: a literal, or a context-free op whose inputs are all
constant. The pass finds the maximal constant subtrees, i.e. the constant non-literal inputs of
non-constant instructions (and the module's last instruction when it is itself constant),
evaluates each once on the host and replaces it with a packed `@literal`.

Skipped, as in MIGraphX: memory-expanding broadcasts (folding a broadcast bias would turn a
vector into a full tensor; the view stays and its input is folded instead), views of them
(transpose, slice, ... of a broadcast), anything in `skip_ops`, and ops without a host compute.
Folded literal data is immutable and shared: it is never copied again by snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Literal, Module
from ..op import Op
from ..pass_infra import Pass
from ..ref import eval_instruction
from ..shape import Shape

# Views that MIGraphX looks through when deciding whether folding would expand memory.
_LOOK_THROUGH = frozenset({"contiguous", "reshape", "dequantizelinear"})


def _expands_memory(ins: Instruction) -> bool:
    while True:
        s = ins.shape
        if not s.is_tuple and s.broadcasted() and s.element_space() < s.elements():
            return True
        if ins.name in _LOOK_THROUGH or (ins.op.spec.output_alias is not None and ins.inputs):
            idx = 0 if ins.name in _LOOK_THROUGH else ins.op.spec.output_alias(ins.op, [i.shape for i in ins.inputs])
            ins = ins.inputs[idx]
            continue
        return False


@dataclass(frozen=True)
class PropagateConstant(Pass):
    name: ClassVar[str] = "propagate_constant"
    skip_ops: tuple[str, ...] = ()

    def _foldable(self, ins: Instruction, cache: dict) -> bool:
        return (
            not ins.is_builtin()
            and ins.can_eval(cache)
            and ins.name not in self.skip_ops
            and not ins.shape.is_tuple
            and not _expands_memory(ins)
        )

    def apply_module(self, module: Module, ctx) -> bool:
        cache: dict = {}
        last = module.last
        roots: dict[int, Instruction] = {}
        for ins in module:
            if self._foldable(ins, cache):
                if ins is last and not (ins.name == "identity" and ins.inputs[0].is_literal()):
                    roots[ins.id] = ins
                continue  # inside a constant subtree: its consumer decides
            for i in ins.inputs:
                if self._foldable(i, cache):
                    roots[i.id] = i
        for ins in roots.values():
            data = np.asarray(eval_instruction(ins))
            lit = Literal(data, Shape.of(ins.shape.type, ins.shape.lens))
            with module.program.provenance([ins]):
                new = module.add_literal(lit)
            if ins is last and not ins.outputs:
                # The module's output by position: keep the slot, read the folded value.
                module.replace_instruction(ins, Op("identity"), [new])
            else:
                module.replace_all_uses(ins, new)
        return bool(roots)
