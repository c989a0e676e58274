"""Every op family through the whole GPU target against the reference evaluator: on the fake
backend (emulated kernels, real buffer plan, BLAS plans, graphs) and, marked `gpu`, on a device
(the generated kernels themselves)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.errors import MigxError
from migx_explore.gpu import compile_program

from .op_cases import CASES, HOST_ONLY, inputs_for

BACKENDS = ["fake", pytest.param("device", marks=pytest.mark.gpu)]


def _tolerance(program):
    low = any(p.shape.type in ("float16", "bfloat16") for p in program.main.params())
    return (2e-2, 2e-2) if low else (1e-3, 1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_reference(case, backend, request):
    be = request.getfixturevalue(backend)
    program = CASES[case]()
    feeds = inputs_for(case, program)
    ref = evaluate(program, feeds)
    rtol, atol = _tolerance(program)
    with compile_program(program, backend=be) as compiled:
        assert not compiled.steps.host_ops, f"{case} fell back to the host: {compiled.steps.host_ops}"
        for mode in ("eager", "graph"):
            outs = compiled.run(feeds, mode=mode)
            for got, want in zip(outs, ref):
                np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=rtol,
                                           atol=atol, err_msg=f"{case} ({mode})")


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_fallback_runs_eager_and_refuses_graph(backend, request):
    be = request.getfixturevalue(backend)
    program = HOST_ONLY["topk"]()
    feeds = inputs_for("topk", program)
    with compile_program(program, backend=be) as compiled:
        assert compiled.steps.host_ops
        np.testing.assert_allclose(compiled.run(feeds)[0], evaluate(program, feeds)[0], rtol=1e-6)
        with pytest.raises(MigxError, match="graph mode unavailable"):
            compiled.run(feeds, mode="graph")
        np.testing.assert_allclose(compiled.run(feeds)[0], evaluate(program, feeds)[0], rtol=1e-6)
