"""migx_explore.gpu: the GPU target (pipelines, lowering, kernels, runtimes, executor, timing).

Importing this package needs no GPU stack; runtimes (cuda-bindings, hip-python) load lazily and
say clearly what is missing when they cannot. Two entry points:

    program = gpu.lower(source)                       # the five pipelines -> the lowered Program
    compiled = gpu.compile(source)                    # lower + finalize -> CompiledProgram
    outs = compiled.run({"x": x}, mode="graph")       # or mode="eager"

`source` is a Program (left untouched) or what the ONNX importer reads (a path, bytes, a
ModelProto). Built-in example models and saved sessions are the explorer's business: it loads
them into a Program first (gpu imports nothing of the explorer).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import ops as _ops  # noqa: F401  (registers the gpu::/hip:: op specs, so backend IR parses)
from . import passes as _passes  # noqa: F401  (registers GPU_PASSES, so pipelines find them by name)

if TYPE_CHECKING:  # pragma: no cover
    from migx_explore.compiler.ir import Program
    from migx_explore.compiler.pass_infra import PassManager, Trace

    from .executor import CompiledProgram
    from .pipelines import CompileOptions
    from .runtime import Backend

__all__ = ["compile", "lower"]


def _options(options: Any) -> CompileOptions:
    from .pipelines import CompileOptions

    if options is None:
        return CompileOptions()
    if isinstance(options, Mapping):
        return CompileOptions(**options)
    return options


def _program(source: Any, input_dims: Mapping[str, Sequence[int]] | None) -> Program:
    """A fresh Program from a Program (copied), an ONNX path/bytes/ModelProto or a saved program file."""
    from migx_explore.compiler.errors import MigxError
    from migx_explore.compiler.ir import Program

    if isinstance(source, Program):
        if input_dims:
            raise MigxError("input_dims applies to an ONNX source; this Program's shapes are already fixed")
        return source.copy()
    if isinstance(source, (str, os.PathLike)) and not str(source).endswith(".onnx") and os.path.isfile(source):
        from migx_explore.compiler.serialize import load_program_file

        return load_program_file(source).program
    from migx_explore.compiler.onnx import parse_onnx

    return parse_onnx(source, input_dims=input_dims)


def _run_pipelines(program: Program, options: Any, backend: Backend, pass_manager: PassManager | None) -> Trace:
    from migx_explore.compiler.pass_infra import PassManager

    from . import kernel_cache
    from .pipelines import gpu_pipelines

    # MIGraphX validates the module after every pass in debug builds only; a compile does the same
    # and validates the result once, while the explorer's traces (the debugging view) validate
    # after every pass. MIGX_VALIDATE_PASSES=1 turns the per-pass check on here too.
    # Without the per-pass check, the snapshot after each pass trusts the modules' version
    # counters too (Snapshots.trust_versions): re-reading every instruction after every pass was
    # a tenth of a plain compile's pipeline time on yolov10n.
    validate = os.environ.get("MIGX_VALIDATE_PASSES", "") not in ("", "0")
    pm = pass_manager or PassManager(validate=validate, trust_versions=not validate)
    with kernel_cache.bound_target(backend):  # kernels compile inside compile_ops
        trace = pm.run(program, gpu_pipelines(_options(options)))
    if not pm.validate:
        _validate_result(program)
    return trace


def _validate_result(program: Program) -> None:
    from migx_explore.compiler.errors import MigxError, ValidationError

    try:
        program.validate()
    except ValidationError as e:
        raise MigxError(
            f"the compiled program is invalid: {e} (MIGX_VALIDATE_PASSES=1 names the pass that made it)"
        ) from None


def lower(
    source: Any,
    options: Any = None,
    *,
    input_dims: Mapping[str, Sequence[int]] | None = None,
    backend: Backend | None = None,
    pass_manager: PassManager | None = None,
) -> Program:
    """Run the GPU target's five pipelines on (a copy of) `source`; returns the lowered program."""
    from .runtime import get_backend

    program = _program(source, input_dims)
    _run_pipelines(program, options, backend or get_backend(), pass_manager)
    return program


def compile(
    source: Any,
    options: Any = None,
    *,
    input_dims: Mapping[str, Sequence[int]] | None = None,  # noqa: A001
    backend: Backend | None = None,
    pass_manager: PassManager | None = None,
) -> CompiledProgram:
    """Lower `source` (left untouched) and finalize it on `backend`: a runnable CompiledProgram
    that remembers its source and options, so `recompile()` can run the pipelines again."""
    from .executor import CompiledProgram
    from .runtime import get_backend

    be = backend or get_backend()
    program = _program(source, input_dims)
    trace = _run_pipelines(program, options, be, pass_manager)
    return CompiledProgram(program, be, source=source, options=options, trace=trace, lowerer=lower)


# ---- deprecated aliases (callers outside this package that predate compile/lower) -------------
def compile_program(
    source: Any,
    options: Any = None,
    *,
    backend: Backend | None = None,
    input_dims: Mapping[str, Sequence[int]] | None = None,
) -> CompiledProgram:
    """Deprecated: use `compile`."""
    return compile(source, options, backend=backend, input_dims=input_dims)


def compile_program_ir(
    source: Any,
    options: Any = None,
    *,
    input_dims=None,
    backend: Backend | None = None,
    pass_manager: PassManager | None = None,
) -> Program:
    """Deprecated: use `lower`."""
    return lower(source, options, input_dims=input_dims, backend=backend, pass_manager=pass_manager)
