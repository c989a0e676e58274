"""NVIDIA backend: cuda-bindings (driver API + NVRTC) and cuBLAS.

cuBLAS / cuBLASLt are reached through a small ctypes binding (cuda_blas.py) to the libraries found
by cuda.pathfinder (nvidia-cublas wheel, conda, CUDA_PATH) or the system loader, so no cupy, torch
or nvmath-python is needed (nvmath is not on the H200 image).
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

import numpy as np

from ..blas_plan import GemmPlan
from .base import Backend, GpuError, Step
from .cuda_blas import Cublas

try:
    from cuda.bindings import driver as cu
    from cuda.bindings import nvrtc
except ImportError:  # pragma: no cover - cuda-bindings < 12.6 layout
    from cuda import cuda as cu  # type: ignore[no-redef]
    from cuda import nvrtc  # type: ignore[no-redef]


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, device: int = 0):
        self.check(cu.cuInit(0), "cuInit")
        count = self.check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        if count <= device:
            raise GpuError(f"cuda: no CUDA device {device} ({count} found)")
        self._dev = self.check(cu.cuDeviceGet(device), "cuDeviceGet")
        self._ctx = self.check(cu.cuDevicePrimaryCtxRetain(self._dev), "cuDevicePrimaryCtxRetain")
        self.make_current()
        attr = cu.CUdevice_attribute
        major = self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        self.arch = f"sm_{major}{minor}"
        self.warp_size = self._attr(attr.CU_DEVICE_ATTRIBUTE_WARP_SIZE)
        self.multiprocessors = self._attr(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        raw = self.check(cu.cuDeviceGetName(256, self._dev), "cuDeviceGetName")
        self.device_name = bytes(raw).split(b"\0")[0].decode(errors="replace")
        self._cublas: Cublas | None = None
        self._nvrtc_version = "nvrtc-{}.{}".format(*self.check(nvrtc.nvrtcVersion(), "nvrtcVersion"))

    def _attr(self, a) -> int:
        return int(self.check(cu.cuDeviceGetAttribute(a, self._dev), f"cuDeviceGetAttribute({a})"))

    def make_current(self) -> None:
        self.check(cu.cuCtxSetCurrent(self._ctx), "cuCtxSetCurrent")

    def error_string(self, err: Any) -> str:
        try:
            res = cu.cuGetErrorString(err)
            return f"{err!r} ({res[1].decode() if res[1] else ''})"
        except Exception:  # noqa: BLE001 - nvrtc and cuBLAS codes are not CUresults
            return repr(err)

    # ---- memory ------------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        return int(self.check(cu.cuMemAlloc(max(int(nbytes), 1)), f"cuMemAlloc({nbytes})"))

    def free(self, ptr: int) -> None:
        self.check(cu.cuMemFree(ptr), "cuMemFree")

    def host_alloc(self, nbytes: int) -> tuple[int, np.ndarray]:
        n = max(int(nbytes), 1)
        ptr = int(self.check(cu.cuMemHostAlloc(n, 0), f"cuMemHostAlloc({n})"))
        return ptr, np.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=np.uint8)

    def host_free(self, ptr: int) -> None:
        self.check(cu.cuMemFreeHost(ptr), "cuMemFreeHost")

    def make_copy(self, kind: str, dst: int, src: int, nbytes: int, stream: Any) -> Step:
        fn = {"h2d": cu.cuMemcpyHtoDAsync, "d2h": cu.cuMemcpyDtoHAsync, "d2d": cu.cuMemcpyDtoDAsync}[kind]
        return functools.partial(fn, dst, src, nbytes, stream)

    # ---- streams and events ------------------------------------------------------------------
    def stream_create(self) -> Any:
        return self.check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")

    def stream_sync(self, stream: Any) -> None:
        self.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def stream_destroy(self, stream: Any) -> None:
        self.check(cu.cuStreamDestroy(stream), "cuStreamDestroy")

    def event_create(self) -> Any:
        return self.check(cu.cuEventCreate(0), "cuEventCreate")

    def make_event_record(self, event: Any, stream: Any) -> Step:
        return functools.partial(cu.cuEventRecord, event, stream)

    def event_sync(self, event: Any) -> None:
        self.check(cu.cuEventSynchronize(event), "cuEventSynchronize")

    def event_elapsed_ms(self, start: Any, stop: Any) -> float:
        return float(self.check(cu.cuEventElapsedTime(start, stop), "cuEventElapsedTime"))

    def event_destroy(self, event: Any) -> None:
        self.check(cu.cuEventDestroy(event), "cuEventDestroy")

    def synchronize(self) -> None:
        self.check(cu.cuCtxSynchronize(), "cuCtxSynchronize")

    # ---- compilation -------------------------------------------------------------------------
    def compiler_id(self) -> str:
        return self._nvrtc_version

    def compile_flags(self) -> list[str]:
        return [f"-arch={self.arch}", "-std=c++17", f"-DMIGX_WARP_SIZE={self.warp_size}", "-default-device"]

    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        prog = self.check(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), len(headers),
                                                   [h.encode() for h in headers.values()],
                                                   [n.encode() for n in headers]), "nvrtcCreateProgram")
        try:
            opts = [f.encode() for f in flags]
            (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
            if err:
                size = self.check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
                log = b" " * size
                nvrtc.nvrtcGetProgramLog(prog, log)
                raise GpuError(f"nvrtc failed to compile {name}:\n{log.decode(errors='replace').strip()}\n"
                               f"--- source ---\n{source}")
            size = self.check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            cubin = b" " * size
            self.check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
            return cubin
        finally:
            nvrtc.nvrtcDestroyProgram(prog)

    def load_module(self, binary: bytes) -> Any:
        return self.check(cu.cuModuleLoadData(binary), "cuModuleLoadData")

    def get_function(self, module: Any, name: str) -> Any:
        return self.check(cu.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")

    def unload_module(self, module: Any) -> None:
        self.check(cu.cuModuleUnload(module), "cuModuleUnload")

    # ---- launches ----------------------------------------------------------------------------
    def make_launch(self, fn, grid, block, smem, stream, argblock, site=None) -> Step:
        # Measured on an H100: this binding call costs ~6.3 us of host time per launch; libcuda's
        # cuLaunchKernel through ctypes with pre-built ctypes arguments cost ~8.6 us, so it stays.
        return functools.partial(cu.cuLaunchKernel, fn, grid, 1, 1, block, 1, 1, smem, stream, argblock, 0)

    # ---- BLAS --------------------------------------------------------------------------------
    def blas_create(self, stream: Any, workspace: int, workspace_bytes: int) -> Any:
        if self._cublas is None:
            self._cublas = Cublas()
        return self._cublas.create(stream, workspace, workspace_bytes)

    def blas_destroy(self, handle: Any) -> None:
        if self._cublas is not None:
            self._cublas.destroy(handle)

    def make_gemm(self, handle: Any, plan: GemmPlan, a: int, b: int, c: int, alpha: float,
                  bias: int | None = None, c_in: int | None = None) -> tuple[Step, str]:
        timer = self._timer(handle.stream) if os.environ.get("MIGX_BLAS_TUNE", "1") != "0" else None
        step, note = self._cublas.make_gemm(handle, plan, a, b, c, alpha, timer, bias=bias, c_in=c_in)
        step.fused_epilogue = note.endswith("+epilogue")
        return step, note

    def _timer(self, stream: Any):
        """Mean device microseconds of fn() on `stream` (finalize-time BLAS algorithm tuning)."""
        if not hasattr(self, "_tune_events"):
            self._tune_events = (self.event_create(), self.event_create())
        a, b = self._tune_events

        def time_us(fn, reps: int = 5) -> float:
            fn()
            self.check(cu.cuEventRecord(a, stream), "cuEventRecord")
            for _ in range(reps):
                fn()
            self.check(cu.cuEventRecord(b, stream), "cuEventRecord")
            self.event_sync(b)
            return self.event_elapsed_ms(a, b) * 1e3 / reps

        return time_us

    # ---- graphs ------------------------------------------------------------------------------
    def begin_capture(self, stream: Any) -> None:
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self.check(cu.cuStreamBeginCapture(stream, mode), "cuStreamBeginCapture")

    def end_capture(self, stream: Any) -> Any:
        err, graph = cu.cuStreamEndCapture(stream)
        if err:
            raise GpuError(f"cuda: stream capture failed: {self.error_string(err)}")
        return graph

    def is_capturing(self, stream: Any) -> bool:
        status = self.check(cu.cuStreamIsCapturing(stream), "cuStreamIsCapturing")
        return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE

    def graph_instantiate(self, graph: Any) -> Any:
        return self.check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def graph_upload(self, graph_exec: Any, stream: Any) -> None:
        self.check(cu.cuGraphUpload(graph_exec, stream), "cuGraphUpload")

    def make_graph_launch(self, graph_exec: Any, stream: Any) -> Step:
        return functools.partial(cu.cuGraphLaunch, graph_exec, stream)

    def graph_exec_update(self, graph_exec: Any, graph: Any) -> bool:
        err, _info = cu.cuGraphExecUpdate(graph_exec, graph)
        return not err

    def graph_destroy(self, graph: Any) -> None:
        self.check(cu.cuGraphDestroy(graph), "cuGraphDestroy")

    def graph_exec_destroy(self, graph_exec: Any) -> None:
        self.check(cu.cuGraphExecDestroy(graph_exec), "cuGraphExecDestroy")

    def graph_node_count(self, graph: Any) -> int:
        res = cu.cuGraphGetNodes(graph, 0)
        return int(res[-1]) if not res[0] else -1
