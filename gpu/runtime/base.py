"""The shape every runtime backend has (tinygrad-style: one file per vendor, same parts).

All device addresses are plain ints. Streams, events, modules, functions and graphs are opaque
handles of the vendor binding. `make_launch` / `make_gemm` / `make_copy` return zero-argument
callables for the executor's step list; each returns its status (falsy on success), bare or as the
first item of a tuple (`step_status`), so the eager loop checks errors without any argument packing
per launch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from migx_explore.compiler.errors import MigxError

from ..blas_plan import GemmPlan

if TYPE_CHECKING:  # pragma: no cover
    from migx_explore.compiler.ir import Instruction

Step = Callable[[], Any]


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


class Backend(ABC):
    name: str = "base"
    arch: str = ""
    warp_size: int = 32
    multiprocessors: int = 1
    device_name: str = ""

    @abstractmethod
    def make_current(self) -> None:
        """Bind the device to the calling thread before work is enqueued (the CUDA driver API
        needs a current context; HIP and the fake have none to bind)."""

    # ---- memory ------------------------------------------------------------------------------
    @abstractmethod
    def malloc(self, nbytes: int) -> int: ...

    @abstractmethod
    def free(self, ptr: int) -> None: ...

    @abstractmethod
    def host_alloc(self, nbytes: int) -> tuple[int, np.ndarray]:
        """Page-locked host memory (capturable copies): (address, uint8 numpy view)."""

    @abstractmethod
    def host_free(self, ptr: int) -> None: ...

    @abstractmethod
    def make_copy(self, kind: str, dst: int, src: int, nbytes: int, stream: Any) -> Step:
        """kind: 'h2d', 'd2h' or 'd2d' (async on `stream`)."""

    def copy(self, kind: str, dst: int, src: int, nbytes: int, stream: Any) -> None:
        self.check(self.make_copy(kind, dst, src, nbytes, stream)(), f"memcpy {kind}")

    # ---- streams and events ------------------------------------------------------------------
    @abstractmethod
    def stream_create(self) -> Any: ...

    @abstractmethod
    def stream_sync(self, stream: Any) -> None: ...

    @abstractmethod
    def stream_destroy(self, stream: Any) -> None: ...

    @abstractmethod
    def event_create(self) -> Any: ...

    @abstractmethod
    def make_event_record(self, event: Any, stream: Any) -> Step: ...

    @abstractmethod
    def event_sync(self, event: Any) -> None: ...

    @abstractmethod
    def event_elapsed_ms(self, start: Any, stop: Any) -> float: ...

    @abstractmethod
    def event_destroy(self, event: Any) -> None: ...

    @abstractmethod
    def synchronize(self) -> None: ...

    # ---- compilation -------------------------------------------------------------------------
    @abstractmethod
    def compiler_id(self) -> str:
        """Compiler name and version (part of the kernel cache key)."""

    @abstractmethod
    def compile_flags(self) -> list[str]: ...

    @abstractmethod
    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes: ...

    @abstractmethod
    def load_module(self, binary: bytes) -> Any: ...

    @abstractmethod
    def get_function(self, module: Any, name: str) -> Any: ...

    @abstractmethod
    def unload_module(self, module: Any) -> None: ...

    # ---- launches ----------------------------------------------------------------------------
    @abstractmethod
    def make_launch(self, fn: Any, grid: int, block: int, smem: int, stream: Any, argblock: int,
                    site: LaunchSite | None = None) -> Step:
        """A launch of `fn` with a pre-packed `void*[]` at address `argblock`; `site` says what it
        computes (used only by backends that emulate kernels)."""

    # ---- BLAS --------------------------------------------------------------------------------
    @abstractmethod
    def blas_create(self, stream: Any, workspace: int, workspace_bytes: int) -> Any:
        """A BLAS handle bound to `stream`, with its workspace set (set before any capture)."""

    @abstractmethod
    def blas_destroy(self, handle: Any) -> None: ...

    @abstractmethod
    def make_gemm(self, handle: Any, plan: GemmPlan, a: int, b: int, c: int, alpha: float,
                  bias: int | None = None, c_in: int | None = None) -> tuple[Step, str]:
        """The BLAS calls of `plan` for device addresses a, b, c (element offsets in the plan), and
        a note naming the path or algorithm chosen ('' when there is nothing to say).

        `bias` (a vector per output column) and `c_in` (added with beta = 1) are optional: a
        backend that adds them sets `fused_epilogue = True` on the step; one that cannot
        ignores them, and the caller runs the epilogue kernel instead. Raises GpuError when the
        library refuses an 8-bit plan (the executor then launches a generated kernel instead)."""

    # 8-bit operand types this target's BLAS has GEMMs for (lowering widens the rest of quant_dot
    # to float16 GEMMs, or sends them to the generated tiled kernel).
    quant_gemm_types: tuple[str, ...] = ("int8",)

    # ---- graphs ------------------------------------------------------------------------------
    @abstractmethod
    def begin_capture(self, stream: Any) -> None: ...

    @abstractmethod
    def end_capture(self, stream: Any) -> Any:
        """End capture and return the graph; raises GpuError if the capture was invalidated
        (the stream is out of capture mode either way)."""

    @abstractmethod
    def is_capturing(self, stream: Any) -> bool: ...

    @abstractmethod
    def graph_instantiate(self, graph: Any) -> Any: ...

    @abstractmethod
    def graph_upload(self, graph_exec: Any, stream: Any) -> None:
        """Upload an instantiated graph ahead of its first launch (keeps that cost out of timings)."""

    @abstractmethod
    def make_graph_launch(self, graph_exec: Any, stream: Any) -> Step: ...

    @abstractmethod
    def graph_node_count(self, graph: Any) -> int:
        """Nodes of a captured graph, or -1 where the binding cannot count them."""

    @abstractmethod
    def graph_exec_update(self, graph_exec: Any, graph: Any) -> bool:
        """Update an instantiated graph in place from a new graph of the same topology."""

    @abstractmethod
    def graph_destroy(self, graph: Any) -> None: ...

    @abstractmethod
    def graph_exec_destroy(self, graph_exec: Any) -> None: ...

    # ---- helpers -----------------------------------------------------------------------------
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


ELEMENT_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
