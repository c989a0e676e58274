"""The machinery passes run in: the `Pass` base and pipelines (base), passes by name (registry),
the pass manager (manager) and what it records around each pass (instrumentation, numerics),
textual pipeline specs (spec), the trace a run leaves (trace), ordering constraints between passes
(ordering) and MIGraphX conformance data (conformance). The passes themselves are
migx_explore/compiler/passes/ (target-independent) and migx_explore/gpu/passes/ (backend); this
package imports neither.
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
from .instrumentation import (
    MatchRecording,
    PassCheckFailed,
    PassInstrumentation,
    PassRun,
    RecordCallback,
    Snapshots,
    Timing,
    Validation,
)
from .manager import PassFailed, PassManager, entry_paths, restore, run_passes
from .numerics import NumericChecks, NumericConfig, compare_outputs, make_numeric_config
from .ordering import OrderWarning, check_order
from .registry import make_pass, pass_registry, register
from .spec import SpecError, build_pipelines, format_spec, parse_spec, spec_from_pipelines
from .trace import NumericCheck, PassRecord, Trace, write_trace

__all__ = [
    "FunctionPass",
    "MatchRecording",
    "NotApplicable",
    "NumericCheck",
    "NumericChecks",
    "NumericConfig",
    "OrderWarning",
    "Pass",
    "PassCheckFailed",
    "PassContext",
    "PassEntry",
    "PassFailed",
    "PassInstrumentation",
    "PassManager",
    "PassRecord",
    "PassRun",
    "Pipeline",
    "RecordCallback",
    "Snapshots",
    "SpecError",
    "Timing",
    "Trace",
    "Validation",
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
