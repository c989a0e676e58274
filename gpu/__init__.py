"""migx_explore.gpu: the GPU target (pipelines, lowering, kernels, runtimes, executor, timing).

Importing this package needs no GPU stack; runtimes (cuda-bindings, hip-python) load lazily and
say clearly what is missing when they cannot.

    compiled = compile_program("model.onnx")          # five pipelines + finalize
    outs = compiled.run({"x": x}, mode="graph")       # or mode="eager"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import ops as _ops  # noqa: F401  (registers the gpu::/hip:: op specs, so backend IR parses)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..compiler.ir import Program
    from ..compiler.passes import PassManager
    from .executor import CompiledProgram
    from .pipelines import CompileOptions
    from .runtime import Backend

__all__ = ["compile_program", "compile_program_ir", "compile_target", "load_program", "run_program"]


def _options(options: Any) -> CompileOptions:
    from .pipelines import CompileOptions

    if options is None:
        return CompileOptions()
    if isinstance(options, Mapping):
        return CompileOptions(**options)
    return options


def load_program(source: Any, input_dims: Mapping[str, Sequence[int]] | None = None) -> Program:
    """A fresh Program from a Program (copied), an ONNX path/bytes/ModelProto, a saved program file
    or a built-in model name (the explorer's shared loader, migx_explore.loading)."""
    from ..loading import load

    return load(source, input_dims)


def compile_program_ir(source: Any, options: Any = None, *, input_dims=None, backend: Backend | None = None,
                       pass_manager: PassManager | None = None) -> Program:
    """Run the GPU target's five pipelines on (a copy of) `source`; returns the lowered program."""
    from ..compiler.passes import PassManager
    from . import kernel_cache
    from .pipelines import gpu_pipelines
    from .runtime import get_backend

    program = load_program(source, input_dims)
    be = backend or get_backend()
    pm = pass_manager or PassManager()
    with kernel_cache.bound_target(be):
        pm.run(program, gpu_pipelines(_options(options)))
    return program


def compile_target(program: Program, options: Any = None, pass_manager: PassManager | None = None, *,
                   backend: Backend | None = None) -> CompiledProgram:
    """Compile `program` in place through the five pipelines (PassManager), then finalize it.

    Kernels compile inside compile_ops (the backend is bound while the passes run)."""
    from ..compiler.passes import PassManager
    from . import kernel_cache
    from .executor import CompiledProgram
    from .pipelines import gpu_pipelines
    from .runtime import get_backend

    be = backend or get_backend()
    pm = pass_manager or PassManager()
    with kernel_cache.bound_target(be):
        trace = pm.run(program, gpu_pipelines(_options(options)))
    compiled = CompiledProgram(program, be, options=options)
    compiled.trace = trace
    return compiled


def compile_program(program_or_onnx: Any, options: Any = None, *, backend: Backend | None = None,
                    input_dims: Mapping[str, Sequence[int]] | None = None) -> CompiledProgram:
    """Compile a Program (left untouched), an ONNX model or a built-in model name for the GPU."""
    from .executor import CompiledProgram

    be = backend
    if be is None:
        from .runtime import get_backend

        be = get_backend()
    program = compile_program_ir(program_or_onnx, options, input_dims=input_dims, backend=be)
    return CompiledProgram(program, be, source=program_or_onnx, options=options)


def run_program(program: Any, inputs: Mapping[str, Any], mode: str = "eager", options: Any = None) -> list[np.ndarray]:
    """Compile and run once (the `run --target gpu` CLI hook)."""
    compiled = compile_program(program, options)
    try:
        return compiled.run(inputs, mode=mode)
    finally:
        compiled.close()
