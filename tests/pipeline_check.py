"""Issue 3's acceptance check, shared by model and ONNX tests: the target-independent pipelines keep
the reference outputs within tolerance and every pass leaves a valid program."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from migx_explore.compiler.ir import Program
from migx_explore.compiler.pass_infra import NumericConfig, PassManager, Trace, make_numeric_config
from migx_explore.gpu.pipelines import gpu_pipelines


def check_pipelines(
    program: Program,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    backend: bool = False,
) -> Trace:
    """Default: the product's check (MIGraphX's relative RMS per compute type, compiler/verify.py);
    rtol/atol select elementwise allclose."""
    cfg: NumericConfig = make_numeric_config(program, inputs, rtol=rtol, atol=atol)
    trace = PassManager(numeric=cfg).run(program, gpu_pipelines(include_backend=backend))  # validates every pass
    assert trace.error is None, trace.error
    bad = trace.first_numeric_failure()
    assert bad is None, f"{bad.path} breaks the tolerance: {bad.numeric.describe()}"
    return trace
