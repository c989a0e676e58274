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
def test_bilstm_runs_a_kernel_per_direction_and_layer(backend, precision, request):
    be = request.getfixturevalue(backend)
    program = parse_onnx(models.get_model("bilstm"))
    x = np.random.default_rng(1).standard_normal(program.main.get_parameter("input").shape.lens).astype(np.float32)
    want = evaluate(program, {"input": x})[0]
    with gpu_compile(program, CompileOptions(precision=precision), backend=be) as c:
        kinds = [(i.kind, i.kernel) for i in c.steps.info]
        assert sum(k.startswith("lstm_recurrence") for _, k in kinds) == 4, kinds  # 2 layers x 2 directions
        assert sum(kind == "blas" for kind, _ in kinds) == 3, kinds  # two input projections and the head
        got = c.run({"input": x}, mode="graph")[0]
    tol = 1e-4 if precision == "fp32" else 2e-2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol)
