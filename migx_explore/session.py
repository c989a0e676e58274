"""The explorer's state, in plain Python (no widget imports): a model, the GPU target's pipelines
with the user's toggles, the trace, and the current position.

    s = Session.from_model("yolo")
    s.goto("fusion.fuse_pointwise_reduce"); s.diff()
    s.disable("fuse_horizontal")          # re-traces from the first affected pass only
    s.insert_pass(my_rule, after="fusion.fuse_pointwise_reduce")
    s.step(); s.back()

`Session` is the state and a small API over it (loading, the trace, the cursor, toggles, the
current pass's snapshots); everything else is a module of functions that take a session, as
torch.fx keeps `Graph` apart from the passes and interpreters that run over it:

    from migx_explore import bisect, config_compare, gpu_bridge, pass_changes, verification
    pass_changes.rewrites(s); verification.verify_session(s); bisect.numeric_bisect(s)
    gpu_bridge.time_session(s); config_compare.compare_configs(s, {"fuse_horizontal": False})
    s.config.move("fusion.optimize_module", after="fusion.fuse_pointwise_reduce"); s.config.spec()

Features import this module, never the reverse (tests/explorer/test_session_surface.py checks
both the size of the API and that no feature is imported from here, even type-only).

Re-tracing is cached by pipeline prefix: each top-level entry's records and resulting snapshot are
kept under a key built from every entry up to and including it, so a toggle recomputes only
from the first entry whose prefix changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from migx_explore.compiler.ir import Program
from migx_explore.compiler.pass_infra import Pass, PassEntry, PassRecord, Pipeline, Trace
from migx_explore.compiler.passes.rewrite import as_pass
from migx_explore.compiler.pattern_rewriter import Rule
from migx_explore.compiler.snapshot import ProgramSnapshot, SnapshotDiff, diff, snapshot
from migx_explore.gpu.pipelines import CompileOptions

from .session_config import PipelineConfig, SessionError
from .session_cursor import Cursor
from .session_trace import TraceCache

T = TypeVar("T")


class Session:
    """The state notebooks work on, in three parts: `config` (PipelineConfig: toggles, order,
    options, spec), `traces` (TraceCache: the trace of the configuration, prefix-cached, and
    the numeric check) and `cursor` (Cursor: position and view); `timings` (GPU results by
    configuration identity) and `state(cls)` (what features keep per session) complete it."""

    def __init__(
        self,
        program: Program,
        *,
        name: str = "program",
        options: CompileOptions | None = None,
        include_backend: bool = True,
        numeric: bool = True,
        inputs: dict | None = None,
        validate: bool = True,
        defer_numeric: bool = False,
        precision: str | None = None,
        calibration: Sequence[dict] = (),
    ):
        self.name = name
        options = options or CompileOptions()
        if precision is not None or calibration:  # the quantize stage (fp16/bf16/int8/fp8) runs first
            # int8 / fp8 calibrate on the given feeds, else on the session's own inputs
            feeds = tuple(calibration) or options.calibration or ((inputs,) if inputs else ())
            options = dataclasses.replace(options, precision=precision or options.precision, calibration=feeds)
        self.initial: ProgramSnapshot = snapshot(program)
        self.config = PipelineConfig(options, include_backend=include_backend)
        # One lock for the configuration and its trace: an edit waits for the background trace's
        # current entry, which reads the pipelines' switches while it runs.
        self.traces = TraceCache(
            self.initial,
            validate=validate,
            numeric=numeric,
            numeric_inputs=inputs,
            defer_numeric=defer_numeric,
            lock=self.config.lock,
        )
        self.cursor = Cursor()
        # GPU timings keyed by configuration identity (migx_explore.gpu_bridge.time_session).
        self.timings: dict[tuple, Any] = {}
        # What feature modules keep for this session, keyed by the class that holds it (see state()).
        self._state: dict[type, Any] = {}
        # Where the model came from (for repro scripts); set by the from_* constructors.
        self.source: dict[str, Any] = {"kind": "program", "value": name, "input_dims": {}}

    # ---- construction ----------------------------------------------------------------------------
    @classmethod
    def from_onnx(
        cls, path: str, input_dims: dict[str, Sequence[int]] | None = None, *, inputs: Any = None, **kw: Any
    ) -> Session:
        """`inputs` (an .npz path or a dict of arrays, keyed by ONNX input name) fixes symbolic dims
        from its shapes and becomes the numeric checks' inputs (migx_explore/feeds.py); a feed of another
        element type is refused unless `convert_inputs=True`."""
        from .feeds import load_with_feed

        prog, feed = load_with_feed(path, inputs, input_dims, convert_inputs=kw.pop("convert_inputs", False))
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

    @classmethod
    def from_migraphx(cls, path: str, *, version: str | None = None, **kw: Any) -> Session:
        """A MIGraphX compile log (MIGRAPHX_TRACE_COMPILE / MIGRAPHX_TRACE_PASSES output) or printed
        program as a session: every view works on MIGraphX's own passes; numeric checks are off.
        `version` picks the catalogue that groups passes into pipelines ("2026-05" / "2026-08")."""
        from .migraphx import load_session

        return load_session(cls, path, version=version, **kw)

    @classmethod
    def from_text(cls, text: str, **kw: Any) -> Session:
        from migx_explore.compiler.parser import parse

        return cls(parse(text), **kw)

    # ---- the trace ---------------------------------------------------------------------------------
    @property
    def pipelines(self) -> list[Pipeline]:
        return self.config.pipelines

    @pipelines.setter
    def pipelines(self, value: list[Pipeline]) -> None:
        self.config.pipelines = value

    @property
    def trace(self) -> Trace:
        """The trace of the current configuration (re-traced from the first changed entry if stale);
        `trace.error` is its failure (None when every pass ran)."""
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

    def final(self) -> ProgramSnapshot:
        return self.trace.final

    def invalidate(self) -> None:
        """Forget cached results (e.g. after changing numeric settings), the features' too."""
        self.traces.invalidate()
        self._state.clear()

    def state(self, owner: type[T]) -> T:
        """The session's `owner()` instance: what a feature module keeps for this session (compare
        variants, scope tables, regions), made on first use and forgotten by invalidate(). Keyed
        by the class, so each feature's state has one owner and one type."""
        held = self._state.get(owner)
        if held is None:
            held = self._state[owner] = owner()
        return held

    def _upto(self, need: Callable[[Trace], bool] | None = None) -> Trace:
        """The trace run far enough for the current record and `need` (None: just the current)."""
        pos = self.cursor.position

        def enough(t: Trace) -> bool:
            return len(t.records) > pos and (need is None or need(t))

        trace = self.traces.extend(self.config, enough)
        self.cursor.clamp(trace)
        return trace

    # ---- navigation ------------------------------------------------------------------------------
    # Stepping runs the trace only as far as the record it lands on (records never change once
    # made, so a prefix answers exactly as the whole trace would).
    @property
    def position(self) -> int:
        return self.cursor.position

    @position.setter
    def position(self, value: int) -> None:
        self.cursor.position = value

    @property
    def current(self) -> PassRecord:
        return self.cursor.current(self._upto())

    def visible(self) -> list[int]:
        """The records stepping visits (the cursor's view: nested, hide_unchanged, filter)."""
        return self.cursor.visible(self.trace)

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
    def record(self, where: str | int | None = None) -> PassRecord:
        """The record at a pass path or record index (default: the current one), tracing only as
        far as needed to find it; the cursor does not move."""
        if where is None:
            return self.current
        if isinstance(where, int):
            trace = self._upto(lambda t: len(t.records) > where)
            if not 0 <= where < len(trace.records):
                raise SessionError(f"position {where} is out of range 0..{len(trace.records) - 1}")
            return trace.records[where]
        try:
            return self.trace_so_far.find(where)
        except KeyError:
            pass
        try:
            return self.trace.find(where)  # not traced yet: run the rest
        except KeyError:
            raise SessionError(f"no pass {where!r} in the trace") from None

    def snapshots(self, where: str | int | None = None) -> tuple[ProgramSnapshot, ProgramSnapshot]:
        """(before, after) of a record (default: the current one). A disabled or failed pass has no
        after snapshot: it left the IR as it was."""
        rec = self.record(where)
        return self.trace_so_far.snapshots(rec)  # holds rec: records are only ever appended

    def before(self) -> ProgramSnapshot:
        return self.snapshots()[0]

    def after(self) -> ProgramSnapshot:
        return self.snapshots()[1]

    def diff(self) -> SnapshotDiff:
        r = self.current
        return r.diff if r.diff is not None else diff(self.before(), self.after())

    # ---- toggles (the rest of the configuration's edits are PipelineConfig's: s.config.move(...)) ----
    def set_enabled(self, target: str, enabled: bool, reason: str = "") -> list[str]:
        """Enable/disable a pass everywhere (`fuse_horizontal`), at one position
        (`required.dead_code_elimination#3`) or a whole pipeline (`optimize_rewrite`)."""
        return self.config.set_enabled(target, enabled, reason)

    def disable(self, target: str, reason: str = "") -> list[str]:
        return self.set_enabled(target, False, reason)

    def enable(self, target: str) -> list[str]:
        return self.set_enabled(target, True)

    def insert_pass(
        self,
        p: Pass | Rule | Sequence[Rule] | Callable,
        *,
        after: str | None = None,
        before: str | None = None,
        name: str | None = None,
    ) -> str:
        """Insert a user pass (a Pass, matcher Rule(s) or function) after/before a position."""
        if (after is None) == (before is None):
            raise SessionError("insert_pass needs exactly one of after= or before=")
        return self.config.insert(PassEntry(as_pass(p, name), user=True), after=after, before=before)

    def __repr__(self) -> str:
        t = self.traces.peek()
        if t is None:
            return f"<Session {self.name}: not traced yet ({self.config.label()})>"
        at = t.records[self.position].path if 0 <= self.position < len(t.records) else "the input"
        return f"<Session {self.name}: {len(t.records)} pass records, at {self.position} {at} ({self.config.label()})>"

    def _repr_html_(self) -> str:
        from migx_explore.compiler.reprs import table

        t = self.traces.peek()
        rows = [("model", self.name), ("configuration", self.config.label())]
        if t is None:
            rows.append(("trace", "not traced yet (goto, step or run traces it)"))
        else:
            rows += [
                ("trace", f"{len(t.records)} pass records" + ("" if self.trace_complete else " so far")),
                ("at", f"{self.position}: {t.records[self.position].path}" if t.records else "the input"),
                ("instructions", f"{t.initial.total_instructions()} in the input"),
            ]
        return table(f"Session {self.name}", rows)


__all__ = ["Session", "SessionError"]
