"""A recording backend with the same shape as `cuda` and `hip`, for CI without a GPU.

It is the shared backend code (base.py: memory, streams, graphs, the launch path) over a driver
table of recorded bindings (`FakeDriver`), so what runs here is what runs on a device down to
the raw call. The driver keeps "device" memory as numpy byte arrays (poisoned with 0xFF, so an unwritten read shows as
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
import functools
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.errors import EvalError
from migx_explore.compiler.ref import SubmoduleRunner
from migx_explore.compiler.shape import Shape

from ..blas_epilogue import apply_activation
from ..blas_plan import GemmPlan
from ..ops import apply_epilogue, output_buffers
from .base import Backend, Blas, Driver, GpuError, Graphs, Kernels, LaunchSite, Step


@dataclass
class FakeStream:
    id: int
    capture: list[Callable[[], None]] | None = None  # recorded work while capturing


@dataclass
class FakeGraph:
    work: list[Callable[[], None]] = field(default_factory=list)
    destroyed: bool = False


OK = (0,)


class FakeDriver:
    """Recorded bindings: each raw call is logged under a short name (`calls`), answers like the
    vendor binding ((0, value) tuples) and, like a real stream, runs its work when enqueued,
    except during capture, when the work goes into the graph and runs when the graph launches."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.fail: Callable[[str, tuple], None] | None = None  # failure injection hook
        self.mem: dict[int, np.ndarray] = {}  # device memory by fake address, pinned host memory by real address
        self._next = 0x1000_0000
        self._streams = 0
        self._clock = 0.0
        self.capturing = 0
        self.copy = {kind: self.copier(kind) for kind in ("h2d", "d2h", "d2d")}

    # The Driver table's entries are this object's attributes of the same names (as a vendor
    # binding module's functions are): `capture_status` answers a bool, the launch takes no `extra`.
    capture_none = False
    launch_extra = None

    def table(self) -> Driver:
        return Driver(**{f.name: getattr(self, f.name) for f in fields(Driver)})

    def log(self, *entry) -> None:
        self.calls.append(entry)
        if self.fail is not None:
            self.fail(entry[0], entry)

    def submit(self, stream: FakeStream, work: Callable[[], None]) -> tuple:
        if stream.capture is not None:
            stream.capture.append(work)
        else:
            work()
        return OK

    # ---- memory ------------------------------------------------------------------------------
    def _refuse_in_capture(self, kind: str, nbytes: int) -> None:
        if self.capturing:
            raise GpuError(f"fake: {kind} of {nbytes} bytes during stream capture (would invalidate the graph)")

    def mem_alloc(self, nbytes: int) -> tuple:
        self._refuse_in_capture("malloc", nbytes)
        ptr = self._next
        self._next += (nbytes + 0xFFFF) // 0x10000 * 0x10000 + 0x10000  # gaps catch overruns
        self.mem[ptr] = np.full(nbytes, 0xFF, np.uint8)  # poisoned: an unwritten read shows as NaN
        self.log("malloc", nbytes, ptr)
        return (0, ptr)

    def mem_free(self, ptr: int) -> tuple:
        self.log("free", ptr)
        if self.mem.pop(ptr, None) is None:
            raise GpuError(f"fake: free of unknown pointer {ptr:#x}")
        return OK

    def host_alloc(self, nbytes: int) -> tuple:
        """Real (numpy-owned) host memory, so the shared code's view of it by address works."""
        self._refuse_in_capture("host_alloc", nbytes)
        arr = np.full(nbytes, 0xFF, np.uint8)
        self.mem[arr.ctypes.data] = arr
        self.log("host_alloc", nbytes, arr.ctypes.data)
        return (0, arr.ctypes.data)

    def host_free(self, ptr: int) -> tuple:
        self.log("host_free", ptr)
        if self.mem.pop(ptr, None) is None:
            raise GpuError(f"fake: host free of unknown pointer {ptr:#x}")
        return OK

    def locate(self, addr: int, nbytes: int) -> tuple[np.ndarray, int]:
        for base, arr in self.mem.items():
            if base <= addr and addr + nbytes <= base + arr.size:
                return arr, addr - base
        raise GpuError(f"fake: {nbytes} bytes at {addr:#x} are outside every allocation")

    def _bytes(self, addr: int, nbytes: int, host_side: bool) -> np.ndarray:
        """Fake memory, or (for the host side of a copy) real pageable host memory."""
        try:
            arr, off = self.locate(addr, nbytes)
            return arr[off : off + nbytes]
        except GpuError:
            if not host_side:
                raise
            return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(addr))

    def copier(self, kind: str) -> Callable[..., tuple]:
        def copy(dst: int, src: int, nbytes: int, stream: FakeStream) -> tuple:
            def work():
                d = self._bytes(dst, nbytes, kind == "d2h")
                d[...] = self._bytes(src, nbytes, kind == "h2d")

            self.log(kind, dst, src, nbytes)
            return self.submit(stream, work)

        copy.__name__ = f"memcpy_{kind}"
        return copy

    # ---- streams and events ------------------------------------------------------------------
    def stream_create(self) -> tuple:
        self._streams += 1
        self.log("stream_create", self._streams)
        return (0, FakeStream(self._streams))

    def stream_sync(self, stream: FakeStream) -> tuple:
        if stream.capture is not None:
            raise GpuError("fake: stream synchronize during capture")
        self.log("stream_sync", stream.id)
        return OK

    def stream_destroy(self, stream: FakeStream) -> tuple:
        self.log("stream_destroy", stream.id)
        return OK

    def event_create(self) -> tuple:
        self.log("event_create")
        return (0, {"t": 0.0})

    def event_record(self, event: dict, stream: FakeStream) -> tuple:
        def work():
            self._clock += 1e-3
            event["t"] = self._clock

        self.log("event_record")
        return self.submit(stream, work)

    def event_sync(self, event: dict) -> tuple:
        self.log("event_sync")
        return OK

    def event_elapsed(self, start: dict, stop: dict) -> tuple:
        return (0, stop["t"] - start["t"])

    def event_destroy(self, event: dict) -> tuple:
        self.log("event_destroy")
        return OK

    def device_sync(self) -> tuple:
        self.log("synchronize")
        return OK

    # ---- modules and launches ----------------------------------------------------------------
    def module_load(self, binary: bytes) -> tuple:
        if not binary.startswith(b"FAKEBIN:"):
            raise GpuError("fake: not a fake binary")
        self.log("load_module")
        return (0, {"name": binary.split(b":")[1].decode()})

    def module_function(self, module: dict, name: bytes) -> tuple:
        if module["name"] != name.decode():
            raise GpuError(f"fake: module has no function {name.decode()}")
        return (0, {"name": name.decode()})

    def module_unload(self, module: dict) -> tuple:
        self.log("unload_module")
        return OK

    def launch(
        self,
        fn: dict,
        gx: int,
        gy: int,
        gz: int,
        bx: int,
        by: int,
        bz: int,
        smem: int,
        stream: FakeStream,
        argblock: int,
        extra: Any,
        work: Callable[[], None] | None = None,
    ) -> tuple:
        """cuLaunchKernel's shape, plus the kernel's emulated effect (`work`, from FakeKernels)."""
        self.log("launch", fn["name"], gx, bx)
        return self.submit(stream, work or (lambda: None))

    # ---- capture and graphs ------------------------------------------------------------------
    def capture_begin(self, stream: FakeStream) -> tuple:
        if stream.capture is not None:
            raise GpuError("fake: stream is already capturing")
        self.log("begin_capture", stream.id)
        stream.capture = []
        self.capturing += 1
        return OK

    def capture_end(self, stream: FakeStream) -> tuple:
        if stream.capture is None:
            raise GpuError("fake: end_capture on a stream that is not capturing")
        work, stream.capture = stream.capture, None
        self.capturing -= 1
        self.log("end_capture", stream.id)
        return (0, FakeGraph(work))

    def capture_status(self, stream: FakeStream) -> tuple:
        return (0, stream.capture is not None)

    def graph_instantiate(self, graph: FakeGraph) -> tuple:
        self.log("graph_instantiate", len(graph.work))
        return (0, FakeGraph(list(graph.work)))

    def graph_upload(self, graph_exec: FakeGraph, stream: FakeStream) -> tuple:
        self.log("graph_upload")
        return OK

    def graph_launch(self, graph_exec: FakeGraph, stream: FakeStream) -> tuple:
        def work():
            if graph_exec.destroyed:
                raise GpuError("fake: launch of a destroyed graph")
            for w in graph_exec.work:
                w()

        self.log("graph_launch", len(graph_exec.work))
        return self.submit(stream, work)

    def graph_destroy(self, graph: FakeGraph) -> tuple:
        self.log("graph_destroy")
        graph.destroyed = True
        return OK

    def graph_exec_destroy(self, graph_exec: FakeGraph) -> tuple:
        self.log("graph_exec_destroy")
        graph_exec.destroyed = True
        return OK


