"""The biLSTM runs each direction's whole recurrence as one lstm_recurrence kernel after one
input-projection GEMM (issue 28: 262 kernels + 189 BLAS calls before), with the reference's
numbers: emulated on the fake backend, and the generated kernel itself on a device."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore import models
from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.gpu import compile as gpu_compile
from migx_explore.gpu.pipelines import CompileOptions

BACKENDS = ["fake", pytest.param("device", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_bilstm_runs_one_kernel_per_layer(backend, precision, request):
    """Both directions of a layer in one launch (a block each), writing Y in ONNX's layout: no
    concat of the directions, no copy between the layers."""
    be = request.getfixturevalue(backend)
    program = parse_onnx(models.get_model("bilstm"))
    x = np.random.default_rng(1).standard_normal(program.main.get_parameter("input").shape.lens).astype(np.float32)
    want = evaluate(program, {"input": x})[0]
    with gpu_compile(program, CompileOptions(precision=precision), backend=be) as c:
        kinds = [(i.kind, i.kernel) for i in c.steps.info]
        assert sum(k.startswith("lstm_recurrences_2dir") for _, k in kinds) == 2, kinds  # a launch per layer
        assert not any(k.startswith(("concat", "contiguous")) for _, k in kinds), kinds
        gemms = sum(kind == "blas" or k.startswith("gemm_mma") for kind, k in kinds)
        assert gemms == 3, kinds  # two input projections and the head (BLAS or the generated GEMM)
        got = c.run({"input": x}, mode="graph")[0]
    tol = 1e-4 if precision == "fp32" else 2e-2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol)


def _lstm_program(direction: str, batch: int, hidden: int, seq: int = 5, size: int = 3):
    """One ONNX-style lstm op without peepholes (lstm_recurrence's case), Y and Y_c returned."""
    from migx_explore.compiler import Program
    from migx_explore.compiler.op import Op
    from migx_explore.compiler.shape import Shape

    rng = np.random.default_rng(hidden + batch)
    nd = 2 if direction == "bidirectional" else 1
    p = Program()
    m = p.main

    def lit(*shape):
        return m.add_literal((rng.standard_normal(shape) * 0.3).astype(np.float32))

    x = m.add_parameter("x", Shape.of("float32", [seq, batch, size]))
    ins = [
        x,
        lit(nd, 4 * hidden, size),
        lit(nd, 4 * hidden, hidden),
        lit(nd, 8 * hidden),
        m.add_literal(np.full(batch, seq, np.int32)),
        lit(nd, batch, hidden),
        lit(nd, batch, hidden),
        m.add_literal(np.zeros((nd, 3 * hidden), np.float32)),
    ]
    r = m.add_instruction(Op("lstm", hidden_size=hidden, direction=direction), ins)
    m.add_return([m.add_instruction(Op("get_tuple_elem", index=i), [r]) for i in (0, 2)])
    return p


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "direction, batch, hidden, precision",
    [
        ("reverse", 3, 40, "fp32"),  # several batch entries, R^T in registers
        ("bidirectional", 2, 200, "fp32"),  # 800 gate columns: R^T read from memory each step
        ("forward", 1, 96, "fp16"),
    ],
)
def test_lstm_recurrence_kernel_matches_the_lstm_op(backend, direction, batch, hidden, precision, request):
    be = request.getfixturevalue(backend)
    program = _lstm_program(direction, batch, hidden)
    x = np.random.default_rng(2).standard_normal(program.main.get_parameter("x").shape.lens).astype(np.float32)
    want = evaluate(program, {"x": x})
    with gpu_compile(program, CompileOptions(precision=precision), backend=be) as c:
        assert any(i.kernel.startswith("lstm_recurrence") for i in c.steps.info), [i.kernel for i in c.steps.info]
        got = c.run({"x": x}, mode="graph")
    tol = 1e-4 if precision == "fp32" else 2e-2
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float32), w, rtol=tol, atol=tol)
