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
from .base import Backend, Blas, Driver, GpuError, Graphs, Kernels, Step, named
from .rtc import RuntimeCompiler

HIPBLAS_OP = {False: 111, True: 112}  # HIPBLAS_OP_N, HIPBLAS_OP_T
HIPBLAS_GEMM_DEFAULT = 160
HIP_R = {
    "float32": 0,
    "float64": 1,
    "float16": 2,
    "bfloat16": 14,  # hipDataType (7.x+), = cudaDataType
    "int8": 3,
    "int32": 10,
}
HIPBLAS_COMPUTE = {"float64": 7, "int8": 9}  # HIPBLAS_COMPUTE_64F, _32I; else HIPBLAS_COMPUTE_32F = 2
HIPBLAS_R_6X = {
    "float32": 151,
    "float64": 152,
    "float16": 150,
    "bfloat16": 168,  # hipblasDatatype_t (6.x)
    "int8": 160,
    "int32": 162,
}
ESIZE = {"float16": 2, "bfloat16": 2, "int8": 1}


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


def hip_driver(hip: Any) -> Driver:
    """The HIP runtime calls, as hip-python exposes them (each returns (hipError_t, value...))."""
    k = hip.hipMemcpyKind
    mode = hip.hipStreamCaptureMode.hipStreamCaptureModeThreadLocal

    def memcpy(kind: Any):  # hipMemcpyAsync takes the kind before the stream; CUDA has one call per kind
        return named("hipMemcpyAsync", lambda dst, src, n, stream: hip.hipMemcpyAsync(dst, src, n, kind, stream))

    return Driver(
        mem_alloc=hip.hipMalloc,
        mem_free=hip.hipFree,
        host_alloc=named("hipHostMalloc", lambda n: hip.hipHostMalloc(n, 0)),
        host_free=hip.hipHostFree,
        copy={
            "h2d": memcpy(k.hipMemcpyHostToDevice),
            "d2h": memcpy(k.hipMemcpyDeviceToHost),
            "d2d": memcpy(k.hipMemcpyDeviceToDevice),
        },
        stream_create=named("hipStreamCreateWithFlags", lambda: hip.hipStreamCreateWithFlags(1)),  # non-blocking
        stream_sync=hip.hipStreamSynchronize,
        stream_destroy=hip.hipStreamDestroy,
        event_create=hip.hipEventCreate,
        event_record=hip.hipEventRecord,
        event_sync=hip.hipEventSynchronize,
        event_elapsed=hip.hipEventElapsedTime,
        event_destroy=hip.hipEventDestroy,
        device_sync=hip.hipDeviceSynchronize,
        module_load=hip.hipModuleLoadData,
        module_function=hip.hipModuleGetFunction,
        module_unload=hip.hipModuleUnload,
        # kernelParams as the int address of our own void*[]: no per-launch packing by hip-python
        launch=hip.hipModuleLaunchKernel,
        launch_extra=None,
        capture_begin=named("hipStreamBeginCapture", lambda s: hip.hipStreamBeginCapture(s, mode)),
        capture_end=hip.hipStreamEndCapture,
        capture_status=hip.hipStreamIsCapturing,
        capture_none=hip.hipStreamCaptureStatus.hipStreamCaptureStatusNone,
        # the one instantiate form every hip-python version shares
        graph_instantiate=named("hipGraphInstantiateWithFlags", lambda g: hip.hipGraphInstantiateWithFlags(g, 0)),
        graph_upload=getattr(hip, "hipGraphUpload", None),
        graph_launch=hip.hipGraphLaunch,
        graph_destroy=hip.hipGraphDestroy,
        graph_exec_destroy=hip.hipGraphExecDestroy,
    )


class HipBackend(Backend):
    name = "hip"
    # hipBLAS routes int8 GEMMs to hipBLASLt / rocBLAS; hip-python has no fp8 GEMM binding, so
    # fp8 quant_dot lowers to the generated tiled kernel here.
    quant_gemm_types = ("int8",)

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
        self.compose(
            hip_driver(hip), HiprtcKernels(self, "hiprtc-{}.{}".format(*v)), HipblasPart(self), HipGraphs(self)
        )

    def _properties(self, device: int) -> Any:
        hip = self.hip
        if self.major >= 10:
            return self.check(hip.hipGetDeviceProperties(device), "hipGetDeviceProperties")
        props = hip.hipDeviceProp_t()
        self.check(hip.hipGetDeviceProperties(props, device), "hipGetDeviceProperties")
        return props


