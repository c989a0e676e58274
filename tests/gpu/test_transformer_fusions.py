"""The transformer-block fusions of the backend, against the reference evaluator: layernorm with
its scale and shift as a kernel epilogue, a GEMM's bias epilogue composed with the residual add
behind a reshape (GPT-2's Gemm -> Reshape -> Add), and a GELU composed the same way. On the fake
backend (plan, buffers) and, marked `gpu`, on a device (the generated kernels)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape
from migx_explore.gpu import compile_program

BACKENDS = ["fake", pytest.param("device", marks=pytest.mark.gpu)]


def gpt2_block(seq: int = 12, d: int = 32) -> Program:
    """x -> layernorm * g + b -> (2-D) dot + bias -> (3-D) + x -> (2-D) dot + bias -> tanh-GELU."""
    rng = np.random.default_rng(0)
    p = Program()
    m = p.main

    def op(name: str, *args, **attrs):
        return m.add_instruction(Op(name, **attrs), list(args))

    def lit(*shape):
        return m.add_literal(rng.standard_normal(shape).astype(np.float32) * 0.3)

    x = m.add_parameter("x", Shape.of("float32", [1, seq, d]))
    ln = op("layernorm", x, epsilon=1e-5)
    y = op(
        "add",
        op("mul", ln, op("multibroadcast", lit(d), out_lens=[1, seq, d])),
        op("multibroadcast", lit(d), out_lens=[1, seq, d]),
    )
    h = op("dot", op("reshape", y, dims=[seq, d]), lit(d, d))
    h = op("add", h, op("multibroadcast", lit(d), out_lens=[seq, d]))
    r = op("add", op("reshape", h, dims=[1, seq, d]), x)
    f = op("dot", op("reshape", r, dims=[seq, d]), lit(d, 2 * d))
    f = op("add", f, op("multibroadcast", lit(2 * d), out_lens=[seq, 2 * d]))
    half = op("multibroadcast", m.add_literal(np.array([0.5], np.float32)), out_lens=[seq, 2 * d])
    one = op("multibroadcast", m.add_literal(np.array([1.0], np.float32)), out_lens=[seq, 2 * d])
    c = op("multibroadcast", m.add_literal(np.array([0.7978845608], np.float32)), out_lens=[seq, 2 * d])
    gelu = op("mul", op("mul", half, f), op("add", one, op("tanh", op("mul", c, f))))
    m.add_return([r, gelu])
    return p


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_runs_as_gemms_and_one_layernorm_kernel(backend, request):
    program = gpt2_block()
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 12, 32)).astype(np.float32)}
    want = evaluate(program, feeds)
    with compile_program(program, backend=request.getfixturevalue(backend)) as compiled:
        main = compiled.program.main
        kernels = [i.op["symbol_name"] for i in main if i.name == "gpu::code_object"]
        gemms = [i for i in main if i.name == "gpu::gemm"]
        # layernorm, scale and shift in one kernel; each GEMM's pointwise tail in its epilogue
        assert len(kernels) == 1 and kernels[0].startswith("layernorm_"), kernels
        assert len(gemms) == 2 and all(g.module_inputs for g in gemms)
        # bias + residual: the BLAS call adds them (cuBLASLt bias epilogue, beta = 1 with C);
        # the GELU's epilogue stays a kernel
        assert [(g.op["blas_bias"], g.op["blas_c"]) for g in gemms] == [(0, 1), (-1, -1)]
        epilogues = [i.kernel for i in compiled.steps.info if i.label.endswith(" epilogue")]
        if backend == "fake":  # a device BLAS may refuse the fused form and fall back to the kernel
            assert len(epilogues) == 1 and "tanh" in epilogues[0], epilogues
        for mode in ("eager", "graph"):
            for got, w in zip(compiled.run(feeds, mode=mode), want):
                np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4, err_msg=mode)


@pytest.mark.parametrize("backend", BACKENDS)
def test_single_row_block_adds_bias_and_residual_in_the_blas_call(backend, request):
    """One row (a decode step, M = 1): constant folding makes the broadcast bias a full standard
    tensor like the residual, and the BLAS call still adds both (one as bias, one as C) instead of
    an add kernel after it."""
    program = gpt2_block(seq=1)
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 1, 32)).astype(np.float32)}
    want = evaluate(program, feeds)
    with compile_program(program, backend=request.getfixturevalue(backend)) as compiled:
        gemms = [i for i in compiled.program.main if i.name == "gpu::gemm"]
        assert sorted((gemms[0].op["blas_bias"], gemms[0].op["blas_c"])) == [0, 1]
        assert (gemms[1].op["blas_bias"], gemms[1].op["blas_c"]) == (-1, -1)  # the GELU stays a kernel
        epilogues = [i.kernel for i in compiled.steps.info if i.label.endswith(" epilogue")]
        if backend == "fake":
            assert len(epilogues) == 1 and "tanh" in epilogues[0], epilogues
        for mode in ("eager", "graph"):
            for got, w in zip(compiled.run(feeds, mode=mode), want):
                np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4, err_msg=mode)


def bert_block(seq: int = 12, d: int = 32) -> Program:
    """Post-LN: layernorm(x·W + bias + x) * g + b (BERT's output sub-layer)."""
    rng = np.random.default_rng(2)
    p = Program()
    m = p.main

    def op(name: str, *args, **attrs):
        return m.add_instruction(Op(name, **attrs), list(args))

    def lit(*shape):
        return m.add_literal(rng.standard_normal(shape).astype(np.float32) * 0.3)

    x = m.add_parameter("x", Shape.of("float32", [1, seq, d]))
    h = op("dot", x, op("multibroadcast", lit(d, d), out_lens=[1, d, d]))
    h = op("add", op("add", h, op("multibroadcast", lit(d), out_lens=[1, seq, d])), x)
    y = op(
        "add",
        op("mul", op("layernorm", h, epsilon=1e-12), op("multibroadcast", lit(d), out_lens=[1, seq, d])),
        op("multibroadcast", lit(d), out_lens=[1, seq, d]),
    )
    m.add_return([y])
    return p


@pytest.mark.parametrize("backend", BACKENDS)
def test_post_ln_block_is_a_gemm_and_one_kernel(backend, request):
    """bias + residual before the layernorm and scale + shift after it share one kernel; the
    GEMM writes its raw product (no epilogue launch)."""
    program = bert_block()
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 12, 32)).astype(np.float32)}
    want = evaluate(program, feeds)[0]
    with compile_program(program, backend=request.getfixturevalue(backend)) as compiled:
        main = compiled.program.main
        kernels = [i.op["symbol_name"] for i in main if i.name == "gpu::code_object"]
        gemms = [i for i in main if i.name == "gpu::gemm"]
        assert len(kernels) == 1 and kernels[0].startswith("fused_reduce"), kernels
        assert len(gemms) == 1 and not gemms[0].module_inputs
        for mode in ("eager", "graph"):
            np.testing.assert_allclose(compiled.run(feeds, mode=mode)[0], want, rtol=1e-4, atol=1e-4, err_msg=mode)
