"""The pass manager: runs pipelines, instruments every pass (nested ones too), validates, checks
numerics, honours toggles.

For each pass it records a snapshot, a structural diff keyed by stable ids, wall time (excluding
the manager's own instrumentation of nested passes), whether anything changed, the validation
result and, optionally, the numeric error against the first snapshot. An invalid module or a
failing pass stops the run with `PassFailed` naming the pass and instruction; the program is
restored to the last good snapshot, which the trace keeps.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MigxError, ValidationError
from ..inputs import REAL_INPUTS_HINT
from ..ir import Module, Program
from ..pattern_rewriter import PatternRewriter
from ..snapshot import ProgramSnapshot, diff, snapshot, snapshot_module
from ..verify import Tolerance, check_outputs, program_compute_type
from .base import Pass, PassContext, PassEntry, Pipeline
from .trace import NumericCheck, PassRecord, Trace


class PassFailed(MigxError):
    def __init__(self, message: str, trace: Trace, record: PassRecord):
        super().__init__(message)
        self.trace = trace
        self.record = record


@dataclass
class NumericConfig:
    """Inputs, reference outputs and tolerance of the per-pass numeric check. With rtol/atol unset
    the check is MIGraphX's relative RMS with a per-type threshold (`rms` overrides it); setting
    either selects elementwise allclose (compiler/verify.py)."""

    inputs: dict[str, np.ndarray]
    reference: list[np.ndarray]
    rtol: float | None = None
    atol: float | None = None
    nested: bool = False  # also check nested passes (slower)
    disabled_reason: str = ""
    rms: float | None = None
    random_inputs: bool = False  # the inputs were generated (errors then say how to pass real ones)
    # The program the reference outputs came from (discontinuous ops re-run it on a candidate's
    # near-tie choice, compiler/discontinuous.py) and a cache of its values shared by the copies
    # dataclasses.replace makes.
    reference_program: ProgramSnapshot | None = None
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def tolerance(self) -> Tolerance:
        return Tolerance(rms=self.rms, rtol=self.rtol, atol=self.atol)


class PassManager:
    def __init__(
        self,
        *,
        validate: bool = True,
        numeric: NumericConfig | None = None,
        on_record: Callable[[PassRecord], None] | None = None,
    ):
        self.validate = validate
        self.numeric = numeric
        self.on_record = on_record
        self._trace: Trace | None = None
        self._validated: dict[int, int] = {}
        self._child_counts: dict[tuple[int, str], int] = {}
        self._instrument_s = 0.0

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
        self._validated = {}
        for pi, pl in enumerate(pipelines):
            counts = _name_counts(pl.entries)
            seen: dict[str, int] = {}
            for k, e in enumerate(pl.entries):
                seen[e.name] = seen.get(e.name, 0) + 1
                if (pi, k) < start:
                    continue
                if stop is not None and (pi, k) >= stop:
                    return self._trace
                path = entry_path(pl.name, e.name, seen[e.name], counts[e.name])
                if not (pl.enabled and e.enabled):
                    self._record_disabled(program, pl, k, e, path)
                    continue
                self._run(e.pass_, program, parent=None, scope=None, pipeline=pl.name, entry=k, path=path, user=e.user)
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

    def _record_disabled(self, program: Program, pl: Pipeline, k: int, e: PassEntry, path: str) -> None:
        snap = snapshot(program)
        reason = e.reason if not e.enabled else f"pipeline {pl.name} is disabled"
        rec = self._new_record(
            e.pass_, pl.name, k, path, None, enabled=False, status="disabled", reason=reason or "disabled", user=e.user
        )
        rec.before = rec.after = snap
        rec.diff = diff(snap, snap)
        if self.on_record:
            self.on_record(rec)

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
        t_start = time.perf_counter()
        before = snapshot(program)
        if parent is not None:
            pipeline = parent.pipeline
            path = self._child_path(parent, p)
        rec = self._new_record(p, pipeline, entry, path or p.name, parent, user=user)
        rec.before = before
        saved_epoch = program._epoch
        program.begin_epoch()
        outer_log, program.replacement_log = program.replacement_log, rec.replacements
        self._instrument_s += time.perf_counter() - t_start
        instr_at_start = self._instrument_s
        t0 = time.perf_counter()
        reported: bool | None = None
        try:
            reported = self._apply(p, program, rec, scope)
        except PassFailed as e:
            rec.status = "failed"
            rec.reason = f"nested pass {e.record.path} failed"
            rec.time_s = time.perf_counter() - t0
            raise
        except Exception as e:  # noqa: BLE001 - any failure inside a pass is reported with its name
            elapsed = time.perf_counter() - t0
            msg = f"pass {rec.path} raised {type(e).__name__}: {e}"
            self._fail(program, rec, msg, before, elapsed, exc=e)
        finally:
            program._epoch = saved_epoch
            program.replacement_log = outer_log
            if outer_log is not None:
                outer_log.extend(rec.replacements)
        elapsed = time.perf_counter() - t0 - (self._instrument_s - instr_at_start)
        t_after = time.perf_counter()
        # Unless the pass says it changed nothing, re-read every instruction: a buggy pass may have
        # mutated instructions without going through the Module API (so version counters lie). A
        # user's pass is always re-read and validated: its report is not trusted, and an illegal
        # mutation must be blamed on it, not on the next built-in pass that trips over it.
        suspicious = reported is not False or user
        scope = scope if scope is not None and p.walks_modules() else None  # else it ran on the program
        if scope is not None and suspicious and not user:
            # A nested pass given one module (optimize_module's, per module) re-reads that module
            # only: re-reading and re-validating every module after each of them cost the module
            # count squared (255 submodules of a decode step over a length range). Anything it
            # did elsewhere is still caught by its top-level pass's full check.
            snapshot_module(scope, fresh=True)
            after = snapshot(program)
        else:
            after = snapshot(program, fresh=suspicious)
        rec.after = after
        rec.diff = diff(before, after)
        rec.time_s = max(elapsed, 0.0)
        if reported is False and rec.changed:
            self._fail(
                program,
                rec,
                f"pass {rec.path} reported no change but changed the IR ({rec.diff.summary()})",
                before,
                elapsed,
            )
        if self.validate and (rec.changed or suspicious):
            self._validate(program, rec, before, elapsed, full=suspicious, only=scope)
        if self.numeric is not None and rec.changed and (parent is None or self.numeric.nested):
            rec.numeric = self._numeric_check(program)
        if self.on_record:
            self.on_record(rec)
        self._instrument_s += time.perf_counter() - t_after
        return rec.changed

    def _context(self, program: Program, rec: PassRecord, module: Module | None) -> PassContext:
        """What the pass recorded as `rec` gets: nested passes become children of `rec`, and its
        rewriter records every rule application into `rec.matches`."""

        def run_nested(p: Pass) -> bool:
            return self._run(p, program, parent=rec, scope=module)

        return PassContext(program, module, run_nested, PatternRewriter(rec.matches))

    def _apply(self, p: Pass, program: Program, rec: PassRecord, scope: Module | None) -> bool | None:
        if scope is not None:
            if p.walks_modules():
                return p.apply_module(scope, self._context(program, rec, scope))
            return p.apply_program(program, self._context(program, rec, None))
        results = []
        if p.walks_modules():
            # Submodules first, root last (MIGraphX's run_passes order); bypass modules skipped.
            for m in reversed(program.get_modules()):
                if m.bypass or program.modules.get(m.name) is not m:
                    continue
                results.append(p.apply_module(m, self._context(program, rec, m)))
        if p.has_program_step():
            results.append(p.apply_program(program, self._context(program, rec, None)))
        if any(r is None for r in results):
            return None
        return any(results)

    def _validate(
        self,
        program: Program,
        rec: PassRecord,
        before: ProgramSnapshot,
        elapsed: float,
        full: bool = False,
        only: Module | None = None,
    ) -> None:
        for m in program.get_modules() if only is None else [only]:
            key = id(m)
            if not full and self._validated.get(key) == m.version:
                continue
            stamp = _validation_stamp(m)
            if full and not rec.user and _same_stamp(m.__dict__.get("_validated_stamp"), stamp):
                # Re-read fresh after this pass and found as it was when it last passed
                # validation (its submodules too): validating it again would repeat the same
                # shape rules. After each top-level pass that re-validated every module of a
                # decode step split into 255 submodules, most of the trace's time. (A user's
                # pass is always validated in full.)
                self._validated[key] = m.version
                continue
            try:
                m.validate()
            except ValidationError as e:
                rec.validation = str(e)
                self._fail(program, rec, f"pass {rec.path} left an invalid module: {e}", before, elapsed)
            self._validated[key] = m.version
            m.__dict__["_validated_stamp"] = stamp

    def _fail(
        self,
        program: Program,
        rec: PassRecord,
        msg: str,
        before: ProgramSnapshot,
        elapsed: float,
        exc: BaseException | None = None,
    ) -> None:
        rec.status = "failed"
        rec.reason = msg
        rec.time_s = elapsed
        rec.after = None
        tr = self._trace
        tr.error = msg
        tr.failed_index = rec.index
        root = rec
        while root.parent is not None:
            root = tr.records[root.parent]
        # Back to the state before the top-level pass that failed (the last good snapshot).
        restore(program, root.before if root.before is not None else before)
        if self.on_record:
            self.on_record(rec)
        err = PassFailed(msg, tr, rec)
        raise err from exc

    def _numeric_check(self, program: Program) -> NumericCheck:
        cfg = self.numeric
        if cfg.disabled_reason:
            return NumericCheck(float("nan"), float("nan"), True, cfg.disabled_reason)
        try:
            outs = reference_evaluator(cfg).evaluate(program)
        except MigxError as e:
            hint = f" (on random inputs: {REAL_INPUTS_HINT})" if cfg.random_inputs else ""
            cfg.disabled_reason = f"unavailable from here on: {e}{hint}"
            return NumericCheck(float("nan"), float("nan"), True, cfg.disabled_reason)
        return compare_program_outputs(program, outs, cfg)


def compare_program_outputs(program: Program, outs: Sequence[np.ndarray], cfg: NumericConfig) -> NumericCheck:
    """`program`'s outputs against the reference under cfg's tolerance. Outputs that differ only
    because a TopK / ArgMax / NMS chose differently among near-ties (inputs within tolerance) pass,
    compared with the reference re-run on that choice, and the check says so in `selection`."""
    compute = program_compute_type(program)
    # Most passes leave the outputs as the check before found them (the incremental evaluator
    # hands back the very arrays): the comparison is then the one made before.
    last = cfg.cache.get("last_compared")
    if last is not None and last[0] == compute and len(last[1]) == len(outs):
        if all(a is b for a, b in zip(last[1], outs)):
            return dataclasses.replace(last[2])
    res = _compare_program_outputs(program, outs, cfg, compute)
    cfg.cache["last_compared"] = (compute, list(outs), res)
    return dataclasses.replace(res)


def _compare_program_outputs(
    program: Program, outs: Sequence[np.ndarray], cfg: NumericConfig, compute: str
) -> NumericCheck:
    res = compare_outputs(outs, cfg.reference, cfg.tolerance, compute=compute)
    if res.ok or res.note or cfg.reference_program is None:
        return res
    from ..discontinuous import explain_selection_change, has_discontinuous_ops, reference_values

    if "reference_program" not in cfg.cache:
        cfg.cache["reference_program"] = cfg.reference_program.to_program()
    reference = cfg.cache["reference_program"]
    if not has_discontinuous_ops(reference):
        return res
    if "reference_values" not in cfg.cache:
        try:
            cfg.cache["reference_values"] = reference_values(reference, cfg.inputs)
        except MigxError:
            return res
    # After a flip, the following passes usually produce the very same outputs: reuse the answer.
    digest = _digest(outs)
    last = cfg.cache.get("last_explained")
    if last is not None and last[0] == digest:
        change = last[1]
    else:
        change = explain_selection_change(
            reference,
            program,
            cfg.inputs,
            outs,
            cfg.tolerance,
            compute=compute,
            ref_values=cfg.cache["reference_values"],
        )
        cfg.cache["last_explained"] = (digest, change)
    if change is None:
        return res
    alt = compare_outputs(outs, change.outputs, cfg.tolerance, compute=compute)
    alt.selection = change.note
    return alt


def _digest(outs: Sequence[np.ndarray]) -> str:
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for o in outs:
        a = np.ascontiguousarray(o)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def compare_outputs(
    outs: Sequence[np.ndarray],
    ref: Sequence[np.ndarray],
    tol: Tolerance | None = None,
    atol: float | None = None,
    *,
    compute: str = "float32",
) -> NumericCheck:
    """Outputs against reference outputs, summarised for the trace: the worst output's figures.
    `compare_outputs(outs, ref, rtol, atol)` (two floats) is the allclose form."""
    if not isinstance(tol, Tolerance):
        tol = Tolerance(rtol=tol, atol=atol) if tol is not None or atol is not None else Tolerance()
    res = check_outputs(outs, ref, tol, compute=compute)
    if not res.outputs:
        return NumericCheck(float("inf"), float("inf"), False, res.note, tolerance=tol.describe(compute))
    k = res.worst
    w = res.outputs[k]
    return NumericCheck(
        max(c.max_abs for c in res.outputs),
        max(c.max_rel for c in res.outputs),
        res.ok,
        w.note,
        rms=w.rms,
        threshold=w.threshold,
        output=k,
        tolerance=tol.describe(compute),
    )


def make_numeric_config(
    program: Program,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    rms: float | None = None,
    nested: bool = False,
) -> NumericConfig:
    """Reference outputs of `program` on `inputs` (default: random inputs that respect the model,
    compiler/inputs.py). An evaluation error on random inputs says so and how to pass real ones."""
    from ..inputs import explain_random_failure, model_inputs
    from ..ref_incremental import IncrementalEvaluator

    generated = inputs is None
    feeds = dict(inputs) if inputs is not None else model_inputs(program, seed)
    evaluator = IncrementalEvaluator(feeds)
    try:
        reference = evaluator.evaluate(program)
    except MigxError as e:
        if generated:
            raise explain_random_failure(e) from None
        raise
    cfg = NumericConfig(
        feeds, reference, rtol, atol, nested, rms=rms, random_inputs=generated, reference_program=snapshot(program)
    )
    cfg.cache["evaluator"] = evaluator  # holds the reference's values: the first check reuses them
    return cfg


def reference_evaluator(cfg: NumericConfig) -> Any:
    """The incremental evaluator of cfg's inputs, shared by its copies (compiler/ref_incremental.py):
    each check re-runs only what the pass changed since the check before."""
    from ..ref_incremental import IncrementalEvaluator

    ev = cfg.cache.get("evaluator")
    if ev is None or ev.inputs is not cfg.inputs:
        ev = cfg.cache["evaluator"] = IncrementalEvaluator(cfg.inputs)
    return ev


def _validation_stamp(m: Module) -> tuple:
    """What a module's validation depends on: its snapshot (as last read) and its submodules'."""
    return (m.version, snapshot_module(m), *(snapshot_module(sm) for sm in m.sub_modules()))


def _same_stamp(a: tuple | None, b: tuple) -> bool:
    return a is not None and len(a) == len(b) and a[0] == b[0] and all(x is y for x, y in zip(a[1:], b[1:]))


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
    counts = _name_counts(pl.entries)
    seen: dict[str, int] = {}
    out = []
    for e in pl.entries:
        seen[e.name] = seen.get(e.name, 0) + 1
        out.append(entry_path(pl.name, e.name, seen[e.name], counts[e.name]))
    return out


def _name_counts(entries: Sequence[PassEntry]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in entries:
        out[e.name] = out.get(e.name, 0) + 1
    return out


def run_passes(program: Program, passes: Sequence[Pass], **kw: Any) -> Trace:
    """Convenience: run a flat list of passes with instrumentation (used by tests)."""
    return PassManager(**kw).run(program, list(passes))
