"""normalize_ops: rewrite every op into its canonical attribute form (non-negative axes, clamped
slice bounds) using the op spec's `normalize`. MIGraphX runs it first in `required` and again at
the end of `backend`; later passes may then compare attributes directly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from ..pass_infra import Pass

# Normalizers that read input lens (not just rank): with a dynamic input the lens are maxima, and
# clamping against them would be wrong for a smaller run-time size.
_LENS_DEPENDENT = frozenset({"slice"})


@dataclass(frozen=True)
class NormalizeOps(Pass):
    name: ClassVar[str] = "normalize_ops"

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in module:
            spec = ins.op.spec
            if spec.normalize is None or not ins.inputs or ins.is_builtin():
                continue
            shapes = [i.shape for i in ins.inputs]
            if shapes[0].dynamic_shape and ins.name in _LENS_DEPENDENT:
                continue
            op = spec.normalize(ins.op, shapes)
            if op != ins.op:
                module.replace_instruction(ins, op)
                changed = True
        return changed