class HiprtcKernels(Kernels):
    def __init__(self, backend: HipBackend, version: str):
        super().__init__(backend)
        self._version = version

    def compiler_id(self) -> str:
        return self._version

    def compile_flags(self) -> list[str]:
        be = self.backend
        return [f"--offload-arch={be.arch}", "-O3", "-std=c++17", f"-DMIGX_WARP_SIZE={be.warp_size}"]

    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        rtc = RuntimeCompiler(self.backend.hiprtc, "hiprtc", ".hip", "Code", bytearray, self.backend.check)
        return rtc.compile_program(name, source, headers, flags)


class HipblasPart(Blas):
    def create(self, stream: Any, workspace: int, workspace_bytes: int) -> Any:
        hb = self.backend.hipblas
        if hb is None:
            raise GpuError("hip: hipBLAS bindings missing (pip install 'hip-python[libraries]')")
        h = self.call(hb.hipblasCreate)
        self.call(hb.hipblasSetStream, h, stream)
        if hasattr(hb, "hipblasSetWorkspace"):  # set before capture; absent in older hipBLAS
            self.call(hb.hipblasSetWorkspace, h, workspace, workspace_bytes)
        return h

    def destroy(self, handle: Any) -> None:
        if self.backend.hipblas is not None:
            self.backend.hipblas.hipblasDestroy(handle)

    def gemm_types(self, dtype: str, out_dtype: str | None = None) -> tuple[Any, Any, Any]:
        """(A/B type, C type, compute type) for this hip-python version; int8 x int8 -> int32
        accumulates in int32 (HIPBLAS_COMPUTE_32I / HIPBLAS_R_32I with int32 alpha and beta)."""
        out = out_dtype or dtype
        if dtype not in HIP_R or out not in HIP_R:
            raise GpuError(f"hip: no hipBLAS GEMM for {dtype} -> {out}")
        if self.backend.major <= 6:
            acc = {"float64": "float64", "int8": "int32"}.get(dtype, "float32")
            return HIPBLAS_R_6X[dtype], HIPBLAS_R_6X[out], HIPBLAS_R_6X[acc]
        return HIP_R[dtype], HIP_R[out], HIPBLAS_COMPUTE.get(dtype, 2)

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
        # bias / c_in / act are not fused here: the caller runs the GEMM's epilogue kernel.
        t, tc, compute = self.gemm_types(plan.dtype, plan.c_dtype)
        esz = ESIZE.get(plan.dtype) or np.dtype(plan.dtype).itemsize
        esz_c = ESIZE.get(plan.c_dtype) or np.dtype(plan.c_dtype).itemsize
        scalar = {"float64": ctypes.c_double, "int8": ctypes.c_int32}.get(plan.dtype, ctypes.c_float)
        al, be = scalar(int(alpha) if plan.dtype == "int8" else alpha), scalar(0)
        fn = self.backend.hipblas.hipblasGemmStridedBatchedEx
        calls = []
        for oa, ob, oc in plan.offsets:
            p1, p2 = (b + ob * esz, a + oa * esz) if plan.swap else (a + oa * esz, b + ob * esz)
            calls.append(
                functools.partial(
                    fn,
                    handle,
                    HIPBLAS_OP[plan.trans1],
                    HIPBLAS_OP[plan.trans2],
                    plan.m,
                    plan.n,
                    plan.k,
                    ctypes.addressof(al),
                    p1,
                    t,
                    plan.ld1,
                    plan.stride1,
                    p2,
                    t,
                    plan.ld2,
                    plan.stride2,
                    ctypes.addressof(be),
                    c + oc * esz_c,
                    tc,
                    plan.ldc,
                    plan.stride_c,
                    plan.batch,
                    compute,
                    HIPBLAS_GEMM_DEFAULT,
                )
            )

        def step(calls=tuple(calls), keep=(al, be)) -> tuple:
            for f in calls:
                res = f()
                err = res[0] if isinstance(res, tuple) else res
                if err:
                    return (err, "hipblasGemmStridedBatchedEx")
            return (0,)

        return step, ""


class HipGraphs(Graphs):
    def exec_update(self, graph_exec: Any, graph: Any) -> bool:
        hip = self.backend.hip
        if self.backend.major >= 10:  # 10.x takes the error-node out-argument; older return it
            res = hip.hipGraphExecUpdate(graph_exec, graph, None)
        else:
            res = hip.hipGraphExecUpdate(graph_exec, graph)
        return not res[0]

    def node_count(self, graph: Any) -> int:
        return -1  # hipGraphGetNodes' Python signature differs across hip-python 6.x/7.x/10.x: not counted
