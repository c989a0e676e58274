"""cuBLAS for the CUDA backend, through ctypes (no cupy, torch or nvmath needed).

Each GEMM plan runs through cuBLASLt when it can: the matmul and layout descriptors are built
once at finalize, the heuristic's candidates (up to 8) are timed on the program's own buffers and
the fastest is kept, so a call is one cublasLtMatmul with a fixed algorithm: less host work per
call than cublasGemmStridedBatchedEx (which re-runs its heuristic every call) and a tuned kernel.
If cuBLASLt refuses a plan, the classic call is used. The per-call functions are bound without
argtypes and given pre-built ctypes values, so ctypes does no conversions per call. TF32 is never
used: CUBLAS_COMPUTE_32F (64F for double).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..blas_plan import GemmPlan
from .base import GpuError

CUDA_R = {
    "float32": 0,
    "float64": 1,
    "float16": 2,
    "bfloat16": 14,  # cudaDataType
    "int8": 3,
    "int32": 10,
    "float8e4m3fn": 28,
}
# CUBLAS_COMPUTE_64F for double, CUBLAS_COMPUTE_32I for int8 (int32 accumulation and int32
# alpha/beta); everything else CUBLAS_COMPUTE_32F (68), fp8 included (float32 accumulation).
COMPUTE = {"float64": 70, "int8": 72}
ESIZE = {"float16": 2, "bfloat16": 2, "int8": 1, "float8e4m3fn": 1}
GEMM_DEFAULT = -1
LT_DESC_TRANSA, LT_DESC_TRANSB = 3, 4  # cublasLtMatmulDescAttributes_t
LT_DESC_EPILOGUE, LT_DESC_BIAS_POINTER = 7, 8
# cublasLtEpilogue_t: D = act(alpha·A·B + beta·C + bias), bias one value per row of D; GELU is
# the tanh approximation (blas_epilogue.identify_activation matches only that form).
LT_EPILOGUE = {("", True): 4, ("relu", False): 2, ("relu", True): 6, ("gelu_tanh", False): 32, ("gelu_tanh", True): 36}
LT_LAYOUT_BATCH_COUNT, LT_LAYOUT_BATCH_OFFSET = 5, 6  # cublasLtMatrixLayoutAttribute_t
LT_PREF_MAX_WORKSPACE = 1  # cublasLtMatmulPreferenceAttributes_t
# Heuristic candidates timed per plan (MIGX_BLAS_CANDIDATES overrides, for tuning studies).
LT_CANDIDATES = int(os.environ.get("MIGX_BLAS_CANDIDATES", "8"))
vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong


class HeuristicResult(ctypes.Structure):  # cublasLtMatmulHeuristicResult_t, 96 bytes
    _fields_ = [
        ("algo", ctypes.c_uint64 * 8),
        ("workspaceSize", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("wavesCount", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


def _find(name: str) -> str:
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        loaded = load_nvidia_dynamic_lib(name)
        if loaded.abs_path:
            return loaded.abs_path
    except Exception:  # noqa: BLE001 - fall back to the system loader
        pass
    for cand in (f"lib{name}.so.13", f"lib{name}.so.12", ctypes.util.find_library(name)):
        if cand:
            try:
                ctypes.CDLL(cand)
                return cand
            except OSError:
                continue
    raise GpuError(f"cuda: lib{name} not found (pip install nvidia-cublas, or install the CUDA toolkit)")


def _raw(path: str, symbol: str):
    fn = getattr(ctypes.CDLL(path), symbol)
    fn.restype = ctypes.c_int
    return fn


@dataclass
class BlasHandle:
    handle: ctypes.c_void_p
    lt: ctypes.c_void_p | None
    workspace: int
    workspace_bytes: int
    stream: Any


class Cublas:
    def __init__(self):
        path = _find("cublas")
        self.lib = L = ctypes.CDLL(path)
        for f in (
            "cublasCreate_v2",
            "cublasDestroy_v2",
            "cublasSetStream_v2",
            "cublasSetWorkspace_v2",
            "cublasSetMathMode",
        ):
            getattr(L, f).restype = ctypes.c_int
        L.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
        self.gemm_raw = _raw(path, "cublasGemmStridedBatchedEx")
        self.lt = None
        if os.environ.get("MIGX_CUBLASLT", "1") != "0":
            try:
                lt_path = _find("cublasLt")
                self.lt = ctypes.CDLL(lt_path)
                self.lt_matmul = _raw(lt_path, "cublasLtMatmul")
                for f in (
                    "cublasLtCreate",
                    "cublasLtDestroy",
                    "cublasLtMatmulDescCreate",
                    "cublasLtMatmulDescSetAttribute",
                    "cublasLtMatrixLayoutCreate",
                    "cublasLtMatrixLayoutSetAttribute",
                    "cublasLtMatmulPreferenceCreate",
                    "cublasLtMatmulPreferenceSetAttribute",
                    "cublasLtMatmulAlgoGetHeuristic",
                ):
                    getattr(self.lt, f).restype = ctypes.c_int
                self.lt.cublasLtMatrixLayoutCreate.argtypes = [
                    ctypes.POINTER(vp),
                    i32,
                    ctypes.c_uint64,
                    ctypes.c_uint64,
                    i64,
                ]
            except (GpuError, OSError, AttributeError):
                self.lt = None

    def create(self, stream: Any, workspace: int, workspace_bytes: int) -> BlasHandle:
        L = self.lib
        h = vp()
        _ok(L.cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
        _ok(L.cublasSetStream_v2(h, vp(int(stream))), "cublasSetStream")
        # Set before any capture: cuBLAS would otherwise allocate a workspace lazily, and an
        # allocation during stream capture invalidates the graph.
        _ok(L.cublasSetWorkspace_v2(h, workspace, workspace_bytes), "cublasSetWorkspace")
        _ok(L.cublasSetMathMode(h, i32(0)), "cublasSetMathMode")  # CUBLAS_DEFAULT_MATH: no TF32
        lt = None
        if self.lt is not None:
            lt = vp()
            if self.lt.cublasLtCreate(ctypes.byref(lt)):
                lt = None
        return BlasHandle(h, lt, workspace, workspace_bytes, stream)

    def destroy(self, bh: BlasHandle) -> None:
        self.lib.cublasDestroy_v2(bh.handle)
        if bh.lt is not None:
            self.lt.cublasLtDestroy(bh.lt)

    # ---- one GEMM plan -------------------------------------------------------------------------
    def make_gemm(
        self,
        bh: BlasHandle,
        plan: GemmPlan,
        a: int,
        b: int,
        c: int,
        alpha: float,
        timer=None,
        *,
        bias: int | None = None,
        c_in: int | None = None,
        act: str = "",
    ):
        """(step, note): the step runs every call of the plan; note says which path/algorithm
        (it contains "epilogue" when cuBLASLt also adds `bias` and/or `c_in`)."""
        t, tc = CUDA_R.get(plan.dtype), CUDA_R.get(plan.c_dtype)
        if t is None or tc is None:
            raise GpuError(f"cuda: no cuBLAS GEMM for {plan.dtype} -> {plan.c_dtype}")
        esz = ESIZE.get(plan.dtype) or np.dtype(plan.dtype).itemsize
        esz_c = ESIZE.get(plan.c_dtype) or np.dtype(plan.c_dtype).itemsize
        compute = COMPUTE.get(plan.dtype, 68)
        scalar = {70: ctypes.c_double, 72: ctypes.c_int32}.get(compute, ctypes.c_float)
        alpha_v = int(alpha) if compute == 72 else alpha
        ptrs = []
        for oa, ob, oc in plan.offsets:
            p1, p2 = (b + ob * esz, a + oa * esz) if plan.swap else (a + oa * esz, b + ob * esz)
            ptrs.append((p1, p2, c + oc * esz_c))
        calls, note = None, "cublas default"
        quant = plan.dtype in ("int8", "float8e4m3fn")  # no bias / residual epilogue on 8-bit GEMMs
        if (
            bh.lt is not None
            and not quant
            and (bias is not None or c_in is not None or act)
            and len(ptrs) == 1
            and plan.batch == 1
        ):
            keep = [scalar(alpha_v), scalar(1.0 if c_in is not None else 0.0)]  # the calls point into it
            got = self._lt_calls(bh, plan, (t, tc), compute, ptrs, keep, timer, bias=bias, c_in=c_in, act=act)
            if got is not None:
                calls, note = got[0], got[1] + " +epilogue"
        if calls is None:
            keep = [scalar(alpha_v), scalar(0)]
        if calls is None and bh.lt is not None:
            got = self._lt_calls(bh, plan, (t, tc), compute, ptrs, keep, timer)
            if got is not None:
                calls, note = got
        if calls is None:
            if plan.dtype == "float8e4m3fn":  # fp8 GEMMs exist only in cuBLASLt
                raise GpuError(f"cuda: cuBLASLt refused the fp8 GEMM {plan.describe()}")
            calls = self._cublas_calls(bh, plan, (t, tc), compute, ptrs, keep)

        def step(calls=tuple(calls), keep=keep) -> tuple:
            for f in calls:
                err = f()
                if err:
                    return (err, "cuBLAS")
            return (0,)

        return step, note

    def _layout(self, t: int, rows: int, cols: int, ld: int, batch: int, stride: int, keep: list) -> vp:
        lay = vp()
        _ok(self.lt.cublasLtMatrixLayoutCreate(ctypes.byref(lay), t, rows, cols, ld), "cublasLtMatrixLayoutCreate")
        if batch > 1:
            n, s = i32(batch), i64(stride)
            set_attr = self.lt.cublasLtMatrixLayoutSetAttribute
            _ok(set_attr(lay, i32(LT_LAYOUT_BATCH_COUNT), ctypes.byref(n), ctypes.c_size_t(4)), "layout batch")
            _ok(set_attr(lay, i32(LT_LAYOUT_BATCH_OFFSET), ctypes.byref(s), ctypes.c_size_t(8)), "layout stride")
        keep.append(lay)
        return lay

    def _cublas_calls(self, bh: BlasHandle, plan: GemmPlan, types: tuple[int, int], compute: int, ptrs, keep: list):
        """cublasGemmStridedBatchedEx calls, one per pointer triple (alpha and beta in keep[:2])."""
        t, tc = types
        al, be = (vp(ctypes.addressof(x)) for x in keep[:2])
        calls = [
            functools.partial(
                self.gemm_raw,
                bh.handle,
                i32(plan.trans1),
                i32(plan.trans2),
                i32(plan.m),
                i32(plan.n),
                i32(plan.k),
                al,
                vp(p1),
                i32(t),
                i32(plan.ld1),
                i64(plan.stride1),
                vp(p2),
                i32(t),
                i32(plan.ld2),
                i64(plan.stride2),
                be,
                vp(pc),
                i32(tc),
                i32(plan.ldc),
                i64(plan.stride_c),
                i32(plan.batch),
                i32(compute),
                i32(GEMM_DEFAULT),
            )
            for p1, p2, pc in ptrs
        ]
        if plan.dtype == "int8":  # one checked call: a refusal falls back to a generated kernel
            for f in calls:
                err = f()
                if err:
                    raise GpuError(f"cuda: cuBLAS refused the int8 GEMM {plan.describe()} (status {err})")
        return calls

    def _lt_layouts(self, plan: GemmPlan, types: tuple[int, int], keep: list) -> tuple[vp, vp, vp]:
        """The layouts of A, B (as the plan transposes them) and C."""
        t, tc = types
        s1 = (plan.k, plan.m) if plan.trans1 else (plan.m, plan.k)
        s2 = (plan.n, plan.k) if plan.trans2 else (plan.k, plan.n)
        la = self._layout(t, *s1, plan.ld1, plan.batch, plan.stride1, keep)
        lb = self._layout(t, *s2, plan.ld2, plan.batch, plan.stride2, keep)
        lc = self._layout(tc, plan.m, plan.n, plan.ldc, plan.batch, plan.stride_c, keep)
        return la, lb, lc

    def _lt_desc(self, plan: GemmPlan, compute: int, keep: list, bias: int | None, act: str) -> vp:
        """The matmul descriptor: compute and scale types, transposes and the epilogue (set before
        the heuristic, which then picks kernels that support it)."""
        L = self.lt
        desc = vp()
        scale_t = {70: 1, 72: CUDA_R["int32"]}.get(compute, 0)  # the alpha/beta type
        _ok(L.cublasLtMatmulDescCreate(ctypes.byref(desc), i32(compute), i32(scale_t)), "MatmulDescCreate")
        keep.append(desc)
        for attr, v in ((LT_DESC_TRANSA, plan.trans1), (LT_DESC_TRANSB, plan.trans2)):
            val = i32(int(v))
            _ok(
                L.cublasLtMatmulDescSetAttribute(desc, i32(attr), ctypes.byref(val), ctypes.c_size_t(4)),
                "MatmulDescSetAttribute",
            )
        if bias is not None or act:
            epi = ctypes.c_uint32(LT_EPILOGUE[(act, bias is not None)])
            keep.append(epi)
            _ok(
                L.cublasLtMatmulDescSetAttribute(desc, i32(LT_DESC_EPILOGUE), ctypes.byref(epi), ctypes.c_size_t(4)),
                "MatmulDescSetAttribute(epilogue)",
            )
        if bias is not None:
            ptr = vp(bias)
            keep.append(ptr)
            _ok(
                L.cublasLtMatmulDescSetAttribute(
                    desc, i32(LT_DESC_BIAS_POINTER), ctypes.byref(ptr), ctypes.c_size_t(8)
                ),
                "MatmulDescSetAttribute(bias)",
            )
        return desc

    def _lt_candidates(self, bh: BlasHandle, desc: vp, layouts: tuple[vp, vp, vp], keep: list) -> list:
        """The heuristic's algorithms that succeeded and fit the workspace (kept alive in `keep`)."""
        L = self.lt
        la, lb, lc = layouts
        pref = vp()
        _ok(L.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "PreferenceCreate")
        keep.append(pref)
        wsb = ctypes.c_uint64(bh.workspace_bytes)
        _ok(
            L.cublasLtMatmulPreferenceSetAttribute(
                pref, i32(LT_PREF_MAX_WORKSPACE), ctypes.byref(wsb), ctypes.c_size_t(8)
            ),
            "pref",
        )
        results = (HeuristicResult * LT_CANDIDATES)()
        count = i32(0)
        _ok(
            L.cublasLtMatmulAlgoGetHeuristic(
                bh.lt, desc, la, lb, lc, lc, pref, i32(LT_CANDIDATES), results, ctypes.byref(count)
            ),
            "AlgoGetHeuristic",
        )
        cands = [
            results[i]
            for i in range(count.value)
            if results[i].state == 0 and results[i].workspaceSize <= bh.workspace_bytes
        ]
        if cands:
            keep.append(results)
        return cands

    def _lt_calls(
        self,
        bh: BlasHandle,
        plan: GemmPlan,
        types: tuple[int, int],
        compute: int,
        ptrs,
        keep: list,
        timer,
        *,
        bias: int | None = None,
        c_in: int | None = None,
        act: str = "",
    ):
        try:
            desc = self._lt_desc(plan, compute, keep, bias, act)
            la, lb, lc = self._lt_layouts(plan, types, keep)
            cands = self._lt_candidates(bh, desc, (la, lb, lc), keep)
        except GpuError:
            return None
        if not cands:
            return None
        al, be = (vp(ctypes.addressof(x)) for x in keep[:2])

        def calls_for(r: HeuristicResult) -> list:
            # C is the output itself (beta = 0) or, for a fused residual, c_in (same layout, beta = 1).
            return [
                functools.partial(
                    self.lt_matmul,
                    bh.lt,
                    desc,
                    al,
                    vp(p1),
                    la,
                    vp(p2),
                    lb,
                    be,
                    vp(pc if c_in is None else c_in),
                    lc,
                    vp(pc),
                    lc,
                    vp(ctypes.addressof(r.algo)),
                    vp(bh.workspace),
                    ctypes.c_size_t(bh.workspace_bytes),
                    vp(int(bh.stream)),
                )
                for p1, p2, pc in ptrs
            ]

        # The same GEMM (plan, types, epilogue) on the same heuristic list picks the same algorithm:
        # timing every candidate again on each finalize cost a toggle-and-time 0.4 s on YOLOv10n.
        key = (plan, types, compute, bias is not None, c_in is not None, act, len(cands))
        remembered = _TUNED.get(key) if timer is not None else None
        if remembered is not None:
            best, best_t = remembered
        else:
            best, best_t = _fastest(cands, calls_for, timer)
            if best_t is not None:
                _TUNED[key] = (best, best_t)
        calls = calls_for(cands[best])
        for f in calls:  # one checked call: a plan cuBLASLt accepts in the heuristic but rejects here falls back
            if f():
                return None
        how = f"tuned {best + 1}/{len(cands)}" if best_t is not None else f"heuristic 1/{len(cands)}"
        return calls, f"cublasLt {how}"


# (plan, types, compute, epilogue, candidate count) -> (index, µs) of the fastest candidate, for this
# process and its one device (a process drives one GPU here).
_TUNED: dict[tuple, tuple[int, float]] = {}


def _fastest(cands: list, calls_for: Callable, timer) -> tuple[int, float | None]:
    """(index, µs) of the fastest candidate, timed on the program's own buffers; (0, None) without
    a timer or with one candidate."""
    best, best_t = 0, None
    if timer is not None and len(cands) > 1:
        for k, r in enumerate(cands):
            fs = calls_for(r)
            try:
                us = timer(lambda fs=fs: [_ok(f(), "cublasLtMatmul") for f in fs])
            except GpuError:
                continue
            if best_t is None or us < best_t:
                best, best_t = k, us
    return best, best_t


def _ok(status: int, what: str) -> None:
    if status:
        raise GpuError(f"cuda: {what} failed with cuBLAS status {status}")
