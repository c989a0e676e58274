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
    PassFailed,
    PassManager,
    PassRecord,
    Pipeline,
    Trace,
    check_order,
    entry_paths,
    make_numeric_config,
    spec_from_pipelines,
)
from .compiler.passes.rewrite import RewritePass as RulePass  # noqa: F401  (RulePass: the old name)
from .compiler.passes.rewrite import as_pass
from .compiler.rewrite import Rule
from .compiler.snapshot import ProgramSnapshot, SnapshotDiff, snapshot
from .gpu.pipelines import CompileOptions, gpu_pipelines
from .stats import launch_count


class SessionError(MigxError):
    pass


@dataclass
class _Step:
    key: tuple
    records: list[PassRecord]
    after: ProgramSnapshot


@dataclass
class View:
    nested: bool = False  # step into children of composite passes
    hide_unchanged: bool = False  # skip no-op and disabled passes when stepping
    filter: str = ""  # only passes whose path contains this text


@dataclass
class RetraceInfo:
    reused: int = 0  # top-level entries served from the cache
    ran: int = 0  # top-level entries executed
    first_run: str | None = None  # path of the first entry re-run


class Session:
    def __init__(self, program: Program, *, name: str = "program", options: CompileOptions | None = None,
                 include_backend: bool = True, numeric: bool = True, inputs: dict | None = None,
                 validate: bool = True, precision: str | None = None, calibration: Sequence[dict] = ()):
        self.name = name
        self.options = options or CompileOptions()
        if precision is not None or calibration:  # the quantize stage (fp16/bf16/int8/fp8) runs first
            self.options = dataclasses.replace(self.options, precision=precision or self.options.precision,
                                               calibration=tuple(calibration) or self.options.calibration)
        self.initial: ProgramSnapshot = snapshot(program)
        self.catalog = gpu_pipelines(self.options, include_backend=include_backend)
        self.pipelines: list[Pipeline] = [p.copy() for p in self.catalog]
        self.validate = validate
        self._numeric_enabled = numeric
        self._numeric_inputs = inputs
        self._numeric_base: NumericConfig | None = None
        self._cache: list[_Step] = []
        self._trace: Trace | None = None
        self.error: str | None = None
        self.position = 0
        self.view = View()
        self.last_retrace = RetraceInfo()
        self.timings: dict[str, Any] = {}
        # Where the model came from (for repro scripts); set by the from_* constructors.
        self.source: dict[str, Any] = {"kind": "program", "value": name, "input_dims": {}}
        self.on_progress: Callable[[int, int, str], None] | None = None

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

    # ---- the trace ---------------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        if self._trace is None:
            self._retrace()
        return self._trace

    def run(self) -> Trace:
        """Trace now (re-running only what toggles invalidated) and return the trace."""
        return self.trace

    @property
    def records(self) -> list[PassRecord]:
        return self.trace.records

    def set_inputs(self, inputs: dict | None) -> None:
        """Use these inputs (None: random ones that respect the model) for the numeric checks."""
        self._numeric_inputs = None if inputs is None else dict(inputs)
        self._numeric_base = None
        self.invalidate()

    def _numeric(self) -> NumericConfig | None:
        if not self._numeric_enabled:
            return None
        if self._numeric_base is None:
            self._numeric_base = make_numeric_config(self.initial.to_program(), self._numeric_inputs)
        return dataclasses.replace(self._numeric_base, disabled_reason="")

    def _flat(self) -> list[tuple[int, int, str, tuple]]:
        out, prefix = [], ()
        for pi, pl in enumerate(self.pipelines):
            for k, (e, path) in enumerate(zip(pl.entries, entry_paths(pl))):
                opts = tuple(sorted((n, repr(v)) for n, v in e.pass_.options().items()))
                ident = id(e.pass_) if e.user else type(e.pass_).__name__
                prefix = prefix + ((pl.name, pl.enabled, path, e.enabled, opts, ident),)
                out.append((pi, k, path, prefix))
        return out

    def _retrace(self) -> None:
        flat = self._flat()
        keep = 0
        while keep < min(len(flat), len(self._cache)) and self._cache[keep].key == flat[keep][3]:
            keep += 1
        self._cache = self._cache[:keep]
        trace = Trace(self.initial)
        for st in self._cache:
            trace.records.extend(st.records)
        start_snap = self._cache[-1].after if self._cache else self.initial
        self.last_retrace = RetraceInfo(keep, len(flat) - keep, flat[keep][2] if keep < len(flat) else None)
        self.error = None
        if keep < len(flat):
            program = start_snap.to_program()
            order = {f[2]: k for k, f in enumerate(flat)}

            def progress(rec: PassRecord) -> None:
                if rec.depth == 0 and self.on_progress:
                    self.on_progress(order.get(rec.path, 0) + 1, len(flat), rec.path)

            pm = PassManager(validate=self.validate, numeric=self._numeric(), on_record=progress)
            try:
                trace = pm.run(program, self.pipelines, trace=trace, start=flat[keep][:2])
            except PassFailed as e:
                trace = e.trace
                self.error = str(e)
            self._store_steps(trace, flat, keep)
        self._trace = trace
        self.position = min(self.position, max(len(trace.records) - 1, 0))

    def _store_steps(self, trace: Trace, flat, keep: int) -> None:
        tops = [r for r in trace.records[sum(len(s.records) for s in self._cache):] if r.depth == 0]
        for j, top in enumerate(tops):
            if top.status == "failed":
                break
            nxt = tops[j + 1].index if j + 1 < len(tops) else len(trace.records)
            self._cache.append(_Step(flat[keep + j][3], trace.records[top.index:nxt], top.after))

    def invalidate(self) -> None:
        """Forget cached results (e.g. after changing numeric settings)."""
        self._cache.clear()
        self._trace = None

    # ---- navigation ------------------------------------------------------------------------------
    def visible(self) -> list[int]:
        v = self.view
        out = []
        for r in self.trace.records:
            if r.depth > 0 and not v.nested:
                continue
            if v.hide_unchanged and not r.changed and r.status != "failed":
                continue
            if v.filter and v.filter not in r.path:
                continue
            out.append(r.index)
        return out

    @property
    def current(self) -> PassRecord:
        recs = self.trace.records
        if not recs:
            raise SessionError("the pipeline is empty")
        return recs[self.position]

    def _move(self, delta: int) -> PassRecord:
        vis = self.visible()
        if not vis:
            return self.current
        after = [i for i in vis if i > self.position] if delta > 0 else [i for i in vis if i < self.position][::-1]
        if after:
            self.position = after[min(abs(delta), len(after)) - 1]
        return self.current

    def step(self, n: int = 1) -> PassRecord:
        return self._move(n)

    def back(self, n: int = 1) -> PassRecord:
        return self._move(-n)

    def first(self) -> PassRecord:
        vis = self.visible()
        self.position = vis[0] if vis else 0
        return self.current

    def last(self) -> PassRecord:
        vis = self.visible()
        self.position = vis[-1] if vis else 0
        return self.current

    def goto(self, where: str | int) -> PassRecord:
        if isinstance(where, int):
            if not 0 <= where < len(self.trace.records):
                raise SessionError(f"position {where} is out of range 0..{len(self.trace.records) - 1}")
            self.position = where
        else:
            try:
                self.position = self.trace.find(where).index
            except KeyError:
                raise SessionError(f"no pass {where!r} in the trace; e.g. "
                                   f"{', '.join(r.path for r in self.trace.top_level()[:4])}") from None
        return self.current

    # ---- what the current pass did -----------------------------------------------------------------
    def snapshots(self, index: int | None = None) -> tuple[ProgramSnapshot, ProgramSnapshot]:
        """(before, after) of a record (default: the current one). A disabled or failed pass has no
        after snapshot: it left the IR as it was."""
        r = self.current if index is None else self.trace.records[index]
        before = r.before or self.initial
        return before, (r.after if r.after is not None else before)

    def before(self) -> ProgramSnapshot:
        return self.snapshots()[0]

    def after(self) -> ProgramSnapshot:
        return self.snapshots()[1]

    def diff(self) -> SnapshotDiff:
        from .compiler.snapshot import diff

        r = self.current
        return r.diff if r.diff is not None else diff(self.before(), self.after())

    def text_diff(self, context: int = 3) -> str:
        from .render import text_diff

        return text_diff(self.before(), self.after(), context=context)

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
            "matches": len(r.matches),
        }

    def final(self) -> ProgramSnapshot:
        return self.trace.final

    # ---- toggles ------------------------------------------------------------------------------------
    def _resolve(self, target: str) -> list[tuple[Pipeline, PassEntry]]:
        hits = []
        for pl in self.pipelines:
            if target == pl.name:
                return [(pl, e) for e in pl.entries]
            for e, path in zip(pl.entries, entry_paths(pl)):
                base = path.split("#")[0]
                if target in (path, e.name) or (target == base and "#" not in target):
                    hits.append((pl, e))
        if not hits:
            names = sorted({e.name for pl in self.pipelines for e in pl.entries})
            raise SessionError(f"no pass or pipeline {target!r}; pipelines: "
                               f"{', '.join(p.name for p in self.pipelines)}; passes: {', '.join(names)}")
        return hits

    def set_enabled(self, target: str, enabled: bool, reason: str = "") -> list[str]:
        """Enable/disable a pass everywhere (`fuse_horizontal`), at one position
        (`required.dead_code_elimination#3`) or a whole pipeline (`optimize_rewrite`)."""
        pl_names = {p.name for p in self.pipelines}
        if target in pl_names:
            pl = next(p for p in self.pipelines if p.name == target)
            pl.enabled = enabled
            self._trace = None
            return [pl.name]
        changed = []
        for _, e in self._resolve(target):
            if e.enabled != enabled:
                e.enabled = enabled
                e.reason = "" if enabled else (reason or "disabled by the user")
                changed.append(e.name)
        self._trace = None
        return changed

    def disable(self, target: str, reason: str = "") -> list[str]:
        return self.set_enabled(target, False, reason)

    def enable(self, target: str) -> list[str]:
        return self.set_enabled(target, True)

    def set_mode(self, mode: str) -> None:
        """eager skips optimize_rewrite (MIGraphX compile-modes); balanced runs everything."""
        self.options = dataclasses.replace(self.options, mode=mode)
        for pl in self.pipelines:
            if pl.name == "optimize_rewrite":
                pl.enabled = mode != "eager"
        self._trace = None

    def set_options(self, target: str, **options: Any) -> None:
        for _, e in self._resolve(target):
            e.pass_ = e.pass_.with_options(**options)
        self._trace = None

    def insert_pass(self, p: Pass | Rule | Sequence[Rule] | Callable, *, after: str | None = None,
                    before: str | None = None, name: str | None = None) -> str:
        """Insert a user pass (a Pass, matcher Rule(s) or function) after/before a position."""
        if (after is None) == (before is None):
            raise SessionError("insert_pass needs exactly one of after= or before=")
        where = after or before
        pl, e = self._one(where)
        entry = PassEntry(as_pass(p, name), user=True)
        k = pl.entries.index(e) + (1 if after else 0)
        pl.entries.insert(k, entry)
        self._trace = None
        return entry_paths(pl)[k]

    def remove_pass(self, target: str) -> None:
        pl, e = self._one(target)
        pl.entries.remove(e)
        self._trace = None

    def move_pass(self, target: str, *, after: str | None = None, before: str | None = None) -> str:
        """Move one entry (ordering lessons); ordering-rule warnings tell what it breaks."""
        pl, e = self._one(target)
        pl.entries.remove(e)
        dst_pl, dst = self._one(after or before)
        k = dst_pl.entries.index(dst) + (1 if after else 0)
        dst_pl.entries.insert(k, e)
        self._trace = None
        return entry_paths(dst_pl)[k]

    def _one(self, target: str) -> tuple[Pipeline, PassEntry]:
        hits = self._resolve(target)
        if len(hits) != 1:
            paths = [p for pl in self.pipelines for p, e in zip(entry_paths(pl), pl.entries)
                     if any(e is h for _, h in hits)]
            raise SessionError(f"{target!r} names {len(hits)} entries; pick one of {', '.join(paths[:8])}")
        return hits[0]

    def reset(self) -> None:
        self.pipelines = [p.copy() for p in self.catalog]
        self._trace = None

    def warnings(self) -> list[str]:
        return [str(w) for w in check_order(self.pipelines)]

    def spec(self) -> str:
        return spec_from_pipelines(self.pipelines, self.catalog)

    def entries(self) -> Iterable[tuple[str, PassEntry, Pipeline]]:
        for pl in self.pipelines:
            for e, path in zip(pl.entries, entry_paths(pl)):
                yield path, e, pl

    # ---- GPU ------------------------------------------------------------------------------------------
    def time(self, modes: Sequence[str] = ("eager", "graph"), warmup: int = 10, iters: int = 100) -> Any:
        """Compile the final program for the GPU and time it in each mode (results kept in .timings)."""
        from .gpu_bridge import time_snapshot

        result = time_snapshot(self.final(), modes=modes, warmup=warmup, iters=iters)
        self.timings[self.spec_or_label()] = result
        return result

    # ---- beyond stepping: bisect and waterfall ------------------------------------------------------
    def bisect(self, inputs: dict | None = None):
        """The first pass that breaks the numeric check, and the first diverging replacement inside
        it (None when every pass keeps the outputs). See migx_explore.bisect."""
        from .bisect import numeric_bisect

        return numeric_bisect(self, inputs)

    def verify(self, inputs: dict | None = None, **kw: Any):
        """Numeric check after every pass (MIGraphX's relative RMS, or rtol=/atol= allclose) on
        `inputs` (default: the session's, else random ones that respect the model); returns a
        VerifyReport. See migx_explore.verification."""
        from .verification import verify_session

        return verify_session(self, self._numeric_inputs if inputs is None else inputs, **kw)

    def perf_bisect(self, toggles: dict[str, bool], measure: Callable[[Session], float], **kw: Any):
        """Minimal subset of `toggles` (pass path -> enabled in the bad configuration) that makes
        `measure(session)` regress; the session's own configuration is the good one."""
        from .bisect import perf_bisect

        return perf_bisect(self, toggles, measure, **kw)

    def waterfall(self, by: str = "pass", **kw: Any):
        """Δ launches and Δ eager/graph latency with each pass / sub-pipeline disabled."""
        from .waterfall import waterfall

        return waterfall(self, by=by, **kw)

    def recipe(self):
        """The current toggles as a pipeline spec, a MIGRAPHX_DISABLE_PASSES list and a repro script."""
        from .recipe import make_recipe

        return make_recipe(self)

    def spec_or_label(self) -> str:
        try:
            return self.spec()
        except MigxError:
            return "custom pipeline"

    def __repr__(self) -> str:
        n = len(self._trace.records) if self._trace else "untraced"
        return f"<Session {self.name}: {n} records, at {self.position}>"


__all__ = ["RetraceInfo", "RulePass", "Session", "SessionError", "View", "as_pass"]
