"""The explorer's one door into the GPU layer, so session/widgets never import GPU code eagerly:
compiling and timing a snapshot, and a session's final program (its timings kept in
`session.timings` by configuration identity).

Everything here raises `GpuUnavailable` with the runtime's own one-line reason (what to install)
when no GPU stack is present."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.snapshot import ProgramSnapshot

from .errors import GpuUnavailable  # noqa: E402,F401  (defined beside the other explorer errors; re-exported)

if TYPE_CHECKING:
    from .session import Session

Progress = Callable[[int, int, str], None]


def _readable(text: str) -> str:
    # Vendor bindings put bytes reprs into their messages ("dlopen 'b'libamdhip64.so''"); a user
    # reading the reason wants the library name.
    return re.sub(r"""'?b(['"])(.*?)\1'?""", r"\2", text)


def unavailable_reason() -> str | None:
    try:
        from migx_explore.gpu.runtime import unavailable_reason as reason
    except ImportError as e:
        return f"the GPU runtime layer could not be imported ({e})"
    why = reason()
    return None if why is None else _readable(why)


def _require_gpu() -> None:
    why = unavailable_reason()
    if why:
        raise GpuUnavailable(f"GPU timing unavailable: {why}")


def compile_snapshot(snap: ProgramSnapshot) -> Any:
    """Finalize a backend-lowered snapshot on the GPU (kernels load from the kernel store/cache)."""
    _require_gpu()
    program = snap.to_program()
    if not any(ins.name.startswith(("gpu::", "hip::")) for ins in program.main):
        raise MigxError(
            "this program is not lowered for the GPU: enable the backend pipeline "
            "(lowering ... eliminate_allocation) and trace again before timing"
        )
    from migx_explore.gpu.executor import CompiledProgram

    return CompiledProgram(program)


def compile_kernels(snap: ProgramSnapshot, progress: Progress | None = None) -> int:
    """Compile a lowered snapshot's kernels into the kernel cache (which finalize then hits), side
    by side, reporting each as it finishes; returns how many there were."""
    _require_gpu()
    from migx_explore.gpu import kernel_cache
    from migx_explore.gpu.runtime import get_backend

    keys = sorted(kernel_cache.kernel_keys(snap.to_program()))
    if progress:
        progress(0, len(keys), f"compiling {len(keys)} kernels (cached ones are loaded)")

    def compiled(done: int, to_compile: int, key: str) -> None:
        if progress:  # the cached ones count as done from the start
            progress(len(keys) - to_compile + done, len(keys), f"compiled kernel {key[:40]}")

    sources = [kernel_cache.source_for(key) for key in keys]
    kernel_cache.compile_many(get_backend().kernels, sources, on_compiled=compiled)
    if progress:
        progress(len(keys), len(keys), "kernels compiled")
    return len(keys)


def time_snapshot(
    snap: ProgramSnapshot,
    modes: Sequence[str] = ("eager", "graph"),
    warmup: int = 10,
    iters: int = 100,
    inputs: Any = None,
    progress: Progress | None = None,
) -> Any:
    """Finalize a compiled (backend-lowered) snapshot and time it in each mode (on `inputs`, or
    random ones that respect the model; one mode at a time when `progress` is given, so the
    caller sees each start)."""
    import dataclasses

    from migx_explore.gpu import timing

    compiled = compile_snapshot(snap)
    try:
        if progress is None:
            return timing.time_program(compiled, modes=tuple(modes), warmup=warmup, iters=iters, inputs=inputs)
        merged = None
        for k, mode in enumerate(modes):
            progress(k, len(modes), f"timing {mode}: {warmup} warm-up + {iters} runs")
            r = timing.time_program(compiled, modes=(mode,), warmup=warmup, iters=iters, inputs=inputs)
            merged = (
                r
                if merged is None
                else dataclasses.replace(
                    merged, modes={**merged.modes, **r.modes}, graph_nodes=max(merged.graph_nodes, r.graph_nodes)
                )
            )
        progress(len(modes), len(modes), "timed")
        return merged
    finally:
        compiled.close()


# ---- a session's final program -----------------------------------------------------------------------
@dataclass
class TimingRun:
    """One GPU timing of one configuration: its readable label (the spec, or 'custom pipeline')
    and the result. session.timings keys these by configuration identity, not by the label."""

    label: str
    result: Any


def compile_session_kernels(session: Session, progress: Progress | None = None) -> int:
    """Compile the session's final program's kernels (one at a time, reporting progress) into the
    kernel cache that timing then hits; returns how many there were."""
    return compile_kernels(session.final(), progress)


def time_session(
    session: Session,
    modes: Sequence[str] = ("eager", "graph"),
    warmup: int = 10,
    iters: int = 100,
    progress: Progress | None = None,
) -> Any:
    """Compile the session's final program for the GPU and time it in each mode; the result is
    kept in session.timings under this configuration's identity (see session_timing)."""
    result = time_snapshot(session.final(), modes=modes, warmup=warmup, iters=iters, progress=progress)
    session.timings[session.config.identity()] = TimingRun(session.config.label(), result)
    return result


def session_timing(session: Session) -> Any:
    """The last timing result of the session's current configuration (None if it was not timed)."""
    run = session.timings.get(session.config.identity())
    return None if run is None else run.result


# ---- results recorded on a real GPU (shown where there is none) ------------------------------------
RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class RecordedModel:
    """One model's timings from a recorded GPU run (benchmarks/gpu_vs_torch.py's JSON)."""

    model: str
    eager_us: float
    graph_us: float
    launches: int
    kernels: int
    blas_calls: int
    torch_eager_us: float | None
    torch_graph_us: float | None


@dataclass(frozen=True)
class RecordedRun:
    device: str
    date: str
    source: str  # file name, for the label
    models: dict[str, RecordedModel]


def recorded_results(path: Path | None = None) -> RecordedRun | None:
    """The GPU results recorded with the package (device, date and per-model timings), or None."""
    path = path or RESULTS_DIR / "gpu_vs_torch_h200.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    models = {}
    for name, m in data.get("models", {}).items():
        ours, torch = m.get("ours") or {}, m.get("torch") or {}
        if "eager_us" not in ours:
            continue
        models[name] = RecordedModel(
            name,
            ours["eager_us"],
            ours.get("graph_us", float("nan")),
            ours.get("launches", 0),
            ours.get("kernels", 0),
            ours.get("blas_calls", 0),
            torch.get("eager_us"),
            torch.get("graph_us"),
        )
    return RecordedRun(data.get("device", "unknown GPU"), data.get("date", "date not recorded"), path.name, models)
