"""The shape every runtime backend has: a table of raw driver calls and five narrow parts.

A backend (tinygrad-style: one file per vendor, same parts) is composed of
  - `Driver`: the vendor's raw calls (cuMemAlloc / hipMalloc ...), a table with no logic;
  - `Memory` (allocator and copies), `Streams` (streams, events), `Graphs` (capture and replay),
    whose logic is shared here and runs over the driver table;
  - `Kernels` (program loader: compile, load, launch) and `Blas` (GEMMs), the parts that differ in
    more than names, with the only abstract methods (8 in all: compile_flags, compile_source,
    compiler_id; create, destroy, make_gemm; exec_update, node_count).
The recording fake fills the same driver table with recorded bindings, so the code above the
table runs unchanged on CI.

All device addresses are plain ints. Streams, events, modules, functions and graphs are opaque
handles of the vendor binding. `make_launch` / `make_gemm` / `make_copy` return zero-argument
callables for the executor's step list; each returns its status (falsy on success), bare or as the
first item of a tuple (`step_status`), so the eager loop checks errors without any argument packing
per launch.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from migx_explore.compiler.errors import MigxError

if TYPE_CHECKING:  # pragma: no cover
    from migx_explore.compiler.ir import Instruction

    from ..blas_plan import GemmPlan

Step = Callable[[], Any]
Call = Callable[..., Any]


def step_status(result: Any) -> Any:
    """A step's status (falsy on success): steps return it bare (a ctypes call's int) or as the first
    item of a tuple (the vendor bindings' return convention)."""
    return result[0] if isinstance(result, tuple) else result


@dataclass(frozen=True)
class LaunchSite:
    """What a kernel launch computes: the instruction and the device address of each kernel
    argument (its inputs in order; for a GEMM epilogue, `epilogue` is set and the arguments are the
    product buffer, then the epilogue's extra inputs). Real backends run the compiled kernel and
    ignore it; the fake backend emulates the kernel from it."""

    ins: Instruction
    addresses: tuple[int, ...]
    epilogue: bool = False


class GpuError(MigxError):
    """A GPU runtime call failed; the message names the call and the vendor's error."""


def named(name: str, fn: Call) -> Call:
    """`fn` under the vendor call's name, for error messages (a lambda that fixes a trailing
    argument, e.g. a capture mode, would otherwise be reported as '<lambda>')."""
    fn.__name__ = name
    return fn


def call_name(fn: Call) -> str:
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", None) or repr(fn)


@dataclass
class Driver:
    """The raw calls of one vendor binding, each returning the binding's tuple (error first).

    Entries are the bindings themselves (or a lambda fixing an argument the two vendors order
    differently), never logic: that lives in the parts below, shared by every backend."""

    mem_alloc: Call  # (nbytes) -> (err, ptr)
    mem_free: Call  # (ptr)
    host_alloc: Call  # (nbytes) -> (err, ptr): page-locked
    host_free: Call  # (ptr)
    copy: dict[str, Call]  # kind 'h2d' | 'd2h' | 'd2d' -> (dst, src, nbytes, stream), async
    stream_create: Call  # () -> (err, stream): non-blocking
    stream_sync: Call  # (stream)
    stream_destroy: Call  # (stream)
    event_create: Call  # () -> (err, event)
    event_record: Call  # (event, stream)
    event_sync: Call  # (event)
    event_elapsed: Call  # (start, stop) -> (err, ms)
    event_destroy: Call  # (event)
    device_sync: Call  # ()
    module_load: Call  # (binary) -> (err, module)
    module_function: Call  # (module, name bytes) -> (err, function)
    module_unload: Call  # (module)
    launch: Call  # (fn, gx, gy, gz, bx, by, bz, smem, stream, argblock, extra)
    capture_begin: Call  # (stream): thread-local capture mode
    capture_end: Call  # (stream) -> (err, graph)
    capture_status: Call  # (stream) -> (err, status)
    graph_instantiate: Call  # (graph) -> (err, graph_exec)
    graph_launch: Call  # (graph_exec, stream)
    graph_destroy: Call  # (graph)
    graph_exec_destroy: Call  # (graph_exec)
    graph_upload: Call | None = None  # (graph_exec, stream); None where the binding has none
    capture_none: Any = 0  # capture_status's "not capturing" value
    launch_extra: Any = 0  # the launch's last argument (CUDA wants 0, hip-python None)


class Part:
    """One narrow part of a backend: the backend (name, error check) and its driver table."""

    def __init__(self, backend: Backend):
        self.backend = backend

    @property
    def drv(self) -> Driver:
        return self.backend.driver

    def call(self, fn: Call, *args: Any, what: str | None = None) -> Any:
        """Run a raw driver call and return its value; GpuError naming the call on failure."""
        return self.backend.check(fn(*args), what or call_name(fn))


class Memory(Part):
    """Device and page-locked host memory, and copies between them."""

    def malloc(self, nbytes: int) -> int:
        return int(
            self.call(self.drv.mem_alloc, max(int(nbytes), 1), what=f"{call_name(self.drv.mem_alloc)}({nbytes})")
        )

    def free(self, ptr: int) -> None:
        self.call(self.drv.mem_free, ptr)

    def host_alloc(self, nbytes: int) -> tuple[int, np.ndarray]:
        """Page-locked host memory (capturable copies): (address, uint8 numpy view)."""
        n = max(int(nbytes), 1)
        ptr = int(self.call(self.drv.host_alloc, n, what=f"{call_name(self.drv.host_alloc)}({n})"))
        return ptr, np.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=np.uint8)

    def host_free(self, ptr: int) -> None:
        self.call(self.drv.host_free, ptr)

    def make_copy(self, kind: str, dst: int, src: int, nbytes: int, stream: Any) -> Step:
        """kind: 'h2d', 'd2h' or 'd2d' (async on `stream`)."""
        return functools.partial(self.drv.copy[kind], dst, src, nbytes, stream)

    def copy(self, kind: str, dst: int, src: int, nbytes: int, stream: Any) -> None:
        self.backend.check(self.make_copy(kind, dst, src, nbytes, stream)(), f"memcpy {kind}")


