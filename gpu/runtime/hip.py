"""AMD backend: hip-python (HIP runtime, hiprtc, hipBLAS).

hip-python 10.x puts the bindings in `rocm.bindings.*`; 6.x/7.x in `hip.*`. The calls are the
same except where the version table below branches: hipGetDeviceProperties (10.x returns the
struct, older fill one in place), hipGraphExecUpdate (10.x takes the error-node out-argument,
older return it) and hipBLAS data types (6.x: hipblasDatatype_t for data and compute; 7.x and
later: hipDataType plus hipblasComputeType_t). Graphs are instantiated with
hipGraphInstantiateWithFlags, the one form all versions share. Not yet run on an AMD GPU: the
call shapes are checked against hip-python's signatures by tests/gpu/test_hip_calls.py.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from ..blas_plan import GemmPlan
from .base import Backend, GpuError, Step

HIPBLAS_OP = {False: 111, True: 112}  # HIPBLAS_OP_N, HIPBLAS_OP_T
HIPBLAS_GEMM_DEFAULT = 160
HIP_R = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 14}  # hipDataType (7.x+), = cudaDataType
HIPBLAS_COMPUTE = {"float64": 7}  # HIPBLAS_COMPUTE_64F; else HIPBLAS_COMPUTE_32F = 2
HIPBLAS_R_6X = {"float32": 151, "float64": 152, "float16": 150, "bfloat16": 168}  # hipblasDatatype_t (6.x)


def import_bindings() -> tuple[Any, Any, Any, str]:
    """(hip, hiprtc, hipblas or None, hip-python version)."""
    try:
        from rocm.bindings import hip, hiprtc
        try:
            from rocm.bindings import hipblas
        except ImportError:
            hipblas = None
    except ImportError:
        from hip import hip, hiprtc
        try:
            from hip import hipblas
        except ImportError:
            hipblas = None
    from importlib import metadata

    try:
        version = metadata.version("hip-python")
    except metadata.PackageNotFoundError:
        version = getattr(hip, "__version__", "0")
    return hip, hiprtc, hipblas, version


class HipBackend(Backend):
    name = "hip"

    def __init__(self, device: int = 0, bindings: tuple[Any, Any, Any, str] | None = None):
        self.hip, self.hiprtc, self.hipblas, self.version = bindings or import_bindings()
        self.major = int(str(self.version).split(".")[0] or 0)
        hip = self.hip
        count = self.check(hip.hipGetDeviceCount(), "hipGetDeviceCount")
        if count <= device:
            raise GpuError(f"hip: no HIP device {device} ({count} found)")
        self.check(hip.hipSetDevice(device), "hipSetDevice")
        props = self._properties(device)
        arch = props.gcnArchName
        arch = arch.decode() if isinstance(arch, bytes) else str(arch)
        self.arch = arch.split(":")[0]  # gfx942:sramecc+:xnack- -> gfx942
        self.warp_size = int(props.warpSize)
        self.multiprocessors = int(props.multiProcessorCount)
        name = props.name
        self.device_name = (name.decode(errors="replace") if isinstance(name, bytes) else str(name)).split("\0")[0]
        v = self.check(self.hiprtc.hiprtcVersion(), "hiprtcVersion")
        self._compiler = "hiprtc-{}.{}".format(*v)

    def _properties(self, device: int) -> Any:
        hip = self.hip
        if self.major >= 10:
            return self.check(hip.hipGetDeviceProperties(device), "hipGetDeviceProperties")
        props = hip.hipDeviceProp_t()
        self.check(hip.hipGetDeviceProperties(props, device), "hipGetDeviceProperties")
        return props

    def make_current(self) -> None:
        """HIP keeps the device per thread; nothing to do for the default device."""

    # ---- memory ------------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        return int(self.check(self.hip.hipMalloc(max(int(nbytes), 1)), f"hipMalloc({nbytes})"))

    def free(self, ptr: int) -> None:
        self.check(self.hip.hipFree(ptr), "hipFree")

    def host_alloc(self, nbytes: int) -> tuple[int, np.ndarray]:
        n = max(int(nbytes), 1)
        ptr = int(self.check(self.hip.hipHostMalloc(n, 0), f"hipHostMalloc({n})"))
        return ptr, np.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=np.uint8)

    def host_free(self, ptr: int) -> None:
        self.check(self.hip.hipHostFree(ptr), "hipHostFree")

    def make_copy(self, kind: str, dst: int, src: int, nbytes: int, stream: Any) -> Step:
        k = self.hip.hipMemcpyKind
        kinds = {"h2d": k.hipMemcpyHostToDevice, "d2h": k.hipMemcpyDeviceToHost, "d2d": k.hipMemcpyDeviceToDevice}
        return functools.partial(self.hip.hipMemcpyAsync, dst, src, nbytes, kinds[kind], stream)

    # ---- streams and events ------------------------------------------------------------------
    def stream_create(self) -> Any:
        return self.check(self.hip.hipStreamCreateWithFlags(1), "hipStreamCreateWithFlags")  # hipStreamNonBlocking

    def stream_sync(self, stream: Any) -> None:
        self.check(self.hip.hipStreamSynchronize(stream), "hipStreamSynchronize")

    def stream_destroy(self, stream: Any) -> None:
        self.check(self.hip.hipStreamDestroy(stream), "hipStreamDestroy")

    def event_create(self) -> Any:
        return self.check(self.hip.hipEventCreate(), "hipEventCreate")

    def make_event_record(self, event: Any, stream: Any) -> Step:
        return functools.partial(self.hip.hipEventRecord, event, stream)

    def event_sync(self, event: Any) -> None:
        self.check(self.hip.hipEventSynchronize(event), "hipEventSynchronize")

    def event_elapsed_ms(self, start: Any, stop: Any) -> float:
        return float(self.check(self.hip.hipEventElapsedTime(start, stop), "hipEventElapsedTime"))

    def event_destroy(self, event: Any) -> None:
        self.check(self.hip.hipEventDestroy(event), "hipEventDestroy")

    def synchronize(self) -> None:
        self.check(self.hip.hipDeviceSynchronize(), "hipDeviceSynchronize")

    # ---- compilation -------------------------------------------------------------------------
    def compiler_id(self) -> str:
        return self._compiler

    def compile_flags(self) -> list[str]:
        return [f"--offload-arch={self.arch}", "-O3", "-std=c++17", f"-DMIGX_WARP_SIZE={self.warp_size}"]

    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        rtc = self.hiprtc
        prog = self.check(rtc.hiprtcCreateProgram(source.encode(), f"{name}.hip".encode(), len(headers),
                                                  [h.encode() for h in headers.values()],
                                                  [n.encode() for n in headers]), "hiprtcCreateProgram")
        try:
            opts = [f.encode() for f in flags]
            (err,) = rtc.hiprtcCompileProgram(prog, len(opts), opts)
            if err:
                size = self.check(rtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
                log = bytearray(size)
                rtc.hiprtcGetProgramLog(prog, log)
                raise GpuError(f"hiprtc failed to compile {name}:\n{log.decode(errors='replace').strip()}")
            size = self.check(rtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
            code = bytearray(size)
            self.check(rtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
            return bytes(code)
        finally:
            rtc.hiprtcDestroyProgram(prog)

    def load_module(self, binary: bytes) -> Any:
        return self.check(self.hip.hipModuleLoadData(binary), "hipModuleLoadData")

    def get_function(self, module: Any, name: str) -> Any:
        return self.check(self.hip.hipModuleGetFunction(module, name.encode()), f"hipModuleGetFunction({name})")

    def unload_module(self, module: Any) -> None:
        self.check(self.hip.hipModuleUnload(module), "hipModuleUnload")

    # ---- launches ----------------------------------------------------------------------------
    def make_launch(self, fn, grid, block, smem, stream, argblock, site=None) -> Step:
        # kernelParams as the int address of our own void*[]: no per-launch packing by hip-python.
        return functools.partial(self.hip.hipModuleLaunchKernel, fn, grid, 1, 1, block, 1, 1, smem, stream,
                                 argblock, None)

    # ---- BLAS --------------------------------------------------------------------------------
    def blas_create(self, stream: Any, workspace: int, workspace_bytes: int) -> Any:
        if self.hipblas is None:
            raise GpuError("hip: hipBLAS bindings missing (pip install 'hip-python[libraries]')")
        hb = self.hipblas
        h = self.check(hb.hipblasCreate(), "hipblasCreate")
        self.check(hb.hipblasSetStream(h, stream), "hipblasSetStream")
        if hasattr(hb, "hipblasSetWorkspace"):  # set before capture; absent in older hipBLAS
            self.check(hb.hipblasSetWorkspace(h, workspace, workspace_bytes), "hipblasSetWorkspace")
        return h

    def blas_destroy(self, handle: Any) -> None:
        if self.hipblas is not None:
            self.hipblas.hipblasDestroy(handle)

    def gemm_types(self, dtype: str) -> tuple[Any, Any]:
        """(data type, compute type) for this hip-python version."""
        if self.major <= 6:
            t = HIPBLAS_R_6X[dtype]
            return t, (HIPBLAS_R_6X["float64"] if dtype == "float64" else HIPBLAS_R_6X["float32"])
        return HIP_R[dtype], HIPBLAS_COMPUTE.get(dtype, 2)

    def make_gemm(self, handle: Any, plan: GemmPlan, a: int, b: int, c: int, alpha: float,
                  bias: int | None = None, c_in: int | None = None) -> tuple[Step, str]:
        # bias / c_in are not fused here: the caller runs the GEMM's epilogue kernel.
        t, compute = self.gemm_types(plan.dtype)
        esz = np.dtype(np.float16 if plan.dtype in ("float16", "bfloat16") else plan.dtype).itemsize
        scalar = ctypes.c_double if plan.dtype == "float64" else ctypes.c_float
        al, be = scalar(alpha), scalar(0.0)
        fn = self.hipblas.hipblasGemmStridedBatchedEx
        calls = []
        for oa, ob, oc in plan.offsets:
            p1, p2 = (b + ob * esz, a + oa * esz) if plan.swap else (a + oa * esz, b + ob * esz)
            calls.append(functools.partial(
                fn, handle, HIPBLAS_OP[plan.trans1], HIPBLAS_OP[plan.trans2], plan.m, plan.n, plan.k,
                ctypes.addressof(al), p1, t, plan.ld1, plan.stride1, p2, t, plan.ld2, plan.stride2,
                ctypes.addressof(be), c + oc * esz, t, plan.ldc, plan.stride_c, plan.batch, compute,
                HIPBLAS_GEMM_DEFAULT))

        def step(calls=tuple(calls), keep=(al, be)) -> tuple:
            for f in calls:
                res = f()
                err = res[0] if isinstance(res, tuple) else res
                if err:
                    return (err, "hipblasGemmStridedBatchedEx")
            return (0,)

        return step, ""

    # ---- graphs ------------------------------------------------------------------------------
    def begin_capture(self, stream: Any) -> None:
        mode = self.hip.hipStreamCaptureMode.hipStreamCaptureModeThreadLocal
        self.check(self.hip.hipStreamBeginCapture(stream, mode), "hipStreamBeginCapture")

    def end_capture(self, stream: Any) -> Any:
        err, graph = self.hip.hipStreamEndCapture(stream)
        if err:
            raise GpuError(f"hip: stream capture failed: {self.error_string(err)}")
        return graph

    def is_capturing(self, stream: Any) -> bool:
        status = self.check(self.hip.hipStreamIsCapturing(stream), "hipStreamIsCapturing")
        return status != self.hip.hipStreamCaptureStatus.hipStreamCaptureStatusNone

    def graph_instantiate(self, graph: Any) -> Any:
        return self.check(self.hip.hipGraphInstantiateWithFlags(graph, 0), "hipGraphInstantiateWithFlags")

    def graph_upload(self, graph_exec: Any, stream: Any) -> None:
        if hasattr(self.hip, "hipGraphUpload"):
            self.check(self.hip.hipGraphUpload(graph_exec, stream), "hipGraphUpload")

    def make_graph_launch(self, graph_exec: Any, stream: Any) -> Step:
        return functools.partial(self.hip.hipGraphLaunch, graph_exec, stream)

    def graph_exec_update(self, graph_exec: Any, graph: Any) -> bool:
        if self.major >= 10:
            res = self.hip.hipGraphExecUpdate(graph_exec, graph, None)
        else:
            res = self.hip.hipGraphExecUpdate(graph_exec, graph)
        return not res[0]

    def graph_destroy(self, graph: Any) -> None:
        self.check(self.hip.hipGraphDestroy(graph), "hipGraphDestroy")

    def graph_exec_destroy(self, graph_exec: Any) -> None:
        self.check(self.hip.hipGraphExecDestroy(graph_exec), "hipGraphExecDestroy")

    def graph_node_count(self, graph: Any) -> int:
        return -1  # hipGraphGetNodes' Python signature differs across hip-python 6.x/7.x/10.x: not counted
