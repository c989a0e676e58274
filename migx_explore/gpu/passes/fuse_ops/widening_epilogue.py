"""A half-precision GEMM whose result is only widened to float32 after constants are added to
it (part of fuse_ops).

At fp16 a model's last Linear feeding a float32 output computes float32(x·W + bias): lowered,
that is the half GEMM and a pointwise kernel (add, convert), where the float32 program's GEMM
took the bias into its BLAS call and launched nothing after it. cuBLAS multiplies half operands
into a float32 result (float accumulation either way), so here the GEMM writes the consumer's
float32 buffer itself and the addends, made float32 constants, become its epilogue, which
blas_epilogue then hands to cuBLASLt (bias) or to beta = 1 (a full-shape C). The sum is formed
in float32 rather than rounded to half first: closer to the float model, not further.
"""

from __future__ import annotations

import numpy as np

from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape

from ...blas_plan import plan_gemm

HALF_TYPES = ("float16", "bfloat16")
_VIEWS = ("multibroadcast", "broadcast", "reshape")


def widening_addends(body: Module | None, inputs: list[Instruction], x: Instruction) -> list[Instruction] | None:
    """The other addends (main-module instructions) when a pointwise body computes
    float32(x + e1 + e2 ...) of its input `x`, else None."""
    if body is None:
        return None
    bound = {p.id: i for p, i in zip(body.params(), inputs)}
    outs = body.output_instructions()
    if len(outs) != 1 or outs[0].name != "convert" or outs[0].shape.type != "float32":
        return None
    value, addends = outs[0].inputs[0], []
    while not (value.is_param() and bound.get(value.id) is x):
        if value.name != "add" or len(value.inputs) != 2:
            return None
        a, b = value.inputs
        if b.is_param() and bound.get(b.id) is not x:
            addends.append(bound[b.id])
            value = a
        elif a.is_param() and bound.get(a.id) is not x:
            addends.append(bound[a.id])
            value = b
        else:
            return None
    return addends


def float32_constant(m: Module, before: Instruction, e: Instruction) -> Instruction | None:
    """`e`, a half literal or a broadcast / reshape view of one, as a float32 literal seen
    through the same views; None for anything computed at run time."""
    views, src = [], e
    while src.name in _VIEWS and len(src.inputs) == 1:
        views.append(src)
        src = src.inputs[0]
    if not src.is_literal() or src.shape.type not in HALF_TYPES:
        return None
    out = m.add_literal(np.asarray(src.literal.data, dtype=np.float32))
    for v in reversed(views):
        out = m.insert_instruction(before, v.op, [out])
    return out


def fuse_widening_epilogue(
    m: Module,
    ins: Instruction,
    gemm: Instruction,
    body: Module | None,
    inputs: list[Instruction],
    buf: Instruction,
    ctx,
) -> bool:
    """gemm (half, no epilogue yet) -> ins = float32(gemm + constants...) as one GEMM writing
    ins's float32 buffer with an add-only epilogue; False where the pattern does not hold."""
    if gemm.module_inputs or gemm.shape.type not in HALF_TYPES or ins.shape.type != "float32":
        return False
    if plan_gemm(gemm.inputs[0].shape, gemm.inputs[1].shape, buf.shape) is None:
        return False
    addends = widening_addends(body, inputs, gemm)
    if addends is None:
        return False
    wide = [float32_constant(m, ins, e) for e in addends]
    if any(w is None for w in wide):
        return False
    if not wide:  # float32(x·W) alone: the GEMM writes the float32 buffer, no epilogue to run
        with m.program.provenance([ins, gemm]):
            new = m.insert_instruction(ins, gemm.op, [gemm.inputs[0], gemm.inputs[1], buf])
        m.replace_all_uses(ins, new)
        m.remove_instruction(ins)
        m.remove_instruction(gemm)
        return True
    epi = ctx.create_module(ctx.unique_module_name("main:epilogue"))
    epi.bypass = True
    value = epi.add_parameter("x0", Shape.scalar("float32"))
    for k in range(len(wide)):
        value = epi.add_instruction(Op("add"), [value, epi.add_parameter(f"x{k + 1}", Shape.scalar("float32"))])
    epi.add_return([value])
    with m.program.provenance([ins, gemm]):
        new = m.insert_instruction(ins, gemm.op, [gemm.inputs[0], gemm.inputs[1], *wide, buf], [epi])
    m.replace_all_uses(ins, new)
    m.remove_instruction(ins)
    m.remove_instruction(gemm)
    return True
