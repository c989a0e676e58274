"""Which part of a GEMM's epilogue the BLAS call can do itself (cuBLASLt's bias, ReLU and GELU
epilogues, and beta = 1 with a C operand for a residual add), so no epilogue kernel runs after it.

An epilogue qualifies when its body is a chain of adds onto the product, x0 + xb + xr in any
order, where xb is a bias (one value per output column: every stride 0 but a unit stride on the
last axis) and xr a full standard tensor of the output's lens, at most one of each, optionally
followed by an activation of that sum: cuBLASLt computes act(A·B + C + bias). When the output
has a single row (a decode step's M = 1 GEMM), a full standard tensor is one value per column
too: constant folding has already made the model's broadcast bias such a tensor there, so with a
residual beside it one of the two goes to the bias epilogue and the other to C (else each layer's
out-projection and fc2 would launch an add kernel after the BLAS call). The activation is
recognised by what it computes, not by how the export spelt it (gelu_new arrives as
0.5x(1 + tanh(...)), as x·sigmoid(...), or, after simplify_algebra, as x / (1 + exp(...))): the
instructions after the adds must be pointwise ops of the sum and scalar literals, and their
value, evaluated in float64 with the literals as stored, must match ReLU or the tanh-form GELU
that cuBLASLt implements within ACT_TOLERANCE on sample points. Erf-form GELU (BERT's) is not
cuBLASLt's and stays a kernel: the two differ by up to 4.7e-4, ten times the tolerance.

The BLAS call must be row-major (plan.swap: cuBLASLt's bias is per row of its transposed product,
so per column of ours), a single call, and the output buffer standard. Pure shape logic: the
backend decides whether its BLAS can take it (and otherwise launches the epilogue kernel).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from migx_explore.compiler.ir import Instruction

from .blas_plan import plan_gemm

ACTIVATIONS = ("relu", "gelu_tanh")
# |f(x) - act(x)| <= ACT_TOLERANCE * (1 + |x|) at every sample: a gelu_new chain with fp16-rounded
# constants is within 4.9e-6 of exact tanh-GELU; erf-GELU differs by 4.7e-4 at x = -2.7.
ACT_TOLERANCE = 5e-5
_SAMPLES = np.concatenate([np.linspace(-8.0, 8.0, 641), [-1e4, -100.0, -20.0, 20.0, 100.0, 1e4]])


class LtEpilogue(NamedTuple):
    """What the BLAS call adds: epilogue inputs (indices among the gemm's inputs 2..; -1 for
    none) added as the bias and as C, and the activation applied to the sum ('' for none)."""

    bias: int
    c: int
    act: str


def apply_activation(name: str, x: np.ndarray) -> np.ndarray:
    """The BLAS epilogue's activation `name` (ACTIVATIONS) of x, as cuBLASLt computes it: what
    identify_activation matches against and what the fake backend's BLAS applies."""
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "gelu_tanh":  # cuBLASLt's GELU epilogue: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    raise ValueError(f"no BLAS epilogue activation {name!r} (known: {', '.join(ACTIVATIONS)})")


def identify_activation(chain: list[Instruction], value: Instruction) -> str | None:
    """The name in ACTIVATIONS that `chain` (instructions computing from `value` and scalar
    literals, in order; the last one is the result) computes, or None."""
    if not chain:
        return None
    memo: dict[int, np.ndarray] = {value.id: _SAMPLES}
    with np.errstate(all="ignore"):
        for ins in chain:
            # a type change inside (a convert) would make the BLAS call's output type differ
            if not ins.op.spec.has("pointwise") or ins.op.spec.compute is None or ins.shape.type != value.shape.type:
                return None
            args = []
            for x in ins.inputs:
                if x.id in memo:
                    args.append(memo[x.id])
                elif x.is_literal() and x.literal.data.size == 1:
                    args.append(np.float64(x.literal.data.reshape(())))
                else:
                    return None  # another input: not a function of the sum alone
            try:
                memo[ins.id] = np.asarray(ins.op.spec.compute(ins.op, args, ins.shape, None), np.float64)
            except Exception:  # noqa: BLE001 - an op whose reference wants more than arrays: no match
                return None
    got = np.broadcast_to(memo[chain[-1].id], _SAMPLES.shape)
    for name in ACTIVATIONS:
        want = apply_activation(name, _SAMPLES)
        if np.all(np.abs(got - want) <= ACT_TOLERANCE * (1.0 + np.abs(_SAMPLES))):
            return name
    return None


def blas_epilogue(gemm: Instruction) -> LtEpilogue | None:
    """What of the gemm's epilogue the BLAS call can do, or None when the epilogue needs its
    kernel."""
    if not gemm.module_inputs:
        return None
    body = gemm.module_inputs[0]
    out = gemm.inputs[-1].shape
    plan = plan_gemm(gemm.inputs[0].shape, gemm.inputs[1].shape, out)
    if plan is None or not plan.swap or len(plan.offsets) != 1 or plan.batch != 1 or not out.standard():
        return None
    params = body.params()
    extras = list(gemm.inputs[2:-1])
    value, used, rest = params[0], [], []
    for ins in body:
        if ins.is_param() or ins.is_literal():
            continue
        if ins.is_return():
            break
        other = None
        if not rest and ins.name == "add" and len(ins.inputs) == 2 and value in ins.inputs:
            a, b = ins.inputs
            other = None if a is b else (b if a is value else a)
        if other is not None and other.is_param() and other is not params[0]:
            used.append(params.index(other) - 1)
            value = ins
        else:
            rest.append(ins)  # past the adds: the activation, if this is one
    act = ""
    if rest:
        act = identify_activation(rest, value) or ""
        if not act or body.output_instructions() != [rest[-1]]:
            return None
    elif body.output_instructions() != [value]:
        return None
    if (not used and not act) or len(set(used)) != len(used):
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
    return LtEpilogue(bias, c, act)
