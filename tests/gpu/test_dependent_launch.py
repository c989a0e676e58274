"""Programmatic dependent launch: the CUDA backend lets a kernel start while the one before it in
the stream finishes, which is only safe because every generated kernel first waits for its
predecessor (migx.hpp's kernel_entry). The fake compiler refuses a kernel without that wait, and
on a device a program gives the same outputs with dependent launch on and off, eagerly and
replayed from a CUDA graph."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore import models
from migx_explore.compiler.inputs import random_inputs
from migx_explore.gpu import compile_program
from migx_explore.gpu.pipelines import CompileOptions
from migx_explore.gpu.runtime.base import GpuError


def test_fake_compiler_refuses_a_kernel_that_does_not_wait_for_its_predecessor(fake):
    ok = '#include "migx.hpp"\nMIGX_GLOBAL void a_kernel(float* p) {\n    migx::kernel_entry();\n    p[0] = 1;\n}\n'
    bad = '#include "migx.hpp"\nMIGX_GLOBAL void b_kernel(float* p) { p[0] = 1; }\n'
    headers = {"migx.hpp": ""}
    fake.kernels.compile_source("a_kernel", ok, headers, [])
    with pytest.raises(GpuError, match="b_kernel does not begin with migx::kernel_entry"):
        fake.kernels.compile_source("b_kernel", bad, headers, [])
    # the split form (a GEMM that loads its constant weights before the wait) must still wait
    early = "migx::kernel_entry_early();\n    const float w = c[0];\n"
    split = f'#include "migx.hpp"\nMIGX_GLOBAL void c_kernel(float* p, const float* c) {{\n    {early}'
    fake.kernels.compile_source("c_kernel", split + "    migx::kernel_wait();\n    p[0] = w;\n}\n", headers, [])
    with pytest.raises(GpuError, match="d_kernel does not begin with migx::kernel_entry"):
        fake.kernels.compile_source(
            "d_kernel", split.replace("c_kernel", "d_kernel") + "    p[0] = w;\n}\n", headers, []
        )


@pytest.mark.gpu
@pytest.mark.parametrize("name, precision", [("transformer", "fp16"), ("bert_encoder", "fp32"), ("yolov10n", "fp16")])
def test_outputs_are_the_same_with_dependent_launch_on_and_off(device, name, precision, monkeypatch):
    if device.name != "cuda" or device.arch < "sm_90":
        pytest.skip(f"dependent launch is the CUDA backend's from sm_90 ({device.describe()})")
    monkeypatch.setenv("MIGX_BLAS_TUNE", "0")  # the heuristic's first algorithm both times: same rounding
    model = models.get_model(name)
    outs = {}
    for pdl in (True, False):
        monkeypatch.setattr(device.kernels, "dependent_launch", pdl)
        with compile_program(model, CompileOptions(precision=precision), backend=device) as c:
            feeds, feeds2 = (
                {k: v for k, v in random_inputs(c.program, seed=s).items() if k in c.inputs} for s in (3, 4)
            )
            first = {m: [np.asarray(o).copy() for o in c.run(feeds, mode=m)] for m in ("eager", "graph")}
            again = [np.asarray(o).copy() for o in c.run(feeds2, mode="graph")]
            outs[pdl] = (first, again)
    (on, on_again), (off, off_again) = outs[True], outs[False]
    for mode in ("eager", "graph"):
        for a, b in zip(on[mode], off[mode]):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} {mode}")
    for a, b in zip(on_again, off_again):
        np.testing.assert_array_equal(a, b, err_msg=f"{name} graph, second inputs")


@pytest.mark.parametrize("name, precision", [("mlp", "fp32"), ("transformer", "fp16"), ("gpt2_decode", "fp16")])
def test_no_dependent_launch_right_after_a_gemm_with_a_cublaslt_epilogue(name, precision, monkeypatch):
    from migx_explore.gpu.runtime.fake import FakeBackend, FakeKernels

    monkeypatch.setenv("MIGX_GEMM_GEN", "0")  # every GEMM a BLAS call: the rule under test

    asked: list[bool] = []

    class Recording(FakeKernels):
        def make_launch(self, *args, overlap: bool = True, **kw):
            asked.append(overlap)
            step = super().make_launch(*args, overlap=overlap, **kw)
            step.overlap = overlap
            return step

    dims = {"P": 3, "T": 1} if name == "gpt2_decode" else None
    model = models.get_model(name)
    with compile_program(
        model, CompileOptions(precision=precision), backend=FakeBackend(kernels=Recording), input_dims=dims
    ) as c:
        steps = c.steps.steps
        after_fused = [getattr(prev, "fused_epilogue", False) for prev in [None, *steps[:-1]]]
        kernels = [(s.overlap, fused) for s, fused in zip(steps, after_fused) if hasattr(s, "overlap")]
    assert kernels and len(kernels) == len(asked)
    assert all(overlap == (not fused) for overlap, fused in kernels), kernels
    if name == "gpt2_decode":  # its layernorms follow GEMMs that add bias and residual in cuBLASLt
        assert any(fused for _, fused in kernels) and any(not fused for _, fused in kernels)
