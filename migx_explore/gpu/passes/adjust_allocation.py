"""adjust_allocation (after lowering): give a kernel's output buffer the layout it naturally writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op, compute_shape
from migx_explore.compiler.pass_infra import Pass

from ..ops import inner_op, own_shapes, split_inputs
from .eliminate_contiguous import accepts_any_layout


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
            if (
                ins.name != "gpu::precompile_op"
                or ins.op["outputs"] != 1
                or ins.module_inputs
                and ins.op["op"] not in ("pointwise",)
            ):
                continue
            inner = inner_op(ins.op["op"])
            if inner.name != "pointwise" and not inner.has("pointwise"):
                continue
            outs = split_inputs(ins.op, list(ins.inputs))[2]
            buf = outs[0]
            if buf.name != alloc_name or len(buf.outputs) != 1:
                continue
            natural = compute_shape(inner, own_shapes(ins.op, [i.shape for i in ins.inputs]), ins.module_inputs)
            if natural.is_tuple or natural.strides == buf.shape.strides or not natural.packed():
                continue
            if not ins.outputs or not all(
                accepts_any_layout(u, list(u.inputs).index(ins), natural) for u in ins.outputs
            ):
                continue
            new_buf = module.insert_instruction(buf, Op(alloc_name, shape=natural.with_type(buf.shape.type)))
            module.replace_instruction(ins, inputs=list(ins.inputs[:-1]) + [new_buf])
            changed = True
        return changed
