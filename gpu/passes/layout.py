"""Layout passes after lowering: eliminate_contiguous, adjust_allocation, eliminate_concat."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...compiler.ir import Instruction, Module
from ...compiler.op import Op, compute_shape
from ...compiler.passes import Pass
from ..blas_plan import plan_gemm
from ..ops import WRAPPING_OPS, inner_op, output_buffers, split_inputs


def is_copy(ins: Instruction) -> bool:
    """A lowered `contiguous` (or an unlowered one, when lowering is switched off)."""
    if ins.name == "contiguous":
        return True
    return ins.name == "gpu::precompile_op" and ins.op["op"] == "contiguous" and not ins.module_inputs


def accepts_any_layout(user: Instruction, index: int, new_shape) -> bool:
    """Can `user` read input `index` with strides `new_shape` instead of a standard copy?"""
    if user.name in WRAPPING_OPS:
        _, _, outs = split_inputs(user.op, list(user.inputs))
        return user.inputs[index] not in outs  # generated kernels and numpy read any strides
    if user.name == "gpu::gemm" and index < 2:
        shapes = [i.shape for i in user.inputs]
        shapes[index] = new_shape
        return plan_gemm(shapes[0], shapes[1], shapes[-1]) is not None
    if user.op.has("view") and not user.op.has("require_std_shape"):
        try:  # the view's own users see the changed strides too
            shape = compute_shape(user.op, [new_shape if k == index else i.shape for k, i in enumerate(user.inputs)])
        except Exception:  # noqa: BLE001 - a view that cannot take the layout refuses
            return False
        return all(accepts_any_layout(u, list(u.inputs).index(user), shape) for u in user.outputs)
    return False


@dataclass(frozen=True)
class EliminateContiguous(Pass):
    """Remove a copy to standard layout when every consumer reads strided input directly (every
    generated kernel does; a BLAS operand does when its strides fit a BLAS call)."""

    name: ClassVar[str] = "eliminate_contiguous"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        changed = False
        for ins in list(module):
            if not ins.alive or not is_copy(ins):
                continue
            src = ins.inputs[0]
            users = list(ins.outputs)
            if not users or any(u.is_return() for u in users):
                continue
            # A copy of a value that is already standard changes nothing its users could see.
            same = src.shape.standard() and src.shape.lens == ins.shape.lens and src.shape.type == ins.shape.type
            if same or all(accepts_any_layout(u, list(u.inputs).index(ins), src.shape) for u in users):
                module.replace_all_uses(ins, src)
                module.remove_instruction(ins)
                changed = True
        return changed


@dataclass(frozen=True)
class AdjustAllocation(Pass):
    """Give a kernel's output buffer the layout the kernel naturally produces.

    A pointwise kernel over inputs that share a packed non-standard layout (NHWC after
    eliminate_contiguous) produces that layout; writing it standard would transpose on the fly.
    When consumers accept any layout the buffer is reallocated in the natural one (MIGraphX
    adjust_allocation). Run again with use_hip_allocate after replace_allocate."""

    name: ClassVar[str] = "adjust_allocation"
    use_hip_allocate: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        alloc_name = "hip::allocate" if self.use_hip_allocate else "allocate"
        changed = False
        for ins in list(module):
            if ins.name != "gpu::precompile_op" or ins.op["outputs"] != 1 or ins.module_inputs and ins.op["op"] not in (
                    "pointwise",):
                continue
            inner = inner_op(ins.op["op"])
            if inner.name != "pointwise" and not inner.has("pointwise"):
                continue
            ins_in, _, outs = split_inputs(ins.op, list(ins.inputs))
            buf = outs[0]
            if buf.name != alloc_name or len(buf.outputs) != 1:
                continue
            natural = compute_shape(inner, [i.shape for i in ins_in], ins.module_inputs)
            if natural.is_tuple or natural.strides == buf.shape.strides or not natural.packed():
                continue
            if not ins.outputs or not all(accepts_any_layout(u, list(u.inputs).index(ins), natural)
                                          for u in ins.outputs):
                continue
            new_buf = module.insert_instruction(buf, Op(alloc_name, shape=natural.with_type(buf.shape.type)))
            module.replace_instruction(ins, inputs=list(ins.inputs[:-1]) + [new_buf])
            changed = True
        return changed


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
