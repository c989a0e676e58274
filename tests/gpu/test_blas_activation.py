"""A GEMM's bias + activation run as cuBLASLt's ReLU / GELU epilogue (issue 28: gpt2's fc1 left a
bias + gelu_new kernel after each GEMM), recognised by what the epilogue computes, whatever the
export's spelling; erf-GELU (not cuBLASLt's) and near misses keep their kernel. On the fake
backend (which computes cuBLASLt's epilogues in float64) and, marked `gpu`, on a device."""

from __future__ import annotations

import math

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape
from migx_explore.gpu import compile_program
from migx_explore.gpu.pipelines import CompileOptions

BACKENDS = ["fake", pytest.param("device", marks=pytest.mark.gpu)]
SQRT_2_PI = math.sqrt(2.0 / math.pi)


def _spell(op, scalar, f, form: str):
    """The activation `form` of f, written as exporters write it."""
    if form == "relu":
        return op("relu", f)
    if form == "max0":
        return op("max", f, scalar(0.0))
    if form == "gelu_tanh":  # HF gelu_new / torch gelu(approximate="tanh")
        inner = op("mul", scalar(SQRT_2_PI), op("add", f, op("mul", scalar(0.044715), op("pow", f, scalar(3.0)))))
        return op("mul", op("mul", scalar(0.5), f), op("add", scalar(1.0), op("tanh", inner)))
    if form == "gelu_sigmoid":  # the same function as x * sigmoid(2 * sqrt(2/pi) * (x + 0.044715 x^3))
        inner = op("add", f, op("mul", scalar(0.044715), op("mul", f, op("mul", f, f))))
        return op("mul", f, op("sigmoid", op("mul", scalar(2 * SQRT_2_PI), inner)))
    if form == "gelu_erf":  # BERT's exact GELU: not cuBLASLt's
        return op(
            "mul", op("mul", scalar(0.5), f), op("add", scalar(1.0), op("erf", op("div", f, scalar(math.sqrt(2.0)))))
        )
    if form == "gelu_wrong_cubic":  # a near miss: 0.05 for 0.044715
        inner = op("mul", scalar(SQRT_2_PI), op("add", f, op("mul", scalar(0.05), op("pow", f, scalar(3.0)))))
        return op("mul", op("mul", scalar(0.5), f), op("add", scalar(1.0), op("tanh", inner)))
    raise ValueError(form)


def linear_act(
    form: str,
    *,
    bias: bool = True,
    then_dot: bool = False,
    dtype: str = "float32",
    seq: int = 24,
    d: int = 32,
    n: int = 64,
) -> Program:
    """act(x · W [+ b]) with x [seq, d] of `dtype`; then_dot: · W2 after it (an MLP's hidden
    layer, which stays in half at fp16 rather than being widened for the output)."""
    rng = np.random.default_rng(0)
    p = Program()
    m = p.main

    def op(name: str, *args, **attrs):
        return m.add_instruction(Op(name, **attrs), list(args))

    def scalar(v: float):
        return op("multibroadcast", m.add_literal(np.array([v], dtype)), out_lens=[seq, n])

    x = m.add_parameter("x", Shape.of(dtype, [seq, d]))
    f = op("dot", x, m.add_literal((rng.standard_normal((d, n)) * 0.4).astype(dtype)))
    if bias:
        b = m.add_literal(rng.standard_normal(n).astype(dtype))
        f = op("add", f, op("multibroadcast", b, out_lens=[seq, n]))
    y = _spell(op, scalar, f, form)
    if then_dot:
        y = op("dot", y, m.add_literal((rng.standard_normal((n, d)) * 0.2).astype(dtype)))
    m.add_return([y])
    return p


def _run(program: Program, backend, precision: str = "fp32"):
    param = program.main.params()[0].shape
    x = (np.random.default_rng(1).standard_normal(param.lens) * 2).astype(param.type)
    want = evaluate(program, {"x": x})[0]
    with compile_program(program, CompileOptions(precision=precision), backend=backend) as compiled:
        gemms = [i for i in compiled.program.main if i.name == "gpu::gemm"]
        epilogue_kernels = [i.kernel for i in compiled.steps.info if i.label.endswith(" epilogue")]
        outs = {mode: np.asarray(compiled.run({"x": x}, mode=mode)[0], np.float64) for mode in ("eager", "graph")}
    return gemms[0].op, epilogue_kernels, outs, want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "form, act", [("relu", "relu"), ("max0", "relu"), ("gelu_tanh", "gelu_tanh"), ("gelu_sigmoid", "gelu_tanh")]
)
@pytest.mark.parametrize("bias", [True, False])
def test_bias_and_activation_run_in_the_blas_call(form, act, bias, backend, request):
    op, epilogue_kernels, outs, want = _run(linear_act(form, bias=bias), request.getfixturevalue(backend))
    assert op["blas_act"] == act and op["blas_bias"] == (0 if bias else -1), op
    if backend == "fake":  # a device BLAS may refuse the fused form and fall back to the kernel
        assert not epilogue_kernels, epilogue_kernels
    for mode, got in outs.items():
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=mode)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["gelu_tanh", "relu"])
def test_half_gemm_takes_the_activation_epilogue(form, backend, request, monkeypatch):
    monkeypatch.setenv("MIGX_GEMM_GEN", "0")  # half GEMMs this small would run as the generated kernel
    op, epilogue_kernels, outs, want = _run(
        linear_act(form, then_dot=True, dtype="float16"), request.getfixturevalue(backend), "fp16"
    )
    assert op["blas_act"] == {"gelu_tanh": "gelu_tanh", "relu": "relu"}[form], op
    if backend == "fake":
        assert not epilogue_kernels, epilogue_kernels
    for mode, got in outs.items():
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2, err_msg=mode)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["gelu_erf", "gelu_wrong_cubic"])
def test_other_activations_keep_their_kernel(form, backend, request):
    """Erf-GELU differs from cuBLASLt's tanh form by up to 4.7e-4; a wrong cubic coefficient
    by more: both keep the generated epilogue kernel and stay exact."""
    op, epilogue_kernels, outs, want = _run(linear_act(form), request.getfixturevalue(backend))
    assert op["blas_act"] == "" and op["blas_bias"] == -1, op
    assert len(epilogue_kernels) == 1, epilogue_kernels
    for mode, got in outs.items():
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=mode)