class FakeKernels(Kernels):
    """A compiler that checks the kernel is defined and hashes the source; launches emulate the
    kernel from its LaunchSite (the op's reference compute on the strided device buffers)."""

    def __init__(self, backend: FakeBackend, compile_delay: float = 0.0):
        super().__init__(backend)
        self.compile_delay = compile_delay
        self.compiles = 0

    def compiler_id(self) -> str:
        return "fakecc-1"

    def compile_flags(self) -> list[str]:
        return [f"-DMIGX_WARP_SIZE={self.backend.warp_size}"]

    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        if self.compile_delay:
            time.sleep(self.compile_delay)
        self.compiles += 1
        if f"void {name}(" not in source or "migx.hpp" not in headers:
            raise GpuError(f"fake: kernel {name} is not defined in its source")
        # The CUDA backend launches every generated kernel as a programmatic dependent launch,
        # which is only safe if the kernel waits for its predecessor before touching memory.
        for entry in source.split("MIGX_GLOBAL ")[1:]:
            body = entry.split("{", 1)[1].lstrip() if "{" in entry else ""
            early = body.startswith("migx::kernel_entry_early();")
            if not body.startswith("migx::kernel_entry();") and not (early and "migx::kernel_wait();" in body):
                raise GpuError(
                    f"fake: a kernel of {name} does not begin with migx::kernel_entry() "
                    "(or with kernel_entry_early() and call kernel_wait() before it reads what others write)"
                )
        return b"FAKEBIN:" + name.encode() + b":" + hashlib.sha256(source.encode()).hexdigest()[:16].encode()

    def make_launch(self, fn, grid, block, smem, stream, argblock, site=None, *, overlap: bool = True) -> Step:
        if not isinstance(argblock, int) or grid <= 0 or block <= 0:
            raise GpuError(f"fake: bad launch of {fn['name']} (grid {grid}, block {block}, args {argblock!r})")
        step = super().make_launch(fn, grid, block, smem, stream, argblock, site)
        if site is None:
            return step
        return functools.partial(step, work=self._emulation(site))

    def view(self, addr: int, shape: Shape) -> np.ndarray:
        return self.backend.view(addr, shape)

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
            try:
                res = ins.op.spec.compute(ins.op, args, ins.shape, SubmoduleRunner(ins))
            except EvalError as e:  # name the kernel, as the reference evaluator names the instruction
                if str(e).startswith("module "):
                    raise
                what = ins.op.attrs.get("symbol_name") or ins.name
                raise EvalError(f"module {ins.module.name}: {ins.name} (#{ins.id}, kernel {what}): {e}") from None
            results = res if isinstance(res, tuple) else (res,)
            for a, b, r in zip(addrs[len(addrs) - len(outs) :], outs, results):
                self.view(a, b.shape)[...] = np.broadcast_to(np.asarray(r), b.shape.lens)

        return kernel


