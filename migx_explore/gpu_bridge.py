"""The explorer's one door into the GPU layer, so session/widgets never import GPU code eagerly.

Everything here raises `GpuUnavailable` with the runtime's own one-line reason (what to install)
when no GPU stack is present."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .compiler.errors import MigxError
from .compiler.snapshot import ProgramSnapshot


class GpuUnavailable(MigxError):
    pass


def unavailable_reason() -> str | None:
    try:
        from .gpu.runtime import unavailable_reason as reason
    except ImportError as e:
        return f"the GPU runtime layer could not be imported ({e})"
    return reason()


def _require_gpu() -> None:
    why = unavailable_reason()
    if why:
        raise GpuUnavailable(f"GPU timing unavailable: {why}")


def compile_snapshot(snap: ProgramSnapshot) -> Any:
    """Finalize a backend-lowered snapshot on the GPU (kernels load from the kernel store/cache)."""
    _require_gpu()
    program = snap.to_program()
    if not any(ins.name.startswith(("gpu::", "hip::")) for ins in program.main):
        raise MigxError("this program is not lowered for the GPU: enable the backend pipeline "
                        "(lowering ... eliminate_allocation) and trace again before timing")
    from .gpu.executor import CompiledProgram

    return CompiledProgram(program)


def time_snapshot(snap: ProgramSnapshot, modes: Sequence[str] = ("eager", "graph"), warmup: int = 10,
                  iters: int = 100, inputs: Any = None) -> Any:
    """Finalize a compiled (backend-lowered) snapshot and time it in each mode (on `inputs`, or
    random ones that respect the model)."""
    from .gpu import timing

    compiled = compile_snapshot(snap)
    try:
        return timing.time_program(compiled, modes=tuple(modes), warmup=warmup, iters=iters, inputs=inputs)
    finally:
        compiled.close()
