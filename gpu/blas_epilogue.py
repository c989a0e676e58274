"""Which part of a GEMM's epilogue the BLAS call can do itself (cuBLASLt's bias epilogue, and
beta = 1 with a C operand for a residual add), so no epilogue kernel runs after it.

An epilogue qualifies when its whole body is a chain of adds onto the product, x0 + xb + xr in
any order, where xb is a bias (one value per output column: every stride 0 but a unit stride on
the last axis) and xr a full standard tensor of the output's lens; at most one of each. When the
output has a single row (a decode step's M = 1 GEMM), a full standard tensor is one value per
column too: constant folding has already made the model's broadcast bias such a tensor there, so
with a residual beside it one of the two goes to the bias epilogue and the other to C (else each
layer's out-projection and fc2 would launch an add kernel after the BLAS call). The
BLAS call must be row-major (plan.swap: cuBLASLt's bias is per row of its transposed product, so
per column of ours), a single call, and the output buffer standard. Pure shape logic: the
backend decides whether its BLAS can take it (and otherwise launches the epilogue kernel).
"""

from __future__ import annotations

from migx_explore.compiler.ir import Instruction

from .blas_plan import plan_gemm


def blas_epilogue(gemm: Instruction) -> tuple[int, int] | None:
    """(index of the bias extra or -1, index of the C extra or -1) among the gemm's epilogue
    inputs 2.., or None when the epilogue needs its kernel."""
    if not gemm.module_inputs:
        return None
    body = gemm.module_inputs[0]
    out = gemm.inputs[-1].shape
    plan = plan_gemm(gemm.inputs[0].shape, gemm.inputs[1].shape, out)
    if plan is None or not plan.swap or len(plan.offsets) != 1 or plan.batch != 1 or not out.standard():
        return None
    params = body.params()
    extras = list(gemm.inputs[2:-1])
    value, used = params[0], []
    for ins in body:
        if ins.is_param():
            continue
        if ins.is_return():
            break
        if ins.name != "add" or value not in ins.inputs or len(ins.inputs) != 2:
            return None
        other = ins.inputs[1] if ins.inputs[0] is value else ins.inputs[0]
        if not other.is_param() or other is params[0]:
            return None
        used.append(params.index(other) - 1)
        value = ins
    if body.output_instructions() != [value] or not used or len(set(used)) != len(used):
        return None
    bias = c = -1
    one_row = all(n == 1 for n in out.lens[:-1])
    for k in used:
        s = extras[k].shape
        if s.type != out.type or s.lens != out.lens:
            return None
        full = s.standard() and extras[k] is not gemm.inputs[-1]
        if all(st == 0 for st in s.strides[:-1]) and s.strides[-1] == 1 and bias < 0:
            bias = k
        elif full and c < 0:
            c = k
        elif full and one_row and bias < 0:
            bias = k
        else:
            return None
    return bias, c