class Streams(Part):
    """Streams, events (timing) and whole-device synchronisation."""

    def create(self) -> Any:
        return self.call(self.drv.stream_create)

    def sync(self, stream: Any) -> None:
        self.call(self.drv.stream_sync, stream)

    def destroy(self, stream: Any) -> None:
        self.call(self.drv.stream_destroy, stream)

    def event_create(self) -> Any:
        return self.call(self.drv.event_create)

    def make_event_record(self, event: Any, stream: Any) -> Step:
        return functools.partial(self.drv.event_record, event, stream)

    def event_sync(self, event: Any) -> None:
        self.call(self.drv.event_sync, event)

    def event_elapsed_ms(self, start: Any, stop: Any) -> float:
        return float(self.call(self.drv.event_elapsed, start, stop))

    def event_destroy(self, event: Any) -> None:
        self.call(self.drv.event_destroy, event)

    def synchronize(self) -> None:
        self.call(self.drv.device_sync)


class Kernels(Part, ABC):
    """The program loader: compile kernel source, load the binary, launch its functions.
    Also what kernel_cache calls the compiler (arch, compiler_id, compile_flags, compile_source)."""

    @property
    def arch(self) -> str:
        return self.backend.arch

    @abstractmethod
    def compiler_id(self) -> str:
        """Compiler name and version (part of the kernel cache key)."""

    @abstractmethod
    def compile_flags(self) -> list[str]: ...

    @abstractmethod
    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes: ...

    def load_module(self, binary: bytes) -> Any:
        return self.call(self.drv.module_load, binary)

    def get_function(self, module: Any, name: str) -> Any:
        fn = self.drv.module_function
        return self.call(fn, module, name.encode(), what=f"{call_name(fn)}({name})")

    def unload_module(self, module: Any) -> None:
        self.call(self.drv.module_unload, module)

    def make_launch(
        self,
        fn: Any,
        grid: int,
        block: int,
        smem: int,
        stream: Any,
        argblock: int,
        site: LaunchSite | None = None,
        *,
        overlap: bool = True,
    ) -> Step:
        """A launch of `fn` with a pre-packed `void*[]` at address `argblock` (no per-launch
        argument packing by the binding); `site` says what it computes (used only by the fake,
        which emulates kernels). `overlap`: the kernel may start while the previous step finishes,
        where the backend can (CUDA's dependent launch); False where that would cost more than it
        gives. Measured on an H100: the binding call costs ~6.3 us of host time per launch;
        libcuda's cuLaunchKernel through ctypes with pre-built arguments cost ~8.6 us."""
        return functools.partial(
            self.drv.launch, fn, grid, 1, 1, block, 1, 1, smem, stream, argblock, self.drv.launch_extra
        )


