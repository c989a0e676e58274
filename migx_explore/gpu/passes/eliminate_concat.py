"""eliminate_concat (after lowering): producers of a concat write straight into one buffer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import Op, compute_shape
from migx_explore.compiler.pass_infra import Pass

from ..blas_plan import plan_gemm
from ..ops import inner_op, output_buffers


def _writes_any_layout(p: Instruction) -> bool:
    if p.name in ("gpu::precompile_op", "gpu::code_object") and p.op["outputs"] == 1:
        return True
    return p.name == "gpu::gemm"


@dataclass(frozen=True)
class EliminateConcat(Pass):
    """Producers of a concat write straight into slices of one buffer; the concat disappears
    (MIGraphX eliminate_concat with concat_gpu_optimization). Applies when every part is made by
    a kernel or GEMM whose buffer only it uses and whose value only the concat reads."""

    name: ClassVar[str] = "eliminate_concat"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        changed = False
        for ins in list(module):
            if ins.alive and ins.name == "gpu::precompile_op" and inner_op(ins.op["op"]).name == "concat":
                changed |= self._rewrite(module, ins)
        return changed

    def _rewrite(self, m: Module, cat: Instruction) -> bool:
        axis = inner_op(cat.op["op"])["axis"]
        parts = list(cat.inputs[:-1])
        buf = cat.inputs[-1]
        if buf.name != "allocate" or len(set(parts)) != len(parts):
            return False
        plans = []
        start = 0
        for p in parts:
            if not _writes_any_layout(p) or list(p.outputs) != [cat]:
                return False
            pbuf = output_buffers(p)[0]
            if pbuf.name != "allocate" or list(pbuf.outputs) != [p]:
                return False
            end = start + p.shape.lens[axis]
            sl = compute_shape(Op("slice", axes=[axis], starts=[start], ends=[end]), [buf.shape])
            if p.name == "gpu::gemm" and plan_gemm(p.inputs[0].shape, p.inputs[1].shape, sl) is None:
                return False
            plans.append((p, start, end))
            start = end
        order = m.index_of()
        first = min(parts, key=lambda p: order[output_buffers(p)[0].id])
        m.move_instruction(buf, output_buffers(first)[0])
        for p, s, e in plans:
            view = m.insert_instruction(p, Op("slice", axes=[axis], starts=[s], ends=[e]), [buf])
            m.replace_instruction(p, inputs=list(p.inputs[:-1]) + [view])
        alias = m.insert_instruction(cat, Op("gpu::concat_alias", axis=axis), [buf] + parts)
        m.replace_all_uses(cat, alias)
        m.remove_instruction(cat)
        return True
