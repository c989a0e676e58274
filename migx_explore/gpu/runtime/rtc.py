"""The runtime compilers, written once: nvrtc and hiprtc have the same calls under their own
prefix (`nvrtcCreateProgram` / `hiprtcCreateProgram`, ...), so each vendor file names its module,
prefix and binary kind and `compile_program` does the rest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import GpuError


@dataclass(frozen=True)
class RuntimeCompiler:
    module: Any  # cuda.bindings.nvrtc, or hip-python's hiprtc
    prefix: str  # "nvrtc" | "hiprtc"
    suffix: str  # the source's file name extension, as the compiler logs it
    binary: str  # the compiled kind in the call names: "CUBIN" (nvrtcGetCUBIN) | "Code" (hiprtcGetCode)
    buffer: Callable[[int], Any]  # an n-byte buffer the bindings write into
    check: Callable[[Any, str], Any]  # the backend's status check: raises GpuError naming the call

    def _fn(self, call: str) -> Callable[..., Any]:
        return getattr(self.module, f"{self.prefix}{call}")

    def _checked(self, call: str, *args: Any) -> Any:
        return self.check(self._fn(call)(*args), f"{self.prefix}{call}")

    def compile_program(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        """`source` (with `headers` as include-name -> text) compiled to a loadable binary; a
        compile error raises GpuError with the compiler's log and the source."""
        prog = self._checked(
            "CreateProgram",
            source.encode(),
            f"{name}{self.suffix}".encode(),
            len(headers),
            [h.encode() for h in headers.values()],
            [n.encode() for n in headers],
        )
        try:
            opts = [f.encode() for f in flags]
            (err,) = self._fn("CompileProgram")(prog, len(opts), opts)
            if err:
                log = self.buffer(self._checked("GetProgramLogSize", prog))
                self._fn("GetProgramLog")(prog, log)
                text = bytes(log).decode(errors="replace").strip()
                raise GpuError(f"{self.prefix} failed to compile {name}:\n{text}\n--- source ---\n{source}")
            code = self.buffer(self._checked(f"Get{self.binary}Size", prog))
            self._checked(f"Get{self.binary}", prog, code)
            return bytes(code)
        finally:
            self._fn("DestroyProgram")(prog)