class FakeBlas(Blas):
    """GEMMs replayed literally: the column-major BLAS call on the fake device memory."""

    def create(self, stream: Any, workspace: int, workspace_bytes: int) -> Any:
        self.backend.recorder.locate(workspace, workspace_bytes)
        self.backend.recorder.log("blas_create", workspace_bytes)
        return {"stream": stream}

    def destroy(self, handle: Any) -> None:
        self.backend.recorder.log("blas_destroy")

    def _colmajor(self, ptr: int, rows: int, cols: int, ld: int, npd: np.dtype) -> np.ndarray:
        nbytes = ((cols - 1) * ld + rows) * npd.itemsize if rows and cols else 0
        arr, off = self.backend.recorder.locate(ptr, max(nbytes, 1))
        typed = arr[off : off + max(nbytes, npd.itemsize)].view(npd)
        return np.lib.stride_tricks.as_strided(typed, (rows, cols), (npd.itemsize, ld * npd.itemsize))

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
        if plan.dtype in self.backend.refuse_gemm_types:
            raise GpuError(f"fake: BLAS refuses {plan.dtype} GEMMs")
        npd, npc = dtypes.np_dtype(plan.dtype), dtypes.np_dtype(plan.c_dtype)
        esz, esz_c = npd.itemsize, npc.itemsize
        acc_t = np.int64 if plan.c_dtype == "int32" else np.float64
        quant = plan.dtype in ("int8", "float8e4m3fn")  # like cuBLASLt here: no epilogue on 8-bit GEMMs
        fused = (
            not quant and plan.batch == 1 and len(plan.offsets) == 1 and (bias is not None or c_in is not None or act)
        )

        def add_epilogue(out: np.ndarray, acc: np.ndarray) -> np.ndarray:
            """cuBLASLt's bias epilogue (one value per row of the column-major product), C, then
            its ReLU / GELU (tanh form) epilogue."""
            if bias is not None:
                acc = acc + self._colmajor(bias, plan.m, 1, plan.m, npc).astype(np.float64)
            if c_in is not None:
                acc = acc + self._colmajor(c_in, plan.m, plan.n, plan.ldc, npc).astype(np.float64)
            if act:
                try:
                    acc = apply_activation(act, acc)
                except ValueError as e:
                    raise GpuError(f"fake: {e}") from None
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
            self.backend.recorder.log("gemm", plan.describe() + (" +epilogue" if fused else ""))
            return self.backend.recorder.submit(handle["stream"], work)

        step.fused_epilogue = fused
        return step, "+epilogue" if fused else ""


