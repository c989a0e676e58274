"""The trace cache: the trace of one PipelineConfig over the initial snapshot, re-run only from the
first top-level entry whose pipeline prefix changed, and the per-pass numeric check, either
inline (while tracing) or deferred (after the first render, one record at a time).

The error is read off the trace itself (`Trace.error`), and the trace is re-made whenever the
configuration's version moved, so neither can describe an older configuration.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .compiler.ir import Program
from .compiler.passes import (
    NumericConfig,
    PassFailed,
    PassManager,
    PassRecord,
    Trace,
    make_numeric_config,
)
from .compiler.passes.manager import compare_program_outputs
from .compiler.snapshot import ProgramSnapshot
from .session_config import FlatEntry, PipelineConfig


@dataclass
class CachedStep:
    key: tuple
    records: list[PassRecord]
    after: ProgramSnapshot


@dataclass
class RetraceInfo:
    reused: int = 0  # top-level entries served from the cache
    ran: int = 0  # top-level entries executed
    first_run: str | None = None  # path of the first entry re-run


class TraceCache:
    """The trace of a configuration, cached by pipeline prefix.

    numeric: check outputs against the reference after every pass that changed the IR;
    defer_numeric: leave that check for `check_numeric` (the explorer draws first, then fills
    the check in the background), so tracing costs only the passes themselves."""

    def __init__(self, initial: ProgramSnapshot, *, validate: bool = True, numeric: bool = True,
                 numeric_inputs: dict | None = None, defer_numeric: bool = False):
        self.initial = initial
        self.validate = validate
        self.numeric = numeric
        self.defer_numeric = defer_numeric
        self._numeric_inputs = numeric_inputs
        self._numeric_base: NumericConfig | None = None
        self._steps: list[CachedStep] = []
        self._trace: Trace | None = None
        self._traced_version: int | None = None
        self.last_retrace = RetraceInfo()
        self.on_progress: Callable[[int, int, str], None] | None = None
        self._lock = threading.Lock()  # the deferred check runs in a thread beside re-traces

    # ---- numeric configuration ------------------------------------------------------------------------
    def numeric_config(self) -> NumericConfig | None:
        """A fresh NumericConfig (inputs and reference outputs are computed once and shared), or None
        when the check is off."""
        if not self.numeric:
            return None
        if self._numeric_base is None:
            self._numeric_base = make_numeric_config(self.initial.to_program(), self._numeric_inputs)
        # a fresh copy per trace: the manager sets disabled_reason once evaluation stops working
        return dataclasses.replace(self._numeric_base, disabled_reason="")

    def set_inputs(self, inputs: dict | None) -> None:
        """Use these inputs (None: random ones that respect the model); forgets cached results."""
        self._numeric_inputs = None if inputs is None else dict(inputs)
        self._numeric_base = None
        self.invalidate()

    def set_numeric_config(self, cfg: NumericConfig | None) -> None:
        """Use these inputs/reference/tolerances (e.g. the CLI's --rtol); forgets cached results."""
        self._numeric_base = cfg
        self.numeric = cfg is not None
        self.invalidate()

    # ---- the trace ----------------------------------------------------------------------------------------
    def is_current(self, config: PipelineConfig) -> bool:
        return self._trace is not None and self._traced_version == config.version

    def trace(self, config: PipelineConfig) -> Trace:
        if not self.is_current(config):
            with self._lock:
                self._retrace(config)
        return self._trace

    def peek(self) -> Trace | None:
        """The last trace made, without re-tracing (may belong to an older configuration)."""
        return self._trace

    def variant(self) -> TraceCache:
        """A cache for another configuration of the same program that starts from this one's
        cached steps (so it re-runs only from the first entry where the two differ), with the
        numeric check off and no progress reports. Records are shared, never changed."""
        other = TraceCache(self.initial, validate=self.validate, numeric=False)
        with self._lock:
            other._steps = list(self._steps)
        return other

    def invalidate(self) -> None:
        """Forget cached results (e.g. after changing numeric settings)."""
        self._steps.clear()
        self._trace = None
        self._traced_version = None

    def _retrace(self, config: PipelineConfig) -> None:
        flat = config.flat()
        keep = 0
        while keep < min(len(flat), len(self._steps)) and self._steps[keep].key == flat[keep][3]:
            keep += 1
        self._steps = self._steps[:keep]
        trace = Trace(self.initial)
        for st in self._steps:
            trace.records.extend(st.records)
        start_snap = self._steps[-1].after if self._steps else self.initial
        self.last_retrace = RetraceInfo(keep, len(flat) - keep, flat[keep][2] if keep < len(flat) else None)
        if keep < len(flat):
            trace = self._run(config, flat, keep, start_snap.to_program(), trace)
        self._trace = trace
        self._traced_version = config.version

    def _run(self, config: PipelineConfig, flat: list[FlatEntry], keep: int, program: Program,
             trace: Trace) -> Trace:
        order = {f[2]: k for k, f in enumerate(flat)}

        def progress(rec: PassRecord) -> None:
            if rec.depth == 0 and self.on_progress:
                self.on_progress(order.get(rec.path, 0) + 1, len(flat), rec.path)

        numeric = None if self.defer_numeric else self.numeric_config()
        pm = PassManager(validate=self.validate, numeric=numeric, on_record=progress)
        try:
            trace = pm.run(program, config.pipelines, trace=trace, start=flat[keep][:2])
        except PassFailed as e:
            trace = e.trace
        self._store_steps(trace, flat, keep)
        return trace

    def _store_steps(self, trace: Trace, flat: list[FlatEntry], keep: int) -> None:
        tops = [r for r in trace.records[sum(len(s.records) for s in self._steps):] if r.depth == 0]
        for j, top in enumerate(tops):
            if top.status == "failed":
                break
            nxt = tops[j + 1].index if j + 1 < len(tops) else len(trace.records)
            self._steps.append(CachedStep(flat[keep + j][3], trace.records[top.index:nxt], top.after))

    # ---- the deferred numeric check ----------------------------------------------------------------------
    def unchecked(self, trace: Trace) -> list[PassRecord]:
        """Top-level records that changed the IR and have no numeric result yet (pipeline order)."""
        if not self.numeric:
            return []
        return [r for r in trace.top_level() if r.changed and r.after is not None and r.numeric is None]

    def check_numeric(self, rec: PassRecord) -> None:
        """Compare `rec`'s outputs with the reference (records are shared with the step cache, so a
        result survives re-traces that reuse the record)."""
        cfg = self.numeric_config()
        if cfg is None or rec.after is None or rec.numeric is not None:
            return
        rec.numeric = numeric_check(cfg, rec.after)


def numeric_check(cfg: NumericConfig, snap: ProgramSnapshot):
    """One snapshot's outputs against the reference, as PassManager's inline check computes them
    (the comparison and its tolerance are compiler.passes.manager.compare_program_outputs')."""
    from .compiler.errors import MigxError
    from .compiler.inputs import REAL_INPUTS_HINT
    from .compiler.passes import NumericCheck
    from .compiler.ref import evaluate, with_buffer_params

    program = snap.to_program()
    try:
        outs = evaluate(program, with_buffer_params(program, cfg.inputs))
    except MigxError as e:
        hint = f" (on random inputs: {REAL_INPUTS_HINT})" if cfg.random_inputs else ""
        return NumericCheck(float("nan"), float("nan"), True, f"not checked: {e}{hint}")
    return compare_program_outputs(program, outs, cfg)


__all__ = ["CachedStep", "RetraceInfo", "TraceCache", "numeric_check"]
