"""Finalize-time cuBLASLt tuning on a device: candidates are timed from a captured graph, a call
that fails inside the capture leaves no open capture behind, and a tuned plan still computes the
right product."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape
from migx_explore.gpu import compile_program
from migx_explore.gpu.pipelines import CompileOptions
from migx_explore.gpu.runtime.base import GpuError

pytestmark = pytest.mark.gpu


def _cuda(device):
    if device.name != "cuda":
        pytest.skip(f"BLAS tuning by graph capture is the CUDA backend's (this device is {device.name})")
    return device


def test_graph_timer_times_a_call_and_closes_its_capture(device):
    be = _cuda(device)
    stream = be.streams.create()
    try:
        timer = be.blas._timer(stream, captured=True)
        buf = be.memory.malloc(1 << 20)
        try:
            us = timer(lambda: be.memory.copy("d2d", buf, buf + (1 << 19), 1 << 19, stream))
        finally:
            be.memory.free(buf)
        assert 0.0 < us < 1000.0
        assert not be.graphs.is_capturing(stream)

        def refuses():
            if be.graphs.is_capturing(stream):
                raise GpuError("refused inside the capture")

        # fails in the capture, then runs on the stream: the stream timing is used instead
        assert timer(refuses) >= 0.0
        assert not be.graphs.is_capturing(stream)

        def always_fails():
            raise GpuError("always")

        with pytest.raises(GpuError, match="always"):
            timer(always_fails)
        assert not be.graphs.is_capturing(stream)
    finally:
        be.streams.destroy(stream)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_tuned_gemm_plans_compute_the_product(device, dtype, monkeypatch):
    monkeypatch.setenv("MIGX_BLAS_TUNE", "graph")
    monkeypatch.setenv("MIGX_GEMM_GEN", "0")  # this half GEMM would otherwise be the generated kernel
    be = _cuda(device)
    p = Program()
    m = p.main
    a = m.add_parameter("a", Shape.of(dtype, [128, 256]))
    b = m.add_literal(np.random.default_rng(0).standard_normal((256, 384)).astype(dtype))
    m.add_return([m.add_instruction(Op("dot"), [a, b])])
    feeds = {"a": np.random.default_rng(1).standard_normal((128, 256)).astype(dtype)}
    want = evaluate(p, feeds)[0]
    compiled = compile_program(p, CompileOptions(), backend=be)
    try:
        notes = [i.kernel for i in compiled.steps.info if i.kind == "blas"]
        got = compiled.run(feeds, mode="graph")[0]
    finally:
        compiled.close()
    assert notes and any("tuned" in n for n in notes), notes
    tol = 1e-4 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol * 16)
