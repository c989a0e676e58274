"""Passes, pipelines and the instrumented pass manager.

Importing this package registers every target-independent pass (one module per pass, named after
it; composites hold their steps); `make_pass(name, **options)` builds one by name.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import (
    FunctionPass,
    Pass,
    PassContext,
    PassEntry,
    Pipeline,
    disabled,
    make_pass,
    pass_registry,
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
from .rule_pass import RewritePass, as_pass
from .rules import OrderWarning, check_order
from .spec import SpecError, build_pipelines, format_spec, parse_spec, spec_from_pipelines
from .trace import NumericCheck, PassRecord, Trace, write_trace

_INFRA = {"base", "fusion_helpers", "manager", "rule_helpers", "rules", "spec", "trace"}


def _load_pass_modules() -> None:
    # Every other module in this package defines passes; importing registers them.
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _INFRA and not info.name.startswith("_") and not info.name.startswith("test"):
            importlib.import_module(f"{__name__}.{info.name}")


_load_pass_modules()

__all__ = [
    "FunctionPass",
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
    "RewritePass",
    "SpecError",
    "Trace",
    "as_pass",
    "build_pipelines",
    "check_order",
    "compare_outputs",
    "disabled",
    "entry_paths",
    "format_spec",
    "make_numeric_config",
    "make_pass",
    "rewriter_of",
    "parse_spec",
    "pass_registry",
    "pipeline",
    "restore",
    "run_passes",
    "spec_from_pipelines",
    "write_trace",
]
