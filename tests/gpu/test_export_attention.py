"""The sdpa attention forms of HF exports (tests/attention_exports.py) compiled for the GPU and
run against onnxruntime: one guarded flash-attention kernel per model, fully masked rows 0, at
fp32 (eager and graph) and fp16. Marked `gpu`: CI has no device; the fake backend's checks of
the same models are in tests/passes/test_fuse_attention_exports.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.attention_exports import KINDS, sdpa_attention, sdpa_feeds


def _onnxruntime(kind: str) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(sdpa_attention(kind).SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, sdpa_feeds(kind))[0]


@pytest.mark.gpu
@pytest.mark.parametrize("precision,mode,tol", [("fp32", "eager", 1e-4), ("fp32", "graph", 1e-4),
                                                ("fp16", "graph", 3e-2)])
@pytest.mark.parametrize("kind", KINDS)
def test_export_attention_on_the_device(device, kind, precision, mode, tol):
    from migx_explore.gpu import compile as gpu_compile
    from migx_explore.gpu.pipelines import CompileOptions

    want = _onnxruntime(kind)
    with gpu_compile(sdpa_attention(kind), CompileOptions(precision=precision), backend=device) as compiled:
        kernels = [i.kernel for i in compiled.steps.info if i.kind == "kernel"]
        assert sum(k.endswith("_guarded_kernel") for k in kernels) == 1, kernels
        got = compiled.run(sdpa_feeds(kind), mode=mode)[0]
    if kind != "bert":  # left padding: batch 1's first three query rows see no key
        assert not np.asarray(got)[1, :3].any()
    np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=tol, atol=tol)
