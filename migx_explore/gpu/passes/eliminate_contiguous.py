"""eliminate_contiguous (after lowering): drop copies whose readers take any layout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import compute_shape
from migx_explore.compiler.pass_infra import Pass
from migx_explore.compiler.ref import eval_instruction

from ..blas_plan import QUANT_ALIGN, plan_gemm, quant_blas_refusal
from ..codegen.attention import attention_layout_refusal
from ..ops import WRAPPING_OPS, inner_op, split_inputs


def is_copy(ins: Instruction) -> bool:
    """A lowered `contiguous` (or an unlowered one, when lowering is switched off)."""
    if ins.name == "contiguous":
        return True
    return ins.name == "gpu::precompile_op" and ins.op["op"] == "contiguous" and not ins.module_inputs


def accepts_any_layout(user: Instruction, index: int, new_shape) -> bool:
    """Can `user` read input `index` with strides `new_shape` instead of a standard copy?"""
    if user.name in WRAPPING_OPS:
        _, _, outs = split_inputs(user.op, list(user.inputs))
        if user.inputs[index] in outs:
            return False
        inner = inner_op(user.op["op"])
        if inner.name == "group" and inner["tag"] == "attention" and user.module_inputs:
            # the kernel reads an input through the group's views (fold_attention_views) only
            # where they compose into strides with this layout
            shapes = [i.shape for i in user.inputs]
            shapes[index] = new_shape
            return attention_layout_refusal(user.module_inputs[0], shapes) is None
        if inner.name == "convolution" and index < 2:
            # lowering laid this input out channels-last for the implicit-GEMM kernel
            return _keeps_implicit_gemm(inner, [i.shape for i in user.inputs], index, new_shape)
        return True  # generated kernels and numpy read any strides
    if user.name == "gpu::gemm" and index < 2:
        shapes = [i.shape for i in user.inputs]
        shapes[index] = new_shape
        plan = plan_gemm(shapes[0], shapes[1], shapes[-1])
        if plan is None:
            return False
        now = plan_gemm(*(i.shape for i in (user.inputs[0], user.inputs[1], user.inputs[-1])))
        if now is not None and len(plan.offsets) > len(now.offsets) + 1:
            # Batch axes no one stride steps through are looped on the host, one BLAS call each:
            # Swin's window partition read in place was 64 calls of ~2.5 us where the copy and one
            # call cost ~5 us. Keep the copy where it saves more calls than the one launch it is.
            return False
        if plan.dtype in QUANT_ALIGN:  # 8-bit BLAS needs its TN layout kept
            from .lowering import quant_blas_types

            return quant_blas_refusal(plan, quant_blas_types()) is None
        return True
    if (
        (user.op.has("view") and not user.op.has("require_std_shape"))
        or user.name == "pointwise"
        or (user.op.has("pointwise") and not user.name.startswith("gpu::"))
    ):
        # elementwise ops (a fused pointwise module, evaluated or generated per element) and views
        # take any strides; as MIGraphX's try_compute_shape, the result must then stay unchanged,
        # or every user must take its new strides too (not the module's output). Unlike MIGraphX, a
        # result that turns standard is checked too: an 8-bit BLAS operand must keep its TN layout.
        try:
            shape = compute_shape(
                user.op, [new_shape if k == index else i.shape for k, i in enumerate(user.inputs)], user.module_inputs
            )
        except Exception:  # noqa: BLE001 - an op that cannot take the layout refuses
            return False
        if shape == user.shape:  # its users see exactly what they saw
            return True
        users = list(user.outputs)
        return bool(users) and all(accepts_any_layout(u, list(u.inputs).index(user), shape) for u in users)
    return False


def _keeps_implicit_gemm(op, shapes: list, index: int, new_shape) -> bool:
    """False where the convolution's inputs fit the implicit-GEMM kernel now and would not with
    input `index` read as `new_shape` (the direct kernel would then run it, many times slower)."""
    from ..codegen.conv_igemm import fits_implicit_gemm

    changed = list(shapes)
    changed[index] = new_shape
    return fits_implicit_gemm(op, changed[0], changed[1], changed[-1]) or not fits_implicit_gemm(
        op, shapes[0], shapes[1], shapes[-1]
    )


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
            elif ins.name == "contiguous" and src.can_eval():
                # a copy that must stay, of a constant: MIGraphX stores it copied, as a literal
                lit = module.add_literal(np.ascontiguousarray(eval_instruction(ins)), ins.shape)
                module.replace_all_uses(ins, lit)
                module.remove_instruction(ins)
                changed = True
        return changed