class Blas(Part, ABC):
    """GEMMs through the vendor BLAS."""

    def preload(self) -> None:
        """Start loading the BLAS libraries in the background, where the backend loads them
        lazily (a compile calls this as it starts, so the load overlaps the passes)."""

    @abstractmethod
    def create(self, stream: Any, workspace: int, workspace_bytes: int) -> Any:
        """A BLAS handle bound to `stream`, with its workspace set (set before any capture)."""

    @abstractmethod
    def destroy(self, handle: Any) -> None: ...

    @abstractmethod
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
        """The BLAS calls of `plan` for device addresses a, b, c (element offsets in the plan), and
        a note naming the path or algorithm chosen ('' when there is nothing to say).

        `bias` (a vector per output column), `c_in` (added with beta = 1) and `act` (an
        activation of the sum, blas_epilogue.ACTIVATIONS) are optional: a backend that does
        them all sets `fused_epilogue = True` on the step; one that cannot ignores them, and the
        caller runs the epilogue kernel instead. `tune` False: the library's first choice, no
        algorithm timed (compile mode eager's skip_benchmark). Raises GpuError when the
        library refuses an 8-bit plan (the executor then launches a generated kernel instead)."""


class Graphs(Part, ABC):
    """Stream capture into a graph, and replay of the instantiated graph."""

    def begin_capture(self, stream: Any) -> None:
        self.call(self.drv.capture_begin, stream)

    def end_capture(self, stream: Any) -> Any:
        """End capture and return the graph; raises GpuError if the capture was invalidated
        (the stream is out of capture mode either way)."""
        err, graph = self.drv.capture_end(stream)
        if err:
            raise GpuError(f"{self.backend.name}: stream capture failed: {self.backend.error_string(err)}")
        return graph

    def capture(self, stream: Any, enqueue: Callable[[], Any]) -> Any:
        """The graph of what `enqueue` puts on `stream` under capture. If it raises, the capture
        is ended and its partial graph destroyed before the error goes on: an open capture would
        break the stream for everything after it."""
        self.begin_capture(stream)
        try:
            enqueue()
        except BaseException:
            with contextlib.suppress(GpuError):  # an invalidated capture still leaves capture mode
                self.destroy(self.end_capture(stream))
            raise
        return self.end_capture(stream)

    def is_capturing(self, stream: Any) -> bool:
        return self.call(self.drv.capture_status, stream) != self.drv.capture_none

    def instantiate(self, graph: Any) -> Any:
        return self.call(self.drv.graph_instantiate, graph)

    def upload(self, graph_exec: Any, stream: Any) -> None:
        """Upload an instantiated graph ahead of its first launch (keeps that cost out of timings)."""
        if self.drv.graph_upload is not None:
            self.call(self.drv.graph_upload, graph_exec, stream)

    def make_launch(self, graph_exec: Any, stream: Any) -> Step:
        return functools.partial(self.drv.graph_launch, graph_exec, stream)

    def destroy(self, graph: Any) -> None:
        self.call(self.drv.graph_destroy, graph)

    def exec_destroy(self, graph_exec: Any) -> None:
        self.call(self.drv.graph_exec_destroy, graph_exec)

    @abstractmethod
    def exec_update(self, graph_exec: Any, graph: Any) -> bool:
        """Update an instantiated graph in place from a new graph of the same topology."""

    @abstractmethod
    def node_count(self, graph: Any) -> int:
        """Nodes of a captured graph, or -1 where the binding cannot count them."""


class Backend:
    """A device: its description, its driver table and the parts composed over it. A vendor
    subclass sets `driver` and builds its `kernels`, `blas` and `graphs` parts in __init__."""

    name: str = "base"
    arch: str = ""
    warp_size: int = 32
    multiprocessors: int = 1
    device_name: str = ""
    # 8-bit operand types this target's BLAS has GEMMs for (lowering widens the rest of quant_dot
    # to float16 GEMMs, or sends them to the generated tiled kernel).
    quant_gemm_types: tuple[str, ...] = ("int8",)

    driver: Driver
    memory: Memory
    streams: Streams
    kernels: Kernels
    blas: Blas
    graphs: Graphs

    def compose(self, driver: Driver, kernels: Kernels, blas: Blas, graphs: Graphs) -> None:
        """Attach the driver table and the parts (memory and streams need nothing vendor-specific)."""
        self.driver = driver
        self.memory, self.streams = Memory(self), Streams(self)
        self.kernels, self.blas, self.graphs = kernels, blas, graphs

    def make_current(self) -> None:
        """Bind the device to the calling thread before work is enqueued (the CUDA driver API
        needs a current context; HIP and the fake have none to bind)."""

    def check(self, result: Any, what: str) -> Any:
        """Raise GpuError unless `result` (a binding's return tuple) starts with success."""
        err = result[0] if isinstance(result, tuple) else result
        if err:
            raise GpuError(f"{self.name}: {what} failed: {self.error_string(err)}")
        if isinstance(result, tuple):
            return result[1] if len(result) == 2 else result[1:]
        return None

    def error_string(self, err: Any) -> str:
        return str(err)

    def describe(self) -> str:
        return f"{self.name} {self.device_name or ''} ({self.arch}, warp {self.warp_size})".replace("  ", " ")
