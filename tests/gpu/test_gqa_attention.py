"""Grouped-query attention with the K/V repeat read through strides (fold_attention_views):
the generated kernels (scalar and tensor-core) against the reference evaluator of the graph, for
each repeat form (tests/attention_exports.gqa_attention) and repeat factor, fp32 and fp16, eager
and graph replay; and no copy kernel runs."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import parse_onnx
from tests.attention_exports import GQA_FORMS, gqa_attention, gqa_feeds

pytestmark = pytest.mark.gpu


@pytest.fixture
def mma_at_any_size(monkeypatch):
    """The tensor-core kernel for these small problems too (attention_mma.MIN_WORK)."""
    from migx_explore.gpu.codegen import attention_mma

    monkeypatch.setattr(attention_mma, "MIN_WORK", 0)


def _check(model, device, precision: str, kernel: str) -> None:
    from migx_explore.gpu import compile as gpu_compile
    from migx_explore.gpu.pipelines import CompileOptions

    feeds = gqa_feeds(model)
    want = evaluate(parse_onnx(model), feeds)[0]
    tol = 1e-4 if precision == "fp32" else 2e-2
    with gpu_compile(model, CompileOptions(precision=precision), backend=device) as compiled:
        kernels = [i.op["symbol_name"] for i in compiled.program.main if i.name == "gpu::code_object"]
        assert sum(k.startswith(kernel) for k in kernels) == 1, kernels
        assert not any(k.startswith("contiguous") for k in kernels), kernels
        assert not compiled.steps.host_ops
        for mode in ("eager", "graph"):
            got = compiled.run(feeds, mode=mode)[0].astype(np.float32)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=mode)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("heads, kv_heads", [(4, 2), (6, 2), (4, 1), (8, 2)])
@pytest.mark.parametrize("form", GQA_FORMS)
def test_gqa_attention_on_the_device(form, heads, kv_heads, precision, device):
    _check(gqa_attention(form, heads=heads, kv_heads=kv_heads, s=37, d=24), device, precision, "attention_")


@pytest.mark.parametrize("heads, kv_heads", [(4, 2), (6, 3), (4, 1)])
@pytest.mark.parametrize("form", GQA_FORMS)
def test_gqa_tensor_core_attention_on_the_device(form, heads, kv_heads, device, mma_at_any_size):
    """Half precision, head dim 32: the mma kernel, K read [key][d] with d contiguous (its
    16-byte loads) through the repeat's stride-0 head axis."""
    model = gqa_attention(form, heads=heads, kv_heads=kv_heads, s=70, d=32)
    _check(model, device, "fp16", "attention_mma_")
