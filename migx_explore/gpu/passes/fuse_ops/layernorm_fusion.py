"""Layernorm with its elementwise neighbours in one kernel (part of fuse_ops).

A post-LN block computes  layernorm(gemm + bias + residual) * gamma + beta : lowered, that is a
GEMM, a pointwise kernel (bias, residual), the layernorm kernel and another pointwise kernel.
When the pointwise producer is used by the layernorm alone, both pointwise bodies move into one
`fused_reduce` kernel around the layernorm (a prologue before the row statistics, an epilogue
after), so the GEMM writes its raw product and one kernel does the rest. MIGraphX gets the same
from fuse_pointwise_reduce before prefuse_ops splits the layernorm out; here prefuse_ops has
already made `layernorm`, so the backend does it.
"""

from __future__ import annotations

from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.passes.fusion_helpers import copy_body
from migx_explore.compiler.shape import Shape

from ...codegen import EPILOGUE_REDUCTIONS
from ...codegen.reduce import synthesize
from ...ops import inner_op, op_text, split_inputs


def _pointwise(ins: Instruction) -> bool:
    if ins.name != "gpu::precompile_op" or ins.op["outputs"] != 1 or ins.op["ninputs"] != -1:
        return False
    inner = inner_op(ins.op["op"])
    return (inner.name == "pointwise" and len(ins.module_inputs) == 1) or (
        inner.has("pointwise") and not ins.module_inputs
    )


def _elementwise(dst: Module, ins: Instruction, args: list[Instruction]) -> Instruction:
    """ins (a lowered pointwise kernel) applied to `args` inside `dst`."""
    if ins.module_inputs:
        return dst.add_instruction(Op("pointwise"), args, [ins.module_inputs[0]])
    return dst.add_instruction(inner_op(ins.op["op"]), args)


def fuse_layernorm_neighbours(m: Module, ln: Instruction, ctx) -> bool:
    """pointwise -> layernorm [-> pointwise] as one fused_reduce kernel; False if it does not apply."""
    if ln.name != "gpu::precompile_op" or ln.module_inputs or ln.op["outputs"] != 1:
        return False
    inner = inner_op(ln.op["op"])
    if inner.name not in EPILOGUE_REDUCTIONS:
        return False
    own, _, _ = split_inputs(ln.op, list(ln.inputs))
    k = next((j for j, x in enumerate(own) if _pointwise(x) and list(x.outputs) == [ln]), None)
    if k is None:
        return False
    pre = own[k]
    post = ln.outputs[0] if len(ln.outputs) == 1 and _pointwise(ln.outputs[0]) else None
    if post is not None and post.shape.lens != ln.shape.lens:
        post = None
    last = post or ln
    mod = ctx.create_module(ctx.unique_module_name("main:layernorm"))
    mod.bypass = True
    inputs: list[Instruction] = []
    slots: dict[int, Instruction] = {}

    def param(x: Instruction) -> Instruction:
        if x.id not in slots:
            slots[x.id] = mod.add_parameter(f"x{len(inputs)}", Shape.of(x.shape.type, x.shape.lens))
            inputs.append(x)
        return slots[x.id]

    pre_in = split_inputs(pre.op, list(pre.inputs))[0]
    value = _elementwise(mod, pre, [param(x) for x in pre_in])
    args = [value if j == k else param(x) for j, x in enumerate(own)]
    body, axes = synthesize(inner, [x.shape for x in own])
    value = copy_body(body, mod, {p.id: a for p, a in zip(body.params(), args)})[0]
    if post is not None:
        post_in = split_inputs(post.op, list(post.inputs))[0]
        value = _elementwise(mod, post, [value if x is ln else param(x) for x in post_in])
    mod.add_return([value])
    buf = split_inputs(last.op, list(last.inputs))[2]
    op = Op("gpu::precompile_op", op=op_text(Op("fused_reduce", axes=axes)), ninputs=-1, outputs=1)
    with m.program.provenance([pre, ln] + ([post] if post is not None else [])):
        new = m.insert_instruction(last, op, inputs + buf, [mod])
    m.replace_all_uses(last, new)
    for x in (post, ln, pre):
        if x is not None:
            m.remove_instruction(x)
    return True
