"""What the pass manager records and checks around each pass, as instrumentations with MLIR's
hooks (`PassInstrumentation`: runBeforePass / runAfterPass / runAfterPassFailed).

The manager calls every instrumentation's `before_pass` in list order and its `after_pass`,
`after_pass_failed` and `pass_skipped` in reverse order, so each one sees the pass nested inside
those listed after it. The standard list (`PassManager.instrumentations`) is

    RecordCallback, *the user's, NumericChecks, Validation, MatchRecording, Snapshots, Timing

Timing is innermost, so it times the pass alone; Snapshots comes next, so the after snapshot and
the diff exist when Validation and NumericChecks read them; the callback is outermost and sees the
finished record. A new per-pass figure is one subclass that writes into `run.record.figures`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import MigxError, ValidationError
from ..pattern_rewriter import PatternRewriter
from ..snapshot import diff, snapshot, snapshot_module
from .base import Pass
from .trace import PassRecord, Trace

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Module, Program


@dataclass
class PassRun:
    """One execution of a pass, as the instrumentations see it."""

    pass_: Pass
    program: Program
    record: PassRecord
    scope: Module | None  # the one module a nested pass was handed (None: the whole program)
    parent: PassRecord | None
    user: bool  # inserted by the user: its change report is not trusted
    hook_seconds: Callable[[], float]  # time spent in instrumentation so far (Timing leaves it out)
    reported: bool | None = None  # what the pass returned: changed, unchanged, or None (did not say)
    nested_failure: bool = False  # set with a failure that a nested pass raised
    rewriter: PatternRewriter = field(default_factory=PatternRewriter)  # what the pass applies rules with

    @property
    def untrusted(self) -> bool:
        """Whether the IR must be re-read and validated in full: unless the pass says it changed
        nothing, a buggy pass may have mutated instructions without going through the Module API
        (so version counters lie). A user's pass is always re-read and validated: its report is
        not trusted, and an illegal mutation must be blamed on it, not on the next built-in pass
        that trips over it."""
        return self.reported is not False or self.user

    @property
    def module_scope(self) -> Module | None:
        """The one module the pass ran on, or None when it ran on the program."""
        return self.scope if self.scope is not None and self.pass_.walks_modules() else None


class PassCheckFailed(MigxError):
    """Raised by an `after_pass` hook to fail the pass with this message: the manager restores the
    program to the last good snapshot and raises PassFailed."""


class PassInstrumentation:
    """Hooks around every pass the manager runs, nested passes included. Each does nothing here."""

    def begin(self, trace: Trace) -> None:
        """A `PassManager.run` starts, appending to `trace`."""

    def before_pass(self, run: PassRun) -> None:
        pass

    def after_pass(self, run: PassRun) -> None:
        """The pass returned; raise PassCheckFailed to fail it."""

    def after_pass_failed(self, run: PassRun) -> None:
        """The pass (or a nested pass, `run.nested_failure`, or a check after it) failed;
        `run.record.reason` says why. The program is already restored."""

    def pass_skipped(self, run: PassRun) -> None:
        """A disabled entry (or an entry of a disabled pipeline) was passed over."""


class Timing(PassInstrumentation):
    """`record.time_s`: the pass's wall time, less the time spent instrumenting its nested passes."""

    def __init__(self) -> None:
        self._started: dict[int, tuple[float, float]] = {}

    def before_pass(self, run: PassRun) -> None:
        self._started[run.record.index] = (time.perf_counter(), run.hook_seconds())

    def after_pass(self, run: PassRun) -> None:
        t0, hooks0 = self._started.pop(run.record.index)
        run.record.time_s = max(time.perf_counter() - t0 - (run.hook_seconds() - hooks0), 0.0)

    def after_pass_failed(self, run: PassRun) -> None:
        if run.record.index in self._started:
            self.after_pass(run)


