"""The runtime compilers, written once: nvrtc and hiprtc have the same calls under their own
prefix (`nvrtcCreateProgram` / `hiprtcCreateProgram`, ...), so each vendor file names its module,
prefix and binary kind and `rtc_worker.compile_with` does the rest (in this process, or in a
worker process of rtc_pool)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import GpuError
from .rtc_worker import CompileFailed, compile_with


@dataclass(frozen=True)
class RuntimeCompiler:
    module: Any  # cuda.bindings.nvrtc, or hip-python's hiprtc
    prefix: str  # "nvrtc" | "hiprtc"
    suffix: str  # the source's file name extension, as the compiler logs it
    binary: str  # the compiled kind in the call names: "CUBIN" (nvrtcGetCUBIN) | "Code" (hiprtcGetCode)
    buffer: Callable[[int], Any]  # an n-byte buffer the bindings write into
    check: Callable[[Any, str], Any]  # the backend's status check: raises GpuError naming the call

    def compile_program(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        """`source` (with `headers` as include-name -> text) compiled to a loadable binary; a
        compile error raises GpuError with the compiler's log and the source."""
        try:
            parts = (self.module, self.prefix, self.suffix, self.binary, self.buffer, self.check)
            return compile_with(*parts, name, source, headers, flags)
        except CompileFailed as e:
            raise GpuError(str(e)) from None
