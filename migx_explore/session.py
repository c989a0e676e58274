"""The explorer's state, in plain Python (no widget imports): a model, the GPU target's pipelines
with the user's toggles, the trace, the current position, and GPU timing results.

    s = Session.from_model("yolo")
    s.goto("fusion.fuse_pointwise_reduce"); s.diff()
    s.disable("fuse_horizontal")          # re-traces from the first affected pass only
    s.insert_pass(my_rule, after="fusion.fuse_pointwise_reduce")
    s.step(); s.back(); s.time(modes=("eager", "graph"))

Re-tracing is cached by pipeline prefix: each top-level entry's records and resulting snapshot are
kept under a key built from every entry up to and including it, so a toggle recomputes only
from the first entry whose prefix changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .compiler.errors import MigxError
from .compiler.ir import Program
from .compiler.passes import (
    NumericConfig,
    Pass,
    PassEntry,
    PassRecord,
    Pipeline,
    Trace,
)
from .compiler.passes.rule_pass import RewritePass as RulePass  # noqa: F401  (RulePass: the old name)
from .compiler.passes.rule_pass import as_pass
from .compiler.pattern_rewriter import Rule
from .compiler.snapshot import ProgramSnapshot, SnapshotDiff, snapshot
from .gpu.pipelines import CompileOptions
from .regions import Region, change_regions
from .rewrite_summary import RewriteRow, record_rewrites
from .scopes import ScopeTable
from .session_config import PipelineConfig, SessionError
from .session_cursor import Cursor, View
from .session_trace import RetraceInfo, TraceCache
from .session_variants import ConfigComparison, VariantTraces, compare_configs
from .stats import launch_count


@dataclass
class TimingRun:
    """One GPU timing of one configuration: its readable label (the spec, or 'custom pipeline')
    and the result. Session.timings keys these by configuration identity, not by the label."""

    label: str
    result: Any


class Session:
    """The facade notebooks use over three parts: `config` (PipelineConfig: toggles, order,
    options, spec), `traces` (TraceCache: the trace of the configuration, prefix-cached, and
    the numeric check) and `cursor` (Cursor: position and view)."""

    def __init__(self, program: Program, *, name: str = "program", options: CompileOptions | None = None,
                 include_backend: bool = True, numeric: bool = True, inputs: dict | None = None,
                 validate: bool = True, defer_numeric: bool = False, precision: str | None = None,
                 calibration: Sequence[dict] = ()):
        self.name = name
        options = options or CompileOptions()
        if precision is not None or calibration:  # the quantize stage (fp16/bf16/int8/fp8) runs first
            # int8 / fp8 calibrate on the given feeds, else on the session's own inputs
            feeds = tuple(calibration) or options.calibration or ((inputs,) if inputs else ())
            options = dataclasses.replace(options, precision=precision or options.precision, calibration=feeds)
        self.initial: ProgramSnapshot = snapshot(program)
        self.config = PipelineConfig(options, include_backend=include_backend)
        self.traces = TraceCache(self.initial, validate=validate, numeric=numeric, numeric_inputs=inputs,
                                 defer_numeric=defer_numeric)
        self.cursor = Cursor()
        self.variants = VariantTraces()  # traces of other configurations (compare_configs)
        self.timings: dict[tuple, TimingRun] = {}
        # Where the model came from (for repro scripts); set by the from_* constructors.
        self.source: dict[str, Any] = {"kind": "program", "value": name, "input_dims": {}}

    # ---- construction ----------------------------------------------------------------------------
    @classmethod
    def from_onnx(cls, path: str, input_dims: dict[str, Sequence[int]] | None = None, *,
                  inputs: Any = None, **kw: Any) -> Session:
        """`inputs` (an .npz path or a dict of arrays, keyed by ONNX input name) fixes symbolic dims
        from its shapes and becomes the numeric checks' inputs (migx_explore/feeds.py)."""
        from .feeds import load_with_feed

        prog, feed = load_with_feed(path, inputs, input_dims)
        s = cls(prog, name=kw.pop("name", str(path).rsplit("/", 1)[-1]), inputs=feed, **kw)
        s.source = {"kind": "onnx", "value": str(path), "input_dims": dict(input_dims or {})}
        return s

    @classmethod
    def from_model(cls, model_name: str, **kw: Any) -> Session:
        from . import models

        dims = kw.pop("input_dims", None) or {}
        s = cls(models.load(model_name, feed=kw.get("inputs"), **dims), name=model_name, **kw)
        s.source = {"kind": "model", "value": model_name, "input_dims": dict(dims)}
        return s

    def generate(self, prompt_ids: Sequence[int], steps: int, *, target: str = "ref", mode: str = "graph",
                 **kw: Any) -> Any:
        """Greedy generation with this session's KV-cache model (an ONNX file or built-in model):
        prefill, then decode steps feeding presents back as pasts (migx_explore.decode)."""
        from .decode import generate

        if self.source.get("kind") not in ("model", "onnx"):
            raise MigxError("generate needs a session made by from_model or from_onnx (it recompiles per shape)")
        return generate(self.source["value"], prompt_ids, steps, target=target, mode=mode, **kw)

    @classmethod
    def from_text(cls, text: str, **kw: Any) -> Session:
        from .compiler.parser import parse

        return cls(parse(text), **kw)

    # ---- the parts, as the attributes notebooks know -----------------------------------------------
    @property
    def options(self) -> CompileOptions:
        return self.config.options

    @property
    def catalog(self) -> list[Pipeline]:
        return self.config.catalog

    @property
    def pipelines(self) -> list[Pipeline]:
        return self.config.pipelines

    @pipelines.setter
    def pipelines(self, value: list[Pipeline]) -> None:
        with self.traces.editing():
            self.config.pipelines = value

    @property
    def validate(self) -> bool:
        return self.traces.validate

    @property
    def position(self) -> int:
        return self.cursor.position

    @position.setter
    def position(self, value: int) -> None:
        self.cursor.position = value

    @property
    def view(self) -> View:
        return self.cursor.view

    @property
    def last_retrace(self) -> RetraceInfo:
        return self.traces.last_retrace

    @property
    def on_progress(self) -> Callable[[int, int, str], None] | None:
        return self.traces.on_progress

    @on_progress.setter
    def on_progress(self, fn: Callable[[int, int, str], None] | None) -> None:
        self.traces.on_progress = fn

    # ---- the trace ---------------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """The trace of the current configuration (re-traced from the first changed entry if stale)."""
        trace = self.traces.trace(self.config)
        self.cursor.clamp(trace)
        return trace

    def run(self) -> Trace:
        """Trace now (re-running only what toggles invalidated) and return the trace."""
        return self.trace

    @property
    def trace_so_far(self) -> Trace:
        """The trace of the current configuration as far as it has run (nothing is run): stepping
        traces only up to the pass it lands on, and the explorer finishes the rest in the
        background."""
        return self.traces.prefix(self.config)

    @property
    def trace_complete(self) -> bool:
        return self.traces.is_complete(self.config)

    def _upto(self, need: Callable[[Trace], bool] | None = None) -> Trace:
        """The trace run far enough for the current record and `need` (None: just the current)."""
        pos = self.cursor.position

        def enough(t: Trace) -> bool:
            return len(t.records) > pos and (need is None or need(t))

        trace = self.traces.extend(self.config, enough)
        self.cursor.clamp(trace)
        return trace

    @property
    def records(self) -> list[PassRecord]:
        return self.trace.records

    @property
    def error(self) -> str | None:
        """The failure of the current configuration's trace (None when every pass ran). Read off
        the trace, so it can never describe an earlier configuration."""
        return self.trace.error

    def numeric_config(self) -> NumericConfig | None:
        """The inputs, reference outputs and tolerances of the per-pass numeric check (None: off)."""
        return self.traces.numeric_config()

    def set_numeric_config(self, cfg: NumericConfig | None) -> None:
        self.traces.set_numeric_config(cfg)

    def set_inputs(self, inputs: dict | None) -> None:
        """Use these inputs (None: random ones that respect the model) for the numeric checks."""
        self.traces.set_inputs(inputs)

    # Kept for callers written against the single-class Session (cli.verify, verification, bisect).
    _numeric = numeric_config

    @property
    def _numeric_base(self) -> NumericConfig | None:
        return self.traces._numeric_base

    @_numeric_base.setter
    def _numeric_base(self, cfg: NumericConfig | None) -> None:
        self.set_numeric_config(cfg)

    @property
    def _numeric_inputs(self) -> dict | None:
        return self.traces._numeric_inputs

    @_numeric_inputs.setter
    def _numeric_inputs(self, inputs: dict | None) -> None:
        self.traces._numeric_inputs = inputs

    @property
    def _numeric_enabled(self) -> bool:
        return self.traces.numeric

    @_numeric_enabled.setter
    def _numeric_enabled(self, on: bool) -> None:
        self.traces.numeric = on

    def unchecked(self) -> list[PassRecord]:
        """Changed top-level passes whose numeric check is still to run (deferred mode)."""
        return self.traces.unchecked(self.trace)

    def check_numeric(self, rec: PassRecord | None = None) -> PassRecord | None:
        """Run the deferred numeric check of `rec` (default: the first unchecked pass); returns the
        record checked, None when nothing is left."""
        if rec is None:
            todo = self.unchecked()
            if not todo:
                return None
            rec = todo[0]
        self.traces.check_numeric(rec)
        return rec

    def invalidate(self) -> None:
        """Forget cached results (e.g. after changing numeric settings)."""
        self.traces.invalidate()
        self.variants.clear()

    # ---- navigation ------------------------------------------------------------------------------
    def visible(self) -> list[int]:
        return self.cursor.visible(self.trace)

    def visible_so_far(self) -> list[int]:
        """The records stepping visits, in the trace as far as it has run (nothing is run)."""
        return self.cursor.visible(self.trace_so_far)

    # Stepping runs the trace only as far as the record it lands on (records never change once
    # made, so a prefix answers exactly as the whole trace would).
    @property
    def current(self) -> PassRecord:
        return self.cursor.current(self._upto())

    def step(self, n: int = 1) -> PassRecord:
        cur = self.cursor

        def ahead(t: Trace) -> bool:
            return sum(1 for i in cur.visible(t) if i > cur.position) >= n

        return cur.move(self._upto(ahead), n)

    def back(self, n: int = 1) -> PassRecord:
        return self.cursor.move(self._upto(), -n)

    def first(self) -> PassRecord:
        return self.cursor.first(self._upto(lambda t: bool(self.cursor.visible(t))))

    def last(self) -> PassRecord:
        return self.cursor.last(self.trace)

    def first_changed(self) -> PassRecord:
        """Go to the first visible pass that changed the IR (where a first look starts)."""
        def seen(t: Trace) -> bool:
            return any(t.records[i].changed or t.records[i].status == "failed" for i in self.cursor.visible(t))

        return self.cursor.first_changed(self._upto(seen))

    def goto(self, where: str | int) -> PassRecord:
        self.cursor.check_target(where)  # before tracing: a bad target must not run passes
        if isinstance(where, int):
            return self.cursor.goto(self._upto(lambda t: len(t.records) > where), where)

        def found(t: Trace) -> bool:
            try:
                t.find(where)
            except KeyError:
                return False
            return True

        return self.cursor.goto(self._upto(found), where)

    # ---- what a pass did ------------------------------------------------------------------------------
    def snapshots(self, index: int | None = None) -> tuple[ProgramSnapshot, ProgramSnapshot]:
        """(before, after) of a record (default: the current one). A disabled or failed pass has no
        after snapshot: it left the IR as it was."""
        if index is None:
            return self._upto().snapshots(self.current)
        return self._upto(lambda t: len(t.records) > index).snapshots(self.trace_so_far.records[index])

    def before(self) -> ProgramSnapshot:
        return self.snapshots()[0]

    def after(self) -> ProgramSnapshot:
        return self.snapshots()[1]

    def diff(self) -> SnapshotDiff:
        from .compiler.snapshot import diff

        r = self.current
        return r.diff if r.diff is not None else diff(self.before(), self.after())

    def rewrites(self, path: str | int | None = None) -> list[RewriteRow]:
        """What a pass did as rows `{from ops} -> {to ops} x count`, each with its instances' ids
        (default: the current pass; else a pass path/name or record index). See rewrite_summary.py."""
        rec = self.current if path is None else self._record_of(path)
        return record_rewrites(self.trace_so_far, rec)

    def scopes(self, index: int | None = None) -> tuple[dict[int, str], dict[int, str]]:
        """The scope of every instruction before and after a record (default: the current one),
        as scopes.ScopeTable derives them (model paths, or graph-derived blocks)."""
        rec = self.current if index is None else self._record_of(index)
        table = self._scope_table()
        trace = self.trace_so_far  # holds rec: records are only ever appended to a trace
        before, after = trace.snapshots(rec)
        prev = trace.records[rec.index - 1] if rec.index > 0 else None
        return table.scopes_of(before, prev), table.scopes_of(after, rec)

    def regions(self, path: str | int | None = None) -> list[Region]:
        """A pass's change as connected regions in program order (default: the current pass)."""
        rec = self.current if path is None else self._record_of(path)
        cache = self.__dict__.setdefault("_regions_cache", {})
        hit = cache.get(rec.index)
        if hit is not None and hit[0] is rec:  # records are replaced, never changed, by a re-trace
            return hit[1]
        sb, sa = self.scopes(rec.index)
        trace = self.trace_so_far
        before, after = trace.snapshots(rec)
        regions = change_regions(before, after, record_rewrites(trace, rec), {**sb, **sa})
        cache[rec.index] = (rec, regions)
        return regions

    def _scope_table(self) -> ScopeTable:
        trace = self.trace_so_far  # grows in place; a new configuration's trace is a new object
        if getattr(self, "_scopes", None) is None or self._scopes.trace is not trace:
            self._scopes = ScopeTable(trace)
        return self._scopes

    def text_diff(self, context: int = 3) -> str:
        from .render import text_diff

        return text_diff(self.before(), self.after(), context=context)

    def compare(self, a: str | int, b: str | int) -> tuple[ProgramSnapshot, ProgramSnapshot]:
        """The IR after pass `a` and after pass `b` (paths or record indexes), to compare any two
        points of the pipeline rather than one pass's before and after."""
        return self._after_of(a), self._after_of(b)

    def compare_configs(self, toggles: dict[str, bool], at: str = "") -> ConfigComparison:
        """The IR as configured against the IR with `toggles` (pass path, pass name or pipeline ->
        enabled) applied to a copy of the configuration, at the end of the pipeline or after
        pass `at`. The session's own toggles are untouched; only the passes from the first
        switched one on are traced again (e.g. {"fusion.fuse_pointwise_reduce": False})."""
        return compare_configs(self, self.variants, toggles, at)

    def _after_of(self, where: str | int) -> ProgramSnapshot:
        return self.snapshots(self._record_of(where).index)[1]

    def _record_of(self, where: str | int) -> PassRecord:
        """The record at an index or pass path, tracing only as far as needed to find it."""
        if isinstance(where, int):
            trace = self._upto(lambda t: len(t.records) > where)
        else:
            trace = self.trace_so_far
            try:
                return trace.find(where)
            except KeyError:
                trace = self.trace  # not traced yet: run the rest
        if isinstance(where, int):
            if not 0 <= where < len(trace.records):
                raise SessionError(f"position {where} is out of range 0..{len(trace.records) - 1}")
            rec = trace.records[where]
        else:
            try:
                rec = trace.find(where)
            except KeyError:
                raise SessionError(f"no pass {where!r} in the trace") from None
        return rec

    def stats(self) -> dict[str, Any]:
        r = self.current
        d = self.diff()
        return {
            "pass": r.path, "status": r.status, "reason": r.reason, "time_ms": round(r.time_s * 1e3, 3),
            "added": len(d.added), "removed": len(d.removed), "changed": len(d.changed),
            "instructions_before": self.before().total_instructions(),
            "instructions_after": self.after().total_instructions(),
            "launches_before": launch_count(self.before()), "launches_after": launch_count(self.after()),
            "numeric_max_abs": None if r.numeric is None else r.numeric.max_abs,
            "numeric_ok": None if r.numeric is None else r.numeric.ok,
            "numeric_note": "" if r.numeric is None else r.numeric.note,
            # MIGraphX-style relative RMS of the worst output and its threshold (compiler/verify.py)
            "numeric_rms": None if r.numeric is None else r.numeric.rms,
            "numeric_threshold": None if r.numeric is None else r.numeric.threshold,
            "numeric_summary": "" if r.numeric is None else r.numeric.describe(),
            "numeric_state": self.numeric_state(r),
            "matches": len(r.matches),
        }

    def numeric_state(self, r: PassRecord) -> str:
        """'ok' | 'bad' | 'note' | 'pending' (deferred, not yet run) | 'off' | 'nested' (checked
        through its top-level pass) | 'unchanged'."""
        if r.numeric is not None:
            return "note" if r.numeric.note else ("ok" if r.numeric.ok else "bad")
        if not r.changed:
            return "unchanged"
        if not self.traces.numeric:
            return "off"
        return "pending" if r.depth == 0 else "nested"

    def final(self) -> ProgramSnapshot:
        return self.trace.final

    # ---- toggles (PipelineConfig) ---------------------------------------------------------------------
    def set_enabled(self, target: str, enabled: bool, reason: str = "") -> list[str]:
        """Enable/disable a pass everywhere (`fuse_horizontal`), at one position
        (`required.dead_code_elimination#3`) or a whole pipeline (`optimize_rewrite`)."""
        with self.traces.editing():
            return self.config.set_enabled(target, enabled, reason)

    def disable(self, target: str, reason: str = "") -> list[str]:
        return self.set_enabled(target, False, reason)

    def enable(self, target: str) -> list[str]:
        return self.set_enabled(target, True)

    def set_mode(self, mode: str) -> None:
        """eager skips optimize_rewrite (MIGraphX compile-modes); balanced runs everything."""
        with self.traces.editing():
            self.config.set_mode(mode)

    def set_options(self, target: str, **options: Any) -> None:
        with self.traces.editing():
            self.config.set_options(target, **options)

    def insert_pass(self, p: Pass | Rule | Sequence[Rule] | Callable, *, after: str | None = None,
                    before: str | None = None, name: str | None = None) -> str:
        """Insert a user pass (a Pass, matcher Rule(s) or function) after/before a position."""
        if (after is None) == (before is None):
            raise SessionError("insert_pass needs exactly one of after= or before=")
        with self.traces.editing():
            return self.config.insert(PassEntry(as_pass(p, name), user=True), after=after, before=before)

    def remove_pass(self, target: str) -> None:
        with self.traces.editing():
            self.config.remove(target)

    def move_pass(self, target: str, *, after: str | None = None, before: str | None = None) -> str:
        """Move one entry (ordering lessons); ordering-rule warnings tell what it breaks."""
        with self.traces.editing():
            return self.config.move(target, after=after, before=before)

    def reset(self) -> None:
        with self.traces.editing():
            self.config.reset()

    def warnings(self) -> list[str]:
        return self.config.warnings()

    def spec(self) -> str:
        return self.config.spec()

    def spec_or_label(self) -> str:
        return self.config.label()

    def entries(self) -> Iterable[tuple[str, PassEntry, Pipeline]]:
        return self.config.entries()

    # ---- GPU (the explorer's widgets reach the GPU only through these) ----------------------------------
    @staticmethod
    def recorded_gpu_results() -> Any:
        """Timings recorded on a real GPU that ship with the package (device, date, per model), or
        None: what the GPU panel shows where no GPU is usable."""
        from .gpu_bridge import recorded_results

        return recorded_results()

    @staticmethod
    def gpu_unavailable_reason() -> str | None:
        """Why GPU features are unavailable here (None when a GPU stack is usable)."""
        from .gpu_bridge import unavailable_reason

        return unavailable_reason()

    def compile_kernels(self, progress: Callable[[int, int, str], None] | None = None) -> int:
        """Compile the final program's kernels (one at a time, reporting progress) into the kernel
        cache that timing then hits; returns how many there were."""
        from .gpu_bridge import compile_kernels

        return compile_kernels(self.final(), progress)

    def time(self, modes: Sequence[str] = ("eager", "graph"), warmup: int = 10, iters: int = 100,
             progress: Callable[[int, int, str], None] | None = None) -> Any:
        """Compile the final program for the GPU and time it in each mode; the result is kept in
        .timings under this configuration's identity (see timing())."""
        from .gpu_bridge import time_snapshot

        result = time_snapshot(self.final(), modes=modes, warmup=warmup, iters=iters, progress=progress)
        self.timings[self.config.identity()] = TimingRun(self.spec_or_label(), result)
        return result

    def timing(self) -> Any:
        """The last timing result of the current configuration (None if it was not timed)."""
        run = self.timings.get(self.config.identity())
        return None if run is None else run.result

    # ---- beyond stepping: bisect and waterfall ------------------------------------------------------
    def bisect(self, inputs: dict | None = None):
        """The first pass that breaks the numeric check, and the first diverging replacement inside
        it (None when every pass keeps the outputs). See migx_explore.bisect."""
        from .bisect import numeric_bisect

        return numeric_bisect(self, inputs)

    def verify(self, inputs: dict | None = None, **kw: Any):
        """Numeric check after every pass (MIGraphX's relative RMS, or rtol=/atol= allclose) on
        `inputs` (default: the session's, else random ones that respect the model); returns a
        VerifyReport. See migx_explore.verification. Runs the check inline even where the session
        defers it (the report needs every pass's result)."""
        from .verification import verify_session

        deferred, self.traces.defer_numeric = self.traces.defer_numeric, False
        try:
            return verify_session(self, self._numeric_inputs if inputs is None else inputs, **kw)
        finally:
            self.traces.defer_numeric = deferred

    def perf_bisect(self, toggles: dict[str, bool], measure: Callable[[Session], float], **kw: Any):
        """Minimal subset of `toggles` (pass path -> enabled in the bad configuration) that makes
        `measure(session)` regress; the session's own configuration is the good one."""
        from .bisect import perf_bisect

        return perf_bisect(self, toggles, measure, **kw)

    def waterfall(self, by: str = "pass", **kw: Any):
        """Δ launches and Δ eager/graph latency with each pass / sub-pipeline disabled; the variants
        run as Dask tasks (cluster=, workers=, gpus=; see migx_explore.sweep)."""
        from .waterfall import waterfall

        return waterfall(self, by=by, **kw)

    def study_order(self, scope: str = "pass", **kw: Any):
        """Which pass orderings matter: every movable pass swapped with its neighbour (or adjacent
        sub-pipelines), each variant's figures, the moves that change something ranked. See
        migx_explore.study; variants run as Dask tasks (migx_explore.sweep)."""
        from .study import study_order

        return study_order(self, scope=scope, **kw)

    def report(self, path: str, **kw: Any):
        """Write one self-contained HTML report of the passes (tree, per-pass stats, rewrite
        summary, numeric check, text and graph diffs; GPU timing with gpu=True) to `path`; returns
        a ReportInfo. See migx_explore.report."""
        from .report import write_report

        return write_report(self, path, **kw)

    def recipe(self):
        """The current toggles as a pipeline spec, a MIGRAPHX_DISABLE_PASSES list and a repro script."""
        from .recipe import make_recipe

        return make_recipe(self)

    def __repr__(self) -> str:
        t = self.traces.peek()
        n = len(t.records) if t is not None else "untraced"
        return f"<Session {self.name}: {n} records, at {self.position}>"


__all__ = ["RetraceInfo", "Rule", "RulePass", "Session", "SessionError", "TimingRun", "View", "as_pass"]