class FakeGraphs(Graphs):
    def exec_update(self, graph_exec: Any, graph: Any) -> bool:
        self.backend.recorder.log("graph_exec_update")
        if len(graph_exec.work) != len(graph.work):
            return False
        graph_exec.work = list(graph.work)
        return True

    def node_count(self, graph: Any) -> int:
        return len(graph.work)


class FakeBackend(Backend):
    name = "fake"
    arch = "fake"
    warp_size = 32
    multiprocessors = 4
    device_name = "recording fake"
    quant_gemm_types = ("int8", "float8e4m3fn")  # replays any GEMM, so CI exercises both BLAS paths

    def __init__(self, compile_delay: float = 0.0, kernels: type[FakeKernels] = FakeKernels):
        """`kernels`: a FakeKernels subclass (tests that record what is compiled)."""
        self.recorder = FakeDriver()
        self.calls = self.recorder.calls  # the recorded calls, for tests: (name, *arguments)
        self.refuse_gemm_types: tuple[str, ...] = ()  # make_gemm raises for these (BLAS refusal)
        self.compose(self.recorder.table(), kernels(self, compile_delay), FakeBlas(self), FakeGraphs(self))

    @property
    def fail(self) -> Callable[[str, tuple], None] | None:
        """A hook called with (name, entry) on every recorded call; raise in it to inject a failure."""
        return self.recorder.fail

    @fail.setter
    def fail(self, hook: Callable[[str, tuple], None] | None) -> None:
        self.recorder.fail = hook

    def calls_named(self, *names: str) -> list[tuple]:
        return [c for c in self.calls if c[0] in names]

    def capturing_any(self) -> bool:
        return self.recorder.capturing > 0

    def allocations(self) -> dict[int, np.ndarray]:
        """Device and pinned host memory still allocated, by address."""
        return self.recorder.mem

    def view(self, addr: int, shape: Shape) -> np.ndarray:
        """A writable strided numpy view of device memory holding `shape`."""
        npd = dtypes.np_dtype(shape.type)
        nbytes = shape.element_space() * npd.itemsize
        arr, off = self.recorder.locate(addr, max(nbytes, 1))
        base = arr[off : off + max(nbytes, 1)]
        if nbytes == 0:
            return np.zeros(shape.lens, npd)
        typed = base.view(npd)
        return np.lib.stride_tricks.as_strided(typed, shape.lens, [s * npd.itemsize for s in shape.strides])
