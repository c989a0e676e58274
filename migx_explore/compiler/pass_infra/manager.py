"""The pass manager: runs pipelines, honours toggles, and runs every pass (nested ones too) inside
its instrumentations (pass_infra/instrumentation.py): snapshots and diff, timing, validation,
rule-match recording, the optional numeric check (pass_infra/numerics.py), a per-record callback,
and any the caller adds.

An invalid module or a failing pass stops the run with `PassFailed` naming the pass and
instruction; the program is restored to the last good snapshot, which the trace keeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import MigxError
from ..ir import Module, Program
from ..snapshot import ProgramSnapshot, snapshot
from .base import Pass, PassContext, PassEntry, Pipeline
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
from .numerics import NumericChecks, NumericConfig
from .trace import PassRecord, Trace


class PassFailed(MigxError):
    def __init__(self, message: str, trace: Trace, record: PassRecord):
        super().__init__(message)
        self.trace = trace
        self.record = record


class PassManager:
    """`validate`, `numeric` and `on_record` switch the standard instrumentations on;
    `instrumentations` adds the caller's own (each sees the record after validation and the
    numeric check, before `on_record`). `trust_versions`: the snapshot after a built-in top-level
    pass reads only the modules whose version moved (Snapshots says when that is enough)."""

    def __init__(
        self,
        *,
        validate: bool = True,
        numeric: NumericConfig | None = None,
        on_record: Callable[[PassRecord], None] | None = None,
        instrumentations: Sequence[PassInstrumentation] = (),
        trust_versions: bool = False,
    ):
        self.validate = validate
        self.trust_versions = trust_versions
        self.numeric = numeric
        self.on_record = on_record
        self.extra_instrumentations = list(instrumentations)
        self._trace: Trace | None = None
        self._active: list[PassInstrumentation] = []
        self._child_counts: dict[tuple[int, str], int] = {}
        self._hook_s = 0.0

    def instrumentations(self) -> list[PassInstrumentation]:
        """The instrumentations a run uses, outermost first (instrumentation.py says why this order)."""
        out: list[PassInstrumentation] = [RecordCallback(self.on_record)] if self.on_record else []
        out += self.extra_instrumentations
        out += [NumericChecks(self.numeric)] if self.numeric is not None else []
        out += [Validation()] if self.validate else []
        return [*out, MatchRecording(), Snapshots(self.trust_versions), Timing()]

    # ---- public ----------------------------------------------------------------------------------
    def run(
        self,
        program: Program,
        pipelines: Sequence[Pipeline] | Sequence[Pass],
        *,
        trace: Trace | None = None,
        start: tuple[int, int] = (0, 0),
        stop: tuple[int, int] | None = None,
    ) -> Trace:
        """Run pipelines (or a flat list of passes) on `program` in place; returns the trace.

        To resume from a cached prefix, pass the truncated `trace` to append to and `start` =
        (pipeline index, entry index) of the first entry to run; `program` must be in the state
        the trace's last record left it in. `stop` (same form) is the first entry not to run: a
        lazy trace runs the pipelines piece by piece."""
        if pipelines and isinstance(pipelines[0], Pass):
            pipelines = [Pipeline("passes", [PassEntry(p) for p in pipelines])]
        self._trace = trace if trace is not None else Trace(snapshot(program))  # an empty Trace is falsy
        self._active = self.instrumentations()
        for inst in self._active:
            inst.begin(self._trace)
        for pi, pl in enumerate(pipelines):
            paths = entry_paths(pl)
            for k, e in enumerate(pl.entries):
                if (pi, k) < start:
                    continue
                if stop is not None and (pi, k) >= stop:
                    return self._trace
                if not (pl.enabled and e.enabled):
                    self._record_disabled(program, pl, k, e, paths[k])
                    continue
                self._run(
                    e.pass_, program, parent=None, scope=None, pipeline=pl.name, entry=k, path=paths[k], user=e.user
                )
        return self._trace

    # ---- internals -------------------------------------------------------------------------------
    def _new_record(
        self, p: Pass, pipeline: str, entry: int | None, path: str, parent: PassRecord | None, **kw: Any
    ) -> PassRecord:
        tr = self._trace
        rec = PassRecord(
            index=len(tr.records),
            path=path,
            name=p.name,
            pipeline=pipeline,
            entry=entry,
            depth=0 if parent is None else parent.depth + 1,
            parent=None if parent is None else parent.index,
            options=p.non_default_options(),
            **kw,
        )
        tr.records.append(rec)
        if parent is not None:
            parent.children.append(rec.index)
        return rec

    def _hooks(self, hook: str, run: PassRun) -> None:
        """Call `hook` on every instrumentation (before_pass outermost first, the others innermost
        first), counting the time so Timing can leave it out of the passes it nests in."""
        t = time.perf_counter()
        try:
            for inst in self._active if hook == "before_pass" else reversed(self._active):
                getattr(inst, hook)(run)
        finally:
            self._hook_s += time.perf_counter() - t

    def _new_run(self, p: Pass, program: Program, rec: PassRecord, scope: Module | None, parent, user: bool) -> PassRun:
        return PassRun(p, program, rec, scope, parent, user, hook_seconds=lambda: self._hook_s)

    def _record_disabled(self, program: Program, pl: Pipeline, k: int, e: PassEntry, path: str) -> None:
        reason = e.reason if not e.enabled else f"pipeline {pl.name} is disabled"
        rec = self._new_record(
            e.pass_, pl.name, k, path, None, enabled=False, status="disabled", reason=reason or "disabled", user=e.user
        )
        self._hooks("pass_skipped", self._new_run(e.pass_, program, rec, None, None, e.user))

    def _child_path(self, parent: PassRecord, p: Pass) -> str:
        # Counted as children are made (a count over the parent's children per child was the
        # number of children squared: thousands under one pass over 255 submodules).
        key = (id(parent), p.name)
        n = self._child_counts.get(key)
        if n is None:
            n = sum(1 for i in parent.children if self._trace.records[i].name == p.name)
        n += 1
        self._child_counts[key] = n
        return f"{parent.path}/{p.name}" + (f"#{n}" if n > 1 else "")

    def _run(
        self,
        p: Pass,
        program: Program,
        *,
        parent: PassRecord | None,
        scope: Module | None,
        pipeline: str = "",
        entry: int | None = None,
        path: str | None = None,
        user: bool = False,
    ) -> bool:
        if parent is not None:
            pipeline, path = parent.pipeline, self._child_path(parent, p)
        rec = self._new_record(p, pipeline, entry, path or p.name, parent, user=user)
        run = self._new_run(p, program, rec, scope, parent, user)
        self._hooks("before_pass", run)
        try:
            with _replacements_into(program, rec):
                run.reported = self._apply(run)
        except PassFailed as e:
            rec.status, rec.reason, run.nested_failure = "failed", f"nested pass {e.record.path} failed", True
            self._hooks("after_pass_failed", run)
            raise
        except Exception as e:  # noqa: BLE001 - any failure inside a pass is reported with its name
            self._fail(run, f"pass {rec.path} raised {type(e).__name__}: {e}", exc=e)
        try:
            self._hooks("after_pass", run)
        except PassCheckFailed as e:
            self._fail(run, str(e))
        return rec.changed

    def _context(self, run: PassRun, module: Module | None) -> PassContext:
        """What the pass recorded as `run.record` gets: nested passes become its children."""

        def run_nested(p: Pass) -> bool:
            return self._run(p, run.program, parent=run.record, scope=module)

        return PassContext(run.program, module, run_nested, run.rewriter)

    def _apply(self, run: PassRun) -> bool | None:
        p, program, scope = run.pass_, run.program, run.scope
        if scope is not None:
            if p.walks_modules():
                return p.apply_module(scope, self._context(run, scope))
            return p.apply_program(program, self._context(run, None))
        results = []
        if p.walks_modules():
            # Submodules first, root last (MIGraphX's run_passes order); bypass modules skipped.
            for m in reversed(program.get_modules()):
                if m.bypass or program.modules.get(m.name) is not m:
                    continue
                results.append(p.apply_module(m, self._context(run, m)))
        if p.has_program_step():
            results.append(p.apply_program(program, self._context(run, None)))
        if any(r is None for r in results):
            return None
        return any(results)

    def _fail(self, run: PassRun, msg: str, exc: BaseException | None = None) -> None:
        rec, tr = run.record, self._trace
        rec.status, rec.reason = "failed", msg
        tr.error, tr.failed_index = msg, rec.index
        root = rec
        while root.parent is not None:
            root = tr.records[root.parent]
        # Back to the state before the top-level pass that failed (the last good snapshot).
        restore(run.program, root.before if root.before is not None else rec.before)
        self._hooks("after_pass_failed", run)
        raise PassFailed(msg, tr, rec) from exc


@contextmanager
def _replacements_into(program: Program, rec: PassRecord) -> Iterator[None]:
    """While a pass runs, its claims "new computes old's value" go into `rec.replacements` (and
    then into the enclosing pass's), and the IR it creates gets a fresh epoch."""
    saved_epoch = program._epoch
    program.begin_epoch()
    outer_log, program.replacement_log = program.replacement_log, rec.replacements
    try:
        yield
    finally:
        program._epoch = saved_epoch
        program.replacement_log = outer_log
        if outer_log is not None:
            outer_log.extend(rec.replacements)


def restore(program: Program, snap: ProgramSnapshot) -> None:
    """Put `program` back into the state of `snap` (in place, keeping the object identity)."""
    q = snap.to_program()
    program.modules = q.modules
    for m in program.modules.values():
        m.program = program
    program._next_id = max(program._next_id, q._next_id)
    # Every module is new: the next snapshot must read them all, not update the last one.
    program._snap_last = None
    program._snap_dirty = set(program.modules.values())


def entry_path(pipeline: str, name: str, occurrence: int, total: int) -> str:
    """`fusion.fuse_pointwise_reduce`, or `required.dead_code_elimination#3` for repeated names."""
    return f"{pipeline}.{name}" + (f"#{occurrence}" if total > 1 else "")


def entry_paths(pl: Pipeline) -> list[str]:
    counts: dict[str, int] = {}
    for e in pl.entries:
        counts[e.name] = counts.get(e.name, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for e in pl.entries:
        seen[e.name] = seen.get(e.name, 0) + 1
        out.append(entry_path(pl.name, e.name, seen[e.name], counts[e.name]))
    return out


def run_passes(program: Program, passes: Sequence[Pass], **kw: Any) -> Trace:
    """Convenience: run a flat list of passes with instrumentation (used by tests)."""
    return PassManager(**kw).run(program, list(passes))
