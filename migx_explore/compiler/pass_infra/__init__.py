"""The machinery passes run in: the `Pass` base and pipelines (base), passes by name (registry),
the instrumented pass manager (manager), textual pipeline specs (spec), the trace a run leaves
(trace), ordering constraints between passes (ordering) and MIGraphX conformance data
(conformance). The passes themselves are migx_explore/compiler/passes/ (target-independent) and
migx_explore/gpu/passes/ (backend); this package imports neither.
"""

from __future__ import annotations

from .base import (
    FunctionPass,
    NotApplicable,
    Pass,
    PassContext,
    PassEntry,
    Pipeline,
    disabled,
    pipeline,
    rewriter_of,
)
from .manager import (
    NumericConfig,
    PassFailed,
    PassManager,
    compare_outputs,
    entry_paths,
    make_numeric_config,
    restore,
    run_passes,
)
from .ordering import OrderWarning, check_order
from .registry import make_pass, pass_registry, register
from .spec import SpecError, build_pipelines, format_spec, parse_spec, spec_from_pipelines
from .trace import NumericCheck, PassRecord, Trace, write_trace

__all__ = [
    "FunctionPass",
    "NotApplicable",
    "NumericCheck",
    "NumericConfig",
    "OrderWarning",
    "Pass",
    "PassContext",
    "PassEntry",
    "PassFailed",
    "PassManager",
    "PassRecord",
    "Pipeline",
    "SpecError",
    "Trace",
    "build_pipelines",
    "check_order",
    "compare_outputs",
    "disabled",
    "entry_paths",
    "format_spec",
    "make_numeric_config",
    "make_pass",
    "parse_spec",
    "pass_registry",
    "pipeline",
    "register",
    "restore",
    "rewriter_of",
    "run_passes",
    "spec_from_pipelines",
    "write_trace",
]