class Snapshots(PassInstrumentation):
    """`record.before`, `record.after` and `record.diff`; fails a pass that reported no change
    but changed the IR.

    `trust_versions`: after a built-in top-level pass, read only the modules whose version
    counters moved instead of re-reading every instruction of the program (the re-read catches a
    pass that mutated instructions behind the Module API). A plain compile (gpu.compile, no
    per-pass validation) trusts them, as it trusts the passes to leave valid modules; a nested
    pass given one module still re-reads it, since its diff says whether a fixpoint loop goes on."""

    def __init__(self, trust_versions: bool = False) -> None:
        self.trust_versions = trust_versions

    def before_pass(self, run: PassRun) -> None:
        run.record.before = snapshot(run.program)

    def after_pass(self, run: PassRun) -> None:
        rec, program, scope = run.record, run.program, run.module_scope
        if self.trust_versions and scope is None and run.scope is None and not run.user:
            rec.after = snapshot(program)
        elif scope is not None and run.untrusted and not run.user:
            # A nested pass given one module (optimize_module's, per module) re-reads that module
            # only: re-reading and re-validating every module after each of them cost the module
            # count squared. Anything it did elsewhere is still caught by its top-level pass's
            # full check.
            snapshot_module(scope, fresh=True)
            rec.after = snapshot(program)
        else:
            rec.after = snapshot(program, fresh=run.untrusted)
        rec.diff = diff(rec.before, rec.after)
        if run.reported is False and rec.changed:
            raise PassCheckFailed(f"pass {rec.path} reported no change but changed the IR ({rec.diff.summary()})")

    def after_pass_failed(self, run: PassRun) -> None:
        run.record.after = None

    def pass_skipped(self, run: PassRun) -> None:
        snap = snapshot(run.program)
        run.record.before = run.record.after = snap
        run.record.diff = diff(snap, snap)


class MatchRecording(PassInstrumentation):
    """`record.matches`: every rewrite-rule application, recorded by the rewriter the pass's
    context hands it (`rewriter_of(ctx)`)."""

    def before_pass(self, run: PassRun) -> None:
        run.rewriter = PatternRewriter(run.record.matches)


class Validation(PassInstrumentation):
    """`Module.validate()` on the modules a pass changed (all of them after an untrusted pass);
    an invalid module fails the pass, naming the instruction, with `record.validation` set."""

    def begin(self, trace: Trace) -> None:
        self._validated: dict[int, int] = {}

    def after_pass(self, run: PassRun) -> None:
        rec = run.record
        if not (rec.changed or run.untrusted):
            return
        full, only = run.untrusted, run.module_scope
        for m in run.program.get_modules() if only is None else [only]:
            key = id(m)
            if not full and self._validated.get(key) == m.version:
                continue
            stamp = _validation_stamp(m)
            if full and not run.user and _same_stamp(m.__dict__.get("_validated_stamp"), stamp):
                # Re-read fresh after this pass and found as it was when it last passed
                # validation (its submodules too): validating it again would repeat the same
                # shape rules, most of a decode step's trace time over 255 submodules. (A user's
                # pass is always validated in full.)
                self._validated[key] = m.version
                continue
            try:
                m.validate(submodule_stamp=snapshot_module)  # Snapshots.after_pass re-read them first
            except ValidationError as e:
                rec.validation = str(e)
                raise PassCheckFailed(f"pass {rec.path} left an invalid module: {e}") from None
            self._validated[key] = m.version
            m.__dict__["_validated_stamp"] = stamp


def _validation_stamp(m: Module) -> tuple:
    """What a module's validation depends on: its snapshot (as last read) and its submodules'."""
    return (m.version, snapshot_module(m), *(snapshot_module(sm) for sm in m.sub_modules()))


def _same_stamp(a: tuple | None, b: tuple) -> bool:
    return a is not None and len(a) == len(b) and a[0] == b[0] and all(x is y for x, y in zip(a[1:], b[1:]))


class RecordCallback(PassInstrumentation):
    """Hands each finished record to `on_record` (the explorer's progress): passes that ran or
    failed themselves, and disabled entries."""

    def __init__(self, on_record: Callable[[PassRecord], None]):
        self.on_record = on_record

    def after_pass(self, run: PassRun) -> None:
        self.on_record(run.record)

    def after_pass_failed(self, run: PassRun) -> None:
        if not run.nested_failure:
            self.on_record(run.record)

    def pass_skipped(self, run: PassRun) -> None:
        self.on_record(run.record)
