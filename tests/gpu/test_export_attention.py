"""The sdpa attention forms of HF exports (tests/attention_exports.py) compiled for the GPU and
run against onnxruntime: one guarded flash-attention kernel per model, fully masked rows 0, at
fp32 (eager and graph) and fp16. Marked `gpu`: CI has no device; the fake backend's checks of
the same models are in tests/passes/test_fuse_attention_exports.py."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tests.attention_exports import KINDS, sdpa_attention, sdpa_feeds


def _onnxruntime(kind: str) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(sdpa_attention(kind).SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, sdpa_feeds(kind)
    )[0]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "precision,mode,tol", [("fp32", "eager", 1e-4), ("fp32", "graph", 1e-4), ("fp16", "graph", 3e-2)]
)
@pytest.mark.parametrize("kind", KINDS)
def test_export_attention_on_the_device(device, kind, precision, mode, tol):
    from migx_explore.gpu import compile as gpu_compile
    from migx_explore.gpu.pipelines import CompileOptions

    want = _onnxruntime(kind)
    with gpu_compile(sdpa_attention(kind), CompileOptions(precision=precision), backend=device) as compiled:
        kernels = [i.kernel for i in compiled.steps.info if i.kind == "kernel"]
        assert sum(k.endswith("_guarded_kernel") for k in kernels) == 1, kernels
        got = compiled.run(sdpa_feeds(kind), mode=mode)[0]
    got = np.asarray(got, np.float32)
    if kind == "gpt2":  # left padding and a -inf fill: batch 1's first three query rows see no key
        assert not got[1, :3].any()
    if kind == "llama" and precision == "fp16":
        # The float32-minimum fill rounds to -inf in half, so the rows with no unmasked key give 0
        # here where float32 averages V; clamping narrowed constants to ±65504 (what torch's own
        # half mask uses) gives the average back. Compare the rows that see a key.
        got, want = got[:, 3:], want[:, 3:]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="no nvcc (CUDA toolkit) on PATH: cannot compile kernels offline")
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_guarded_attention_kernels_compile_offline(tmp_path, precision):
    """The kernels these models get build to sm_90 PTX with nvcc on a machine without a GPU."""
    import migx_explore.gpu as gpu
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime.fake import FakeBackend, FakeKernels

    sources: list[tuple[str, dict[str, str]]] = []

    class Recording(FakeKernels):
        def compiler_id(self) -> str:  # its own cache keys: kernels an earlier test built are compiled again
            return f"fakecc-recording-{id(self)}"

        def compile_source(self, name, source, headers, flags):
            if name.startswith("attention_"):
                sources.append((source, dict(headers)))
            return super().compile_source(name, source, headers, flags)

    for kind in KINDS:
        gpu.compile(sdpa_attention(kind), CompileOptions(precision=precision), backend=FakeBackend(kernels=Recording))
    assert len(sources) == len(KINDS)
    for k, (source, headers) in enumerate(sources):
        d = tmp_path / str(k)
        d.mkdir()
        (d / "k.cu").write_text(source)
        for name, text in headers.items():
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(text)
        r = subprocess.run(
            [
                NVCC,
                "-ptx",
                "-arch=sm_90",
                "-std=c++17",
                "-DMIGX_WARP_SIZE=32",
                "-I",
                str(d),
                "-o",
                str(d / "k.ptx"),
                str(d / "k.cu"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[:1500]
