"""NVIDIA backend: cuda-bindings (driver API + NVRTC) and cuBLAS.

cuBLAS / cuBLASLt are reached through a small ctypes binding (cuda_blas.py) to the libraries found
by cuda.pathfinder (nvidia-cublas wheel, conda, CUDA_PATH) or the system loader, so no cupy, torch
or nvmath-python is needed (nvmath is not on the H200 image).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Any

from ..blas_plan import GemmPlan
from .base import Backend, Blas, Driver, GpuError, Graphs, Kernels, Step, named
from .cuda_blas import Cublas
from .rtc import RuntimeCompiler
from .rtc_pool import WorkerSpec

try:
    from cuda.bindings import driver as cu
    from cuda.bindings import nvrtc
except ImportError:  # pragma: no cover - cuda-bindings < 12.6 layout
    from cuda import cuda as cu  # type: ignore[no-redef]
    from cuda import nvrtc  # type: ignore[no-redef]


def cuda_driver() -> Driver:
    """The driver API calls, as cuda-bindings exposes them (each returns (CUresult, value...))."""
    mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    return Driver(
        mem_alloc=cu.cuMemAlloc,
        mem_free=cu.cuMemFree,
        host_alloc=named("cuMemHostAlloc", lambda n: cu.cuMemHostAlloc(n, 0)),
        host_free=cu.cuMemFreeHost,
        copy={"h2d": cu.cuMemcpyHtoDAsync, "d2h": cu.cuMemcpyDtoHAsync, "d2d": cu.cuMemcpyDtoDAsync},
        stream_create=named("cuStreamCreate", lambda: cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)),
        stream_sync=cu.cuStreamSynchronize,
        stream_destroy=cu.cuStreamDestroy,
        event_create=named("cuEventCreate", lambda: cu.cuEventCreate(0)),
        event_record=cu.cuEventRecord,
        event_sync=cu.cuEventSynchronize,
        event_elapsed=cu.cuEventElapsedTime,
        event_destroy=cu.cuEventDestroy,
        device_sync=cu.cuCtxSynchronize,
        module_load=cu.cuModuleLoadData,
        module_function=cu.cuModuleGetFunction,
        module_unload=cu.cuModuleUnload,
        launch=cu.cuLaunchKernel,
        launch_extra=0,
        capture_begin=named("cuStreamBeginCapture", lambda s: cu.cuStreamBeginCapture(s, mode)),
        capture_end=cu.cuStreamEndCapture,
        capture_status=cu.cuStreamIsCapturing,
        capture_none=cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE,
        graph_instantiate=named("cuGraphInstantiate", lambda g: cu.cuGraphInstantiate(g, 0)),
        graph_upload=cu.cuGraphUpload,
        graph_launch=cu.cuGraphLaunch,
        graph_destroy=cu.cuGraphDestroy,
        graph_exec_destroy=cu.cuGraphExecDestroy,
    )


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
        # cuBLASLt has fp8 e4m3 GEMMs from Ada / Hopper (sm_89) on
        self.quant_gemm_types = ("int8", "float8e4m3fn") if (major, minor) >= (8, 9) else ("int8",)
        self.warp_size = self._attr(attr.CU_DEVICE_ATTRIBUTE_WARP_SIZE)
        self.multiprocessors = self._attr(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        raw = self.check(cu.cuDeviceGetName(256, self._dev), "cuDeviceGetName")
        self.device_name = bytes(raw).split(b"\0")[0].decode(errors="replace")
        nvrtc_version = "nvrtc-{}.{}".format(*self.check(nvrtc.nvrtcVersion(), "nvrtcVersion"))
        self.compose(cuda_driver(), NvrtcKernels(self, nvrtc_version), CublasPart(self), CudaGraphs(self))

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


class NvrtcKernels(Kernels):
    def __init__(self, backend: CudaBackend, version: str):
        super().__init__(backend)
        self._version = version
        # Programmatic dependent launch from sm_90 on (migx.hpp's kernel_entry waits for the
        # previous grid in every generated kernel). MIGX_PDL=0 launches the ordinary way;
        # MIGX_PDL=all also after the GEMMs that Built.overlap_next leaves out (for measuring).
        mode = os.environ.get("MIGX_PDL", "auto")
        self.dependent_launch = backend.arch >= "sm_90" and mode != "0"
        self.overlap_always = mode == "all"

    def make_launch(
        self,
        fn: Any,
        grid: int,
        block: int,
        smem: int,
        stream: Any,
        argblock: int,
        site: Any = None,
        *,
        overlap: bool = True,
    ) -> Step:
        """With dependent launch, one cuLaunchKernelEx whose config (built here, once) allows the
        kernel to start while the previous kernel in the stream finishes; a stream capture keeps
        that as a programmatic edge of the graph."""
        if not (self.dependent_launch and (overlap or self.overlap_always)):
            return super().make_launch(fn, grid, block, smem, stream, argblock, site)
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        config = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid, 1, 1
        config.blockDimX, config.blockDimY, config.blockDimZ = block, 1, 1
        config.sharedMemBytes = smem
        config.hStream = stream
        config.attrs = [attr]
        config.numAttrs = 1
        return named("cuLaunchKernelEx", functools.partial(cu.cuLaunchKernelEx, config, fn, argblock, 0))

    def compiler_id(self) -> str:
        return self._version

    def compile_flags(self) -> list[str]:
        be = self.backend
        return [f"-arch={be.arch}", "-std=c++17", f"-DMIGX_WARP_SIZE={be.warp_size}", "-default-device"]

    # compile_many hands large batches to worker processes running the same compile (rtc_pool)
    worker_spec = WorkerSpec("cuda.bindings.nvrtc", "nvrtc", ".cu", "CUBIN", "bytes")

    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        rtc = RuntimeCompiler(nvrtc, "nvrtc", ".cu", "CUBIN", lambda n: b" " * n, self.backend.check)
        return rtc.compile_program(name, source, headers, flags)


class CublasPart(Blas):
    """cuBLAS / cuBLASLt (cuda_blas.py), loaded on the first handle."""

    def __init__(self, backend: CudaBackend):
        super().__init__(backend)
        self._cublas: Cublas | None = None
        self._loading: threading.Thread | None = None
        self._tune_events: tuple[Any, Any] | None = None

    def preload(self) -> None:
        """Load libcublas and libcublasLt on a thread: dlopen of the two (~0.4 s on an H200 host,
        most of it cuBLASLt) releases the GIL, so it overlaps a compile's passes instead of
        adding to its first BLAS handle. A load that fails here is retried (and reported) by
        create."""
        if self._cublas is None and self._loading is None:
            self._loading = threading.Thread(target=self._load, name="migx-cublas-load", daemon=True)
            self._loading.start()

    def _load(self) -> None:
        with contextlib.suppress(Exception):  # create() loads again and raises what went wrong
            self._cublas = Cublas()

    def _library(self) -> Cublas:
        if self._loading is not None:
            self._loading.join()
        if self._cublas is None:
            self._cublas = Cublas()
        return self._cublas

    def create(self, stream: Any, workspace: int, workspace_bytes: int) -> Any:
        return self._library().create(stream, workspace, workspace_bytes)

    def destroy(self, handle: Any) -> None:
        if self._cublas is not None:
            self._cublas.destroy(handle)

    def make_gemm(
        self,
        handle: Any,
        plan: GemmPlan,
        a: int,
        b: int,
        c: int,
        alpha: float,
        bias: int | None = None,
        c_in: int | None = None,
        act: str = "",
        tune: bool = True,
    ) -> tuple[Step, str]:
        how = os.environ.get("MIGX_BLAS_TUNE", "graph")
        timer = None if how == "0" or not tune else self._timer(handle.stream, captured=how != "stream")
        step, note = self._cublas.make_gemm(handle, plan, a, b, c, alpha, timer, bias=bias, c_in=c_in, act=act)
        step.fused_epilogue = note.endswith("+epilogue")
        return step, note

    def _timer(self, stream: Any, captured: bool = True):
        """Device microseconds of one fn() on `stream` (finalize-time BLAS algorithm tuning).

        With `captured`, `reps` calls are captured into a CUDA graph and the graph's replay is timed:
        a small GEMM runs in 2-4 us, faster than the host can enqueue it through ctypes, so calls
        timed back to back on the stream measure the host's launch rate, not the kernel, and the
        "fastest" candidate was close to a random pick. Replayed from a graph, the calls run back to
        back on the device as they do in the program's own graph. A capture that fails (a call
        that refuses to be captured) is ended before the error goes on, and the stream timing is
        used for that candidate."""
        backend = self.backend
        streams, graphs = backend.streams, backend.graphs
        if self._tune_events is None:
            self._tune_events = (streams.event_create(), streams.event_create())
        a, b = self._tune_events

        def on_stream(fn, reps: int = 5) -> float:
            fn()
            self.call(cu.cuEventRecord, a, stream)
            for _ in range(reps):
                fn()
            self.call(cu.cuEventRecord, b, stream)
            streams.event_sync(b)
            return streams.event_elapsed_ms(a, b) * 1e3 / reps

        def in_graph(fn, reps: int = 10, trials: int = 3) -> float:
            fn()  # runs, and leaves cuBLASLt's lazily loaded kernel in place before the capture
            graph = graphs.capture(stream, lambda: [fn() for _ in range(reps)])
            try:
                exe = graphs.instantiate(graph)
            finally:
                graphs.destroy(graph)
            try:
                launch = graphs.make_launch(exe, stream)
                backend.check(launch(), "cuGraphLaunch")  # first replay uploads the graph
                best = None
                for _ in range(trials):
                    self.call(cu.cuEventRecord, a, stream)
                    backend.check(launch(), "cuGraphLaunch")
                    self.call(cu.cuEventRecord, b, stream)
                    streams.event_sync(b)
                    us = streams.event_elapsed_ms(a, b) * 1e3 / reps
                    best = us if best is None else min(best, us)
                return best
            finally:
                graphs.exec_destroy(exe)

        if not captured:
            return on_stream

        def time_us(fn) -> float:
            try:
                return in_graph(fn)
            except GpuError:
                return on_stream(fn)

        return time_us


class CudaGraphs(Graphs):
    def exec_update(self, graph_exec: Any, graph: Any) -> bool:
        err, _info = cu.cuGraphExecUpdate(graph_exec, graph)
        return not err

    def node_count(self, graph: Any) -> int:
        res = cu.cuGraphGetNodes(graph, 0)
        return int(res[-1]) if not res[0] else -1
