"""The HIP backend's calls against hip-python's signatures, for hip-python 10.x, 7.x and 6.x.

No AMD GPU here: fake bindings bind every call to the recorded signature and answer with that
version's result shape, while a real program is compiled, finalized, run eagerly and captured.
Where hip-python itself is installed, the recorded signatures are checked against it."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from migx_explore.gpu import compile_program, kernel_cache
from migx_explore.gpu.runtime.hip import HIP_R, HIPBLAS_R_6X, HipBackend

from .fake_hip import FakeHip
from .hip_signatures import SIGNATURES_10
from .op_cases import CASES


@pytest.mark.parametrize("version", ["10.0.0.0.1.2", "7.2.2.562.43", "6.4.4.555.40"])
def test_hip_backend_call_shapes(version, tmp_path, monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))  # compile through hiprtc, not the cache
    kernel_cache.clear_memory_cache()
    fh = FakeHip(version)
    be = HipBackend(bindings=fh.modules())
    assert (be.arch, be.warp_size) == ("gfx942", 64)
    program = CASES["conv_bias_relu"]()
    feeds = {"x": np.zeros((2, 8, 12, 12), np.float32)}
    with compile_program(program, backend=be) as c:
        c.run(feeds)
        c.run(feeds, mode="graph")
        c.run(feeds, mode="graph")
    flags = fh.named("hiprtcCompileProgram")[0]["options"]
    assert b"--offload-arch=gfx942" in flags and b"-DMIGX_WARP_SIZE=64" in flags
    launch = fh.named("hipModuleLaunchKernel")[0]
    assert isinstance(launch["kernelParams"], int) and launch["extra"] is None  # pre-packed void*[]
    assert launch["blockDimX"] % 64 == 0
    gemm = fh.named("hipblasGemmStridedBatchedEx")[0]
    if version.startswith("6."):
        assert gemm["aType"] == HIPBLAS_R_6X["float32"] and gemm["computeType"] == HIPBLAS_R_6X["float32"]
    else:
        assert gemm["aType"] == HIP_R["float32"] and gemm["computeType"] == 2  # HIPBLAS_COMPUTE_32F
    assert gemm["transA"] in (111, 112) and gemm["algo"] == 160
    names = [n for n, _ in fh.calls]
    assert names.count("hipStreamBeginCapture") == names.count("hipStreamEndCapture") == 1
    assert names.index("hipblasSetWorkspace") < names.index("hipStreamBeginCapture")
    begin, end = names.index("hipStreamBeginCapture"), names.index("hipStreamEndCapture")
    assert not {"hipMalloc", "hipHostMalloc", "hipModuleLoadData"} & set(names[begin:end])
    assert names.count("hipGraphLaunch") == 2


def test_hip_graph_update_shape_per_version():
    for version, expect in (("10.0.0", 3), ("7.2.2", 2)):
        fh = FakeHip(version)
        be = HipBackend(bindings=fh.modules())
        assert be.graphs.exec_update("exec", "graph")
        assert len(fh.named("hipGraphExecUpdate")[0]) == expect


def test_recorded_signatures_match_installed_hip_python():
    try:
        from rocm.bindings import hip, hipblas, hiprtc
    except ImportError:
        pytest.skip("hip-python 10.x (rocm.bindings) is not installed here: pip install 'hip-python[libraries]'")
    for name, params in SIGNATURES_10.items():
        mod = hiprtc if name.startswith("hiprtc") else hipblas if name.startswith("hipblas") else hip
        assert tuple(inspect.signature(getattr(mod, name)).parameters) == params, name
