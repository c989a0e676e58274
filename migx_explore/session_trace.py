"""The trace cache: the trace of one PipelineConfig over the initial snapshot, re-run only from the
first top-level entry whose pipeline prefix changed, and the per-pass numeric check.

Tracing never waits for a numeric check: each top-level record that changed the IR gets its check
attached, pending (`PassRecord.defer_numeric`), and it runs when someone reads `record.numeric`,
or when the explorer's background filler gets to it (`check_next`). Checks run on one incremental
evaluator (compiler/ref_incremental.py), so a check costs what its pass changed.

The error is read off the trace itself (`Trace.error`), and the trace is re-made whenever the
configuration's version moved, so neither can describe an older configuration.

Tracing is lazy: the trace grows one top-level entry at a time, as far as someone asks
(`extend(config, until)`), on one live program; the explorer asks for the pass it shows, then
lets a background thread ask for the rest.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass

from migx_explore.compiler.ir import Program
from migx_explore.compiler.pass_infra import (
    NumericConfig,
    PassFailed,
    PassManager,
    PassRecord,
    Trace,
    make_numeric_config,
)
from migx_explore.compiler.pass_infra.numerics import compare_program_outputs
from migx_explore.compiler.snapshot import ProgramSnapshot, same_program

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
    rejoined: int = 0  # entries taken from an earlier trace that had reached the same program


# Earlier traces kept for rejoining (TraceCache._rejoin): a toggle and its undo, and the same
# toggle again, each find the trace they return to. Records and snapshots are shared, so an
# earlier trace costs little beyond what the current one holds.
EARLIER_TRACES = 4


class TraceCache:
    """The trace of a configuration, cached by pipeline prefix.

    numeric: check outputs against the reference after every pass that changed the IR, when
    the record's `numeric` is read (tracing itself costs only the passes);
    defer_numeric: the explorer fills the checks in the background (check_next) after drawing;
    without it nothing runs a check until asked."""

    def __init__(
        self,
        initial: ProgramSnapshot,
        *,
        validate: bool = True,
        numeric: bool = True,
        numeric_inputs: dict | None = None,
        defer_numeric: bool = False,
        lock: threading.RLock | None = None,
    ):
        self.initial = initial
        self.validate = validate
        self.numeric = numeric
        self.defer_numeric = defer_numeric
        self.numeric_inputs = numeric_inputs
        self._numeric_base: NumericConfig | None = None
        self._steps: list[CachedStep] = []
        self._earlier: list[list[CachedStep]] = []  # complete traces a toggle moved away from
        self._partial: Trace | None = None  # the trace of configuration `_version`, maybe a prefix
        self._version: int | None = None
        self._flat: list[FlatEntry] = []
        self._live: Program | None = None  # the program as the last cached step left it
        self._live_at = 0  # how many steps the live program has run
        self.last_retrace = RetraceInfo()
        self.on_progress: Callable[[int, int, str], None] | None = None
        # The deferred check and the background trace run in threads beside the viewer's requests;
        # a session shares this lock with its PipelineConfig, whose edits take it.
        self._lock = lock or threading.RLock()
        self._numeric_lock = threading.Lock()  # the reference outputs are made once, by one thread

    # ---- numeric configuration ------------------------------------------------------------------------
    def numeric_config(self) -> NumericConfig | None:
        """A fresh NumericConfig (inputs and reference outputs are computed once and shared), or None
        when the check is off."""
        if not self.numeric:
            return None
        with self._numeric_lock:
            if self._numeric_base is None:
                self._numeric_base = make_numeric_config(self.initial, self.numeric_inputs)
            base = self._numeric_base
        # a fresh copy per trace: the manager sets disabled_reason once evaluation stops working
        return dataclasses.replace(base, disabled_reason="")

    def set_inputs(self, inputs: dict | None) -> None:
        """Use these inputs (None: random ones that respect the model); forgets cached results."""
        self.numeric_inputs = None if inputs is None else dict(inputs)
        self._numeric_base = None
        self.invalidate()

    def set_numeric_config(self, cfg: NumericConfig | None) -> None:
        """Use these inputs/reference/tolerances (e.g. the CLI's --rtol); forgets cached results."""
        self._numeric_base = cfg
        self.numeric = cfg is not None
        self.invalidate()

    # ---- the trace ----------------------------------------------------------------------------------------
    # The trace grows one top-level entry at a time (`extend`), each under the lock, so a viewer
    # asking for the pass it shows and a background thread finishing the rest take turns: what
    # the user looks at is computed first. `trace` is the whole of it.
    def is_current(self, config: PipelineConfig) -> bool:
        return self._partial is not None and self._version == config.version and self._complete()

    def is_complete(self, config: PipelineConfig) -> bool:
        """Whether the trace of `config` has run to its end (or to a failing pass)."""
        with self._lock:
            self._prepare(config)
            return self._complete()

    def trace(self, config: PipelineConfig) -> Trace:
        return self.extend(config)

    def extend(self, config: PipelineConfig, until: Callable[[Trace], bool] | None = None) -> Trace:
        """The trace of `config`, run until `until(trace)` holds (None: to the end). The trace
        returned may be a prefix; its records never change once made, later ones are appended."""
        while True:
            with self._lock:
                self._prepare(config)
                trace = self._partial
                if self._complete() or (until is not None and until(trace)):
                    return trace
                self._advance(config)

    def prefix(self, config: PipelineConfig) -> Trace:
        """The trace of `config` as far as it has run, running nothing."""
        return self.extend(config, lambda _t: True)

    def peek(self) -> Trace | None:
        """The last trace made, without tracing (may be a prefix, or of an older configuration)."""
        return self._partial

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
        with self._lock:
            self._steps.clear()
            self._earlier.clear()
            self._partial = None
            self._version = None
            self._live = None

    def _complete(self) -> bool:
        return len(self._steps) >= len(self._flat) or self._partial.error is not None

    def _prepare(self, config: PipelineConfig) -> None:
        """Point the partial trace at `config`: keep the cached entries whose prefix is unchanged
        (a toggle re-runs from the first affected entry, and only when asked)."""
        if self._partial is not None and self._version == config.version:
            return
        flat = config.flat()
        keep = 0
        while keep < min(len(flat), len(self._steps)) and self._steps[keep].key == flat[keep][3]:
            keep += 1
        if self._live_at != keep:
            self._live = None  # the live program is past the kept prefix (or was never made)
        if keep < len(self._steps) and len(self._steps) == len(self._flat):
            self._earlier = [self._steps, *self._earlier][:EARLIER_TRACES]
        self._steps = self._steps[:keep]
        trace = Trace(self.initial)
        for st in self._steps:
            trace.records.extend(st.records)
        self._partial, self._flat, self._version = trace, flat, config.version
        self.last_retrace = RetraceInfo(keep, 0, flat[keep][2] if keep < len(flat) else None)

    def _advance(self, config: PipelineConfig) -> None:
        """Run the next top-level entry on the live program (made from the last cached snapshot
        when a toggle moved the prefix)."""
        flat, k, trace = self._flat, len(self._steps), self._partial
        if self._live is None:
            self._live = (self._steps[-1].after if self._steps else self.initial).to_program()
        order = {f[2]: j for j, f in enumerate(flat)}

        def progress(rec: PassRecord) -> None:
            if rec.depth == 0 and self.numeric and rec.changed and rec.after is not None:
                rec.defer_numeric(lambda rec=rec: self._check(rec))
            if rec.depth == 0 and self.on_progress:
                self.on_progress(order.get(rec.path, 0) + 1, len(flat), rec.path)

        pm = PassManager(validate=self.validate, numeric=None, on_record=progress)
        start = len(trace.records)
        stop = flat[k + 1][:2] if k + 1 < len(flat) else None
        try:
            pm.run(self._live, config.pipelines, trace=trace, start=flat[k][:2], stop=stop)
        except PassFailed:
            self._live = None  # the trace carries the error and ends here
        self.last_retrace.ran += 1
        tops = [r for r in trace.records[start:] if r.depth == 0]
        if tops and tops[0].status != "failed":
            self._steps.append(CachedStep(flat[k][3], trace.records[start:], tops[0].after))
        self._live_at = len(self._steps)
        if self._live is not None and len(self._steps) == k + 1:
            self._rejoin(k)

    def _rejoin(self, k: int) -> None:
        """Entry k just ran: when an earlier trace reached the very same program after its entry
        k, with the same entries after it, its remaining steps are this trace's (a pass is a
        function of the program it is given and its options: the rebuilt live program of a
        re-trace is made from a snapshot alone). Toggling a pass back on re-runs that pass only,
        and a toggle made before takes one entry. The records are shared, so their record
        indices must line up: the same number of records up to entry k."""
        flat, mine = self._flat, self._steps[k]
        count = sum(len(st.records) for st in self._steps)
        for earlier in self._earlier:
            if (
                len(earlier) == len(flat)
                and all(st.key[-1] == f[3][-1] for st, f in zip(earlier[k + 1 :], flat[k + 1 :]))
                and sum(len(st.records) for st in earlier[: k + 1]) == count
                and same_program(earlier[k].after, mine.after)
            ):
                rest = [dataclasses.replace(st, key=f[3]) for st, f in zip(earlier[k + 1 :], flat[k + 1 :])]
                self._steps.extend(rest)
                for st in rest:
                    self._partial.records.extend(st.records)
                self.last_retrace.rejoined = len(rest)
                if self.on_progress and rest:
                    self.on_progress(len(flat), len(flat), flat[-1][2])
                return

    # ---- the deferred numeric check ----------------------------------------------------------------------
    def unchecked(self, trace: Trace) -> list[PassRecord]:
        """Top-level records that changed the IR and have no numeric result yet (pipeline order)."""
        if not self.numeric:
            return []
        return [r for r in trace.top_level() if r.changed and r.after is not None and not self._has_result(r)]

    @staticmethod
    def _has_result(r: PassRecord) -> bool:
        return r.numeric_ready and r.numeric is not None

    def numeric_state(self, r: PassRecord) -> str:
        """'ok' | 'bad' | 'note' | 'pending' (deferred, not yet run) | 'off' | 'nested' (checked
        through its top-level pass) | 'unchanged'."""
        if self._has_result(r):
            return "note" if r.numeric.note else ("ok" if r.numeric.ok else "bad")
        if not r.changed:
            return "unchanged"
        if not self.numeric:
            return "off"
        return "pending" if r.depth == 0 else "nested"

    def check_next(self, trace: Trace, rec: PassRecord | None = None) -> PassRecord | None:
        """Run the deferred numeric check of `rec` (default: the first unchecked pass of `trace`);
        returns the record checked, None when nothing is left."""
        if rec is None:
            todo = self.unchecked(trace)
            if not todo:
                return None
            rec = todo[0]
        self.check_numeric(rec)
        return rec

    def check_numeric(self, rec: PassRecord) -> None:
        """Compare `rec`'s outputs with the reference (records are shared with the step cache, so a
        result survives re-traces that reuse the record)."""
        if rec.after is None or self._has_result(rec):
            return
        if rec.numeric_pending:
            _ = rec.numeric  # runs the attached check (once, whichever thread asks first)
            return
        result = self._check(rec)
        if result is not None:
            rec.numeric = result

    def _check(self, rec: PassRecord):
        cfg = self.numeric_config()
        return None if cfg is None or rec.after is None else numeric_check(cfg, rec.after)


def numeric_check(cfg: NumericConfig, snap: ProgramSnapshot):
    """One snapshot's outputs against the reference, as PassManager's inline check computes them
    (the comparison and its tolerance are compiler.pass_infra.numerics.compare_program_outputs')."""
    from migx_explore.compiler.errors import MigxError
    from migx_explore.compiler.inputs import REAL_INPUTS_HINT
    from migx_explore.compiler.pass_infra import NumericCheck
    from migx_explore.compiler.pass_infra.numerics import reference_evaluator

    try:
        outs, names = reference_evaluator(cfg).evaluate_snapshot(snap, named=True)
    except MigxError as e:
        hint = f" (on random inputs: {REAL_INPUTS_HINT})" if cfg.random_inputs else ""
        return NumericCheck(float("nan"), float("nan"), True, f"not checked: {e}{hint}")
    return compare_program_outputs(snap, outs, cfg, names)


__all__ = ["CachedStep", "RetraceInfo", "TraceCache", "numeric_check"]
