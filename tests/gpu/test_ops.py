"""Every op family through the whole GPU target against the reference evaluator: on the fake
backend (emulated kernels, real buffer plan, BLAS plans, graphs) and, marked `gpu`, on a device
(the generated kernels themselves)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.gpu import compile_program

from .op_cases import CASES, inputs_for

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
                np.testing.assert_allclose(
                    got.astype(np.float64),
                    np.asarray(want, np.float64),
                    rtol=rtol,
                    atol=atol,
                    err_msg=f"{case} ({mode})",
                )
