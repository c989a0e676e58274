"""A recording backend with the same shape as `cuda` and `hip`, for CI without a GPU.

It keeps "device" memory as numpy byte arrays (poisoned with 0xFF, so an unwritten read shows as
NaN), records every call, and, like a real stream, runs work when it is enqueued, except during
capture, when the work is recorded into the graph and runs only when the graph is launched.
Kernels are emulated here from each launch's `LaunchSite` (the op's reference compute on the
strided buffers), GEMMs replay the column-major BLAS call literally. So the executor's buffer
plan, argument blocks, GEMM plans and graph semantics are all exercised, and misuse that a real
driver would reject fails loudly: allocation during capture, a pointer outside any allocation,
capture calls unpaired.
"""

from __future__ import annotations

import ctypes
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.ref import SubmoduleRunner
from migx_explore.compiler.shape import Shape

from ..blas_plan import GemmPlan
from ..ops import apply_epilogue, output_buffers
from .base import Backend, GpuError, LaunchSite, Step


@dataclass
class FakeStream:
    id: int
    capture: list[Callable[[], None]] | None = None  # recorded work while capturing


@dataclass
class FakeGraph:
    work: list[Callable[[], None]] = field(default_factory=list)
    destroyed: bool = False


class FakeBackend(Backend):
    name = "fake"
    arch = "fake"
    warp_size = 32
    multiprocessors = 4
    device_name = "recording fake"
    quant_gemm_types = ("int8", "float8e4m3fn")  # replays any GEMM, so CI exercises both BLAS paths

    def __init__(self, compile_delay: float = 0.0):
        self.calls: list[tuple] = []
        self.compile_delay = compile_delay
        self.compiles = 0
        self._mem: dict[int, np.ndarray] = {}
        self._next = 0x1000_0000
        self._streams = 0
        self._clock = 0.0
        self.fail: Callable[[str, tuple], None] | None = None  # failure injection hook
        self.refuse_gemm_types: tuple[str, ...] = ()  # make_gemm raises for these (BLAS refusal)

    def _log(self, *entry) -> None:
        self.calls.append(entry)
        if self.fail is not None:
            self.fail(entry[0], entry)

    def calls_named(self, *names: str) -> list[tuple]:
        return [c for c in self.calls if c[0] in names]

    def capturing_any(self) -> bool:
        return getattr(self, "_capturing", 0) > 0

    def make_current(self) -> None:
        pass  # no context to bind

    # ---- memory ------------------------------------------------------------------------------
    def _new(self, nbytes: int, kind: str) -> int:
        if self.capturing_any():
            raise GpuError(f"fake: {kind} of {nbytes} bytes during stream capture (would invalidate the graph)")
        n = max(int(nbytes), 1)
        ptr = self._next
        self._next += (n + 0xFFFF) // 0x10000 * 0x10000 + 0x10000  # gaps catch overruns
        self._mem[ptr] = np.full(n, 0xFF, np.uint8)
        self._log(kind, n, ptr)
        return ptr

    def malloc(self, nbytes: int) -> int:
        return self._new(nbytes, "malloc")

    def free(self, ptr: int) -> None:
        self._log("free", ptr)
        if self._mem.pop(ptr, None) is None:
            raise GpuError(f"fake: free of unknown pointer {ptr:#x}")

    def host_alloc(self, nbytes: int) -> tuple[int, np.ndarray]:
        ptr = self._new(nbytes, "host_alloc")
        return ptr, self._mem[ptr]

    def host_free(self, ptr: int) -> None:
        self.free(ptr)

    def locate(self, addr: int, nbytes: int) -> tuple[np.ndarray, int]:
        for base, arr in self._mem.items():
            if base <= addr and addr + nbytes <= base + arr.size:
                return arr, addr - base
        raise GpuError(f"fake: {nbytes} bytes at {addr:#x} are outside every allocation")

    def view(self, addr: int, shape: Shape) -> np.ndarray:
        """A writable strided numpy view of device memory holding `shape`."""
        npd = dtypes.np_dtype(shape.type)
        nbytes = shape.element_space() * npd.itemsize
        arr, off = self.locate(addr, max(nbytes, 1))
        base = arr[off:off + max(nbytes, 1)]
        if nbytes == 0:
            return np.zeros(shape.lens, npd)
        typed = base.view(npd)
        return np.lib.stride_tricks.as_strided(typed, shape.lens, [s * npd.itemsize for s in shape.strides])

    def _submit(self, stream: FakeStream, work: Callable[[], None]) -> tuple:
        if stream.capture is not None:
            stream.capture.append(work)
        else:
            work()
        return (0,)

    def _bytes(self, addr: int, nbytes: int, host_side: bool) -> np.ndarray:
        """Fake memory, or (for the host side of a copy) real pageable host memory."""
        try:
            arr, off = self.locate(addr, nbytes)
            return arr[off:off + nbytes]
        except GpuError:
            if not host_side:
                raise
            return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(addr))

    def make_copy(self, kind: str, dst: int, src: int, nbytes: int, stream: Any) -> Step:
        def work():
            d = self._bytes(dst, nbytes, kind == "d2h")
            d[...] = self._bytes(src, nbytes, kind == "h2d")

        def step():
            self._log(kind, dst, src, nbytes)
            return self._submit(stream, work)

        return step

    # ---- streams and events ------------------------------------------------------------------
    def stream_create(self) -> Any:
        self._streams += 1
        self._log("stream_create", self._streams)
        return FakeStream(self._streams)

    def stream_sync(self, stream: Any) -> None:
        if stream.capture is not None:
            raise GpuError("fake: stream synchronize during capture")
        self._log("stream_sync", stream.id)

    def stream_destroy(self, stream: Any) -> None:
        self._log("stream_destroy", stream.id)

    def event_create(self) -> Any:
        self._log("event_create")
        return {"t": 0.0}

    def make_event_record(self, event: Any, stream: Any) -> Step:
        def work():
            self._clock += 1e-3
            event["t"] = self._clock

        def step():
            self._log("event_record")
            return self._submit(stream, work)

        return step

    def event_sync(self, event: Any) -> None:
        self._log("event_sync")

    def event_elapsed_ms(self, start: Any, stop: Any) -> float:
        return stop["t"] - start["t"]

    def event_destroy(self, event: Any) -> None:
        self._log("event_destroy")

    def synchronize(self) -> None:
        self._log("synchronize")

    # ---- compilation -------------------------------------------------------------------------
    def compiler_id(self) -> str:
        return "fakecc-1"

    def compile_flags(self) -> list[str]:
        return [f"-DMIGX_WARP_SIZE={self.warp_size}"]

    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        if self.compile_delay:
            time.sleep(self.compile_delay)
        self.compiles += 1
        if f"void {name}(" not in source or "migx.hpp" not in headers:
            raise GpuError(f"fake: kernel {name} is not defined in its source")
        return b"FAKEBIN:" + name.encode() + b":" + hashlib.sha256(source.encode()).hexdigest()[:16].encode()

    def load_module(self, binary: bytes) -> Any:
        if not binary.startswith(b"FAKEBIN:"):
            raise GpuError("fake: not a fake binary")
        self._log("load_module")
        return {"name": binary.split(b":")[1].decode()}

    def get_function(self, module: Any, name: str) -> Any:
        if module["name"] != name:
            raise GpuError(f"fake: module has no function {name}")
        return {"name": name}

    def unload_module(self, module: Any) -> None:
        self._log("unload_module")

    # ---- launches ----------------------------------------------------------------------------
    def make_launch(self, fn, grid, block, smem, stream, argblock, site=None) -> Step:
        if not isinstance(argblock, int) or grid <= 0 or block <= 0:
            raise GpuError(f"fake: bad launch of {fn['name']} (grid {grid}, block {block}, args {argblock!r})")
        work = self._emulation(site) if site is not None else (lambda: None)

        def step():
            self._log("launch", fn["name"], grid, block)
            return self._submit(stream, work)

        return step

    def _emulation(self, site: LaunchSite) -> Callable[[], None]:
        """The kernel's effect in numpy: its op's reference compute on the device buffers."""
        ins, addrs = site.ins, site.addresses
        if site.epilogue:  # a GEMM epilogue: in place on the product buffer
            buf = ins.inputs[-1]

            def epilogue():
                out = self.view(addrs[0], buf.shape)
                extras = [np.array(self.view(a, i.shape)) for a, i in zip(addrs[1:], ins.inputs[2:-1])]
                out[...] = apply_epilogue(ins.module_inputs[0], np.array(out), extras, buf.shape)

            return epilogue
        outs = output_buffers(ins)

        def kernel():
            args = [np.array(self.view(a, i.shape)) for a, i in zip(addrs, ins.inputs)]
            res = ins.op.spec.compute(ins.op, args, ins.shape, SubmoduleRunner(ins))
            results = res if isinstance(res, tuple) else (res,)
            for a, b, r in zip(addrs[len(addrs) - len(outs):], outs, results):
                self.view(a, b.shape)[...] = np.broadcast_to(np.asarray(r), b.shape.lens)

        return kernel

    # ---- BLAS --------------------------------------------------------------------------------
    def blas_create(self, stream: Any, workspace: int, workspace_bytes: int) -> Any:
        self.locate(workspace, workspace_bytes)
        self._log("blas_create", workspace_bytes)
        return {"stream": stream}

    def blas_destroy(self, handle: Any) -> None:
        self._log("blas_destroy")

    def _colmajor(self, ptr: int, rows: int, cols: int, ld: int, npd: np.dtype) -> np.ndarray:
        nbytes = ((cols - 1) * ld + rows) * npd.itemsize if rows and cols else 0
        arr, off = self.locate(ptr, max(nbytes, 1))
        typed = arr[off:off + max(nbytes, npd.itemsize)].view(npd)
        return np.lib.stride_tricks.as_strided(typed, (rows, cols), (npd.itemsize, ld * npd.itemsize))

    def make_gemm(self, handle: Any, plan: GemmPlan, a: int, b: int, c: int, alpha: float,
                  bias: int | None = None, c_in: int | None = None) -> tuple[Step, str]:
        if plan.dtype in self.refuse_gemm_types:
            raise GpuError(f"fake: BLAS refuses {plan.dtype} GEMMs")
        npd, npc = dtypes.np_dtype(plan.dtype), dtypes.np_dtype(plan.c_dtype)
        esz, esz_c = npd.itemsize, npc.itemsize
        acc_t = np.int64 if plan.c_dtype == "int32" else np.float64
        quant = plan.dtype in ("int8", "float8e4m3fn")  # like cuBLASLt here: no epilogue on 8-bit GEMMs
        fused = (not quant and plan.batch == 1 and len(plan.offsets) == 1
                 and (bias is not None or c_in is not None))

        def add_epilogue(out: np.ndarray, acc: np.ndarray) -> np.ndarray:
            """cuBLASLt's bias epilogue (one value per row of the column-major product) and C."""
            if bias is not None:
                acc = acc + self._colmajor(bias, plan.m, 1, plan.m, npc).astype(np.float64)
            if c_in is not None:
                acc = acc + self._colmajor(c_in, plan.m, plan.n, plan.ldc, npc).astype(np.float64)
            return acc

        def work():
            for oa, ob, oc in plan.offsets:
                p1, p2 = (b + ob * esz, a + oa * esz) if plan.swap else (a + oa * esz, b + ob * esz)
                for i in range(plan.batch):
                    s1 = (plan.k, plan.m) if plan.trans1 else (plan.m, plan.k)
                    s2 = (plan.n, plan.k) if plan.trans2 else (plan.k, plan.n)
                    m1 = self._colmajor(p1 + i * plan.stride1 * esz, *s1, plan.ld1, npd)
                    m2 = self._colmajor(p2 + i * plan.stride2 * esz, *s2, plan.ld2, npd)
                    out = self._colmajor(c + (oc + i * plan.stride_c) * esz_c, plan.m, plan.n, plan.ldc, npc)
                    op1 = m1.T if plan.trans1 else m1
                    op2 = m2.T if plan.trans2 else m2
                    acc = acc_t(alpha) * (op1.astype(acc_t) @ op2.astype(acc_t))
                    out[...] = (add_epilogue(out, acc) if fused else acc).astype(npc)

        def step():
            self._log("gemm", plan.describe() + (" +epilogue" if fused else ""))
            return self._submit(handle["stream"], work)

        step.fused_epilogue = fused
        return step, "+epilogue" if fused else ""

    # ---- graphs ------------------------------------------------------------------------------
    def begin_capture(self, stream: Any) -> None:
        if stream.capture is not None:
            raise GpuError("fake: stream is already capturing")
        self._log("begin_capture", stream.id)
        stream.capture = []
        self._capturing = getattr(self, "_capturing", 0) + 1

    def end_capture(self, stream: Any) -> Any:
        if stream.capture is None:
            raise GpuError("fake: end_capture on a stream that is not capturing")
        work, stream.capture = stream.capture, None
        self._capturing -= 1
        self._log("end_capture", stream.id)
        return FakeGraph(work)

    def is_capturing(self, stream: Any) -> bool:
        return stream.capture is not None

    def graph_instantiate(self, graph: Any) -> Any:
        self._log("graph_instantiate", len(graph.work))
        return FakeGraph(list(graph.work))

    def graph_upload(self, graph_exec: Any, stream: Any) -> None:
        self._log("graph_upload")

    def make_graph_launch(self, graph_exec: Any, stream: Any) -> Step:
        def work():
            if graph_exec.destroyed:
                raise GpuError("fake: launch of a destroyed graph")
            for w in graph_exec.work:
                w()

        def step():
            self._log("graph_launch", len(graph_exec.work))
            return self._submit(stream, work)

        return step

    def graph_exec_update(self, graph_exec: Any, graph: Any) -> bool:
        self._log("graph_exec_update")
        if len(graph_exec.work) != len(graph.work):
            return False
        graph_exec.work = list(graph.work)
        return True

    def graph_destroy(self, graph: Any) -> None:
        self._log("graph_destroy")
        graph.destroyed = True

    def graph_exec_destroy(self, graph_exec: Any) -> None:
        self._log("graph_exec_destroy")
        graph_exec.destroyed = True

    def graph_node_count(self, graph: Any) -> int:
        return len(graph.work)
