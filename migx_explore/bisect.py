"""Bisecting: which pass broke the numbers (and at which instruction), and which toggles made a
program slower (or broke graph capture).

Numeric: the trace's per-pass check (compiler/verify.py: MIGraphX's relative RMS per output)
finds the first pass whose outputs leave tolerance; `numeric_bisect` descends into its nested
passes to the innermost one that already breaks it, and `locate_divergence` evaluates every value
before and after that pass on the same inputs. Each value of the new program is compared only
with the value it claims to equal: the instruction it replaced (the pass's recorded
`replace_all_uses` claims, followed through chains of replacements inside the pass) or, for an
instruction kept or changed in place, itself. Instructions a rewrite created with a new meaning
(the bias-free half of a folded batch norm, the weights of a fused conv) claim nothing and are
not compared. A suspect is confirmed by re-running it on the *reference* values of its inputs, so
error that merely flows in from upstream never makes a culprit. The report names the first
diverging replacement and the rule that made it.

Performance: `ddmin` is Zeller's delta debugging over the set of toggles that differ between a
good and a bad configuration; `perf_bisect` wires it to a Session and any measure (GPU latency,
kernel count, "graph capture fails").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Replacement
from migx_explore.compiler.ref import evaluate_all
from migx_explore.compiler.snapshot import ProgramSnapshot
from migx_explore.compiler.verify import Tolerance, check_value, program_compute_type


@dataclass
class Divergence:
    pass_path: str
    instruction_id: int | None
    label: str
    counterpart_id: int | None
    max_abs: float
    note: str = ""
    rule: str = ""  # the matcher rule that made the replacement ("" outside rules / in place)
    counterpart_label: str = ""
    rms: float = math.nan
    threshold: float = math.nan

    @property
    def replaced(self) -> bool:
        return self.counterpart_id is not None and self.counterpart_id != self.instruction_id

    def describe(self) -> str:
        if self.instruction_id is None:
            return f"pass {self.pass_path}: no single diverging instruction found ({self.note})"
        if self.replaced:
            old = self.counterpart_label or f"#{self.counterpart_id}"
            what = f"first diverging replacement: {self.label} replaced {old}" + (
                f" (rule {self.rule})" if self.rule else ""
            )
        else:
            how = f"by rule {self.rule}" if self.rule else "in place"
            what = f"first diverging instruction: {self.label} (changed {how})"
        fig = f"max|err| {self.max_abs:.3e}"
        if not math.isnan(self.threshold):
            fig = f"rms {self.rms:.3e} (threshold {self.threshold:.3e}), " + fig
        return f"pass {self.pass_path}: {what}; {fig}" + (f" ({self.note})" if self.note else "")


def _label(ins) -> str:
    return f"{ins.name} #{ins.id}"


def _claims(
    after_ids: Sequence[int], before_ids: set[int], replacements: Sequence[Replacement]
) -> dict[int, list[tuple[int, str]]]:
    """For each instruction of the new program, the (before-id, rule) values it claims to equal."""
    raw: dict[int, list[tuple[int, str]]] = {}
    for r in replacements:
        raw.setdefault(r.new, []).append((r.old, r.rule))

    def resolve(i: int, rule: str, seen: frozenset) -> list[tuple[int, str]]:
        if i in before_ids:
            return [(i, rule)]
        if i in seen:
            return []
        # `i` was itself new in this pass: it stands for whatever it claimed; the rule reported is
        # the outer one (the rewrite that produced the value now in use).
        return [(o, rule or r2) for old, r2 in raw.get(i, []) for o, _ in resolve(old, r2, seen | {i})]

    out: dict[int, list[tuple[int, str]]] = {}
    for i in after_ids:
        got = [c for old, rule in raw.get(i, []) for c in resolve(old, rule, frozenset({i}))]
        if not got and i in before_ids:
            got = [(i, "")]
        if got:
            out[i] = list(dict.fromkeys(got))
    return out


@dataclass
class _Compared:
    """Both snapshots' values (before: vb, after: va) and, per instruction of after, the earlier
    values it claims to equal (with the rule that says so)."""

    vb: Mapping[int, Any]
    va: Mapping[int, Any]
    claims: Mapping[int, list[tuple[int, str]]]

    def counterparts(self, ins) -> list[tuple[int, str]]:
        shape = np.shape(self.va[ins.id])
        return [(c, rule) for c, rule in self.claims.get(ins.id, []) if c in self.vb and np.shape(self.vb[c]) == shape]

    def reference_args(self, ins) -> list[np.ndarray]:
        """The instruction's inputs as the reference has them (its own value where none is claimed)."""
        args = []
        for i in ins.inputs:
            cps = self.counterparts(i) if i.id in self.va else []
            args.append(self.vb[cps[0][0]] if cps else self.va[i.id])
        return args


def locate_divergence(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    inputs: Mapping[str, np.ndarray],
    *,
    pass_path: str = "",
    replacements: Sequence[Replacement] = (),
    tolerance: Tolerance | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> Divergence:
    """First instruction of `after` (main module) whose value breaks tolerance against the value
    it claims to equal in `before`, and still does when re-run on the reference values of its
    inputs (see the module docstring)."""
    from migx_explore.compiler.ref import evaluate_instruction, with_buffer_params

    tol = tolerance or Tolerance(rtol=rtol, atol=atol)
    prog_before, prog_after = before.to_program(), after.to_program()
    vb = evaluate_all(prog_before, with_buffer_params(prog_before, inputs))
    va = evaluate_all(prog_after, with_buffer_params(prog_after, inputs))
    compute = program_compute_type(prog_after)
    before_labels = {i.id: _label(i) for i in prog_before.main}
    order = [i for i in prog_after.main if not (i.is_param() or i.is_return()) and i.id in va]
    cmp = _Compared(vb, va, _claims([i.id for i in order], set(vb), replacements))
    first_unconfirmed: Divergence | None = None
    bad: set[int] = set()
    for ins in order:
        for c, rule in cmp.counterparts(ins):
            full = check_value(va[ins.id], vb[c], tol, compute=compute)
            if full.ok:
                continue
            bad.add(ins.id)
            d = Divergence(pass_path, ins.id, _label(ins), c, full.max_abs, rule=rule)
            d.counterpart_label, d.rms, d.threshold = before_labels.get(c, ""), full.rms, full.threshold
            try:
                local = check_value(evaluate_instruction(ins, cmp.reference_args(ins)), vb[c], tol, compute=compute)
            except MigxError:
                local = full
            if not local.ok:
                return d
            if first_unconfirmed is None and not any(i.id in bad for i in ins.inputs):
                first_unconfirmed = d
            break
    if first_unconfirmed is not None:
        first_unconfirmed.note = "error amplified from its inputs"
        return first_unconfirmed
    return Divergence(
        pass_path,
        None,
        "",
        None,
        0.0,
        "the outputs differ only through instructions that claim no earlier value (e.g. a whole subgraph rebuilt)",
    )


def _breaks(snap: ProgramSnapshot, cfg) -> bool:
    from migx_explore.compiler.pass_infra.numerics import compare_program_outputs
    from migx_explore.compiler.ref import evaluate, with_buffer_params

    prog = snap.to_program()
    try:
        outs = evaluate(prog, with_buffer_params(prog, cfg.inputs))
    except MigxError:
        return False
    return not compare_program_outputs(prog, outs, cfg).ok


def _innermost_failure(trace, rec, cfg):
    """The first nested pass of `rec` (recursively) whose own result already breaks tolerance."""
    for child in trace.children(rec):
        if child.after is not None and child.changed and _breaks(child.after, cfg):
            return _innermost_failure(trace, child, cfg)
    return rec


def gpu_divergence(
    snap: ProgramSnapshot, inputs: Mapping[str, np.ndarray], *, rtol: float = 1e-3, atol: float = 1e-4
) -> Divergence | None:
    """Run a backend-lowered program on the GPU reading back every value, and find the first
    instruction whose GPU result disagrees with the reference evaluator's while its inputs agree
    (a kernel or lowering bug). None when every value agrees."""
    from .gpu_bridge import compile_snapshot

    compiled = compile_snapshot(snap)
    try:
        return first_gpu_divergence(compiled, inputs, rtol=rtol, atol=atol)
    finally:
        compiled.close()


def _close_scaled(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> tuple[bool, float]:
    """GPU vs reference for one intermediate value: the error is measured against the tensor's
    scale (max |ref|), not element by element, because a long fp32 reduction (a GEMM with
    K = 4608, say) legitimately differs by accumulation order on elements near zero."""
    c = check_value(a, b, Tolerance(rtol=rtol, atol=atol))
    if c.ok or c.note:
        return c.ok, c.max_abs
    scale = float(np.max(np.abs(np.nan_to_num(np.asarray(b, np.float64))), initial=0.0))
    return c.max_abs <= atol + rtol * scale, c.max_abs


def first_gpu_divergence(
    compiled, inputs: Mapping[str, np.ndarray], *, rtol: float = 1e-3, atol: float = 1e-4
) -> Divergence | None:
    from migx_explore.compiler.printer import instruction_label
    from migx_explore.compiler.ref import with_buffer_params

    feeds = {k: v for k, v in inputs.items() if k in compiled.inputs}
    gpu = compiled.trace_values(feeds)
    program = compiled.program
    ref = evaluate_all(program, with_buffer_params(program, feeds))
    bad: set[int] = set()
    for ins in program.main:
        if ins.id not in gpu or ins.id not in ref:
            continue
        ok, err = _close_scaled(gpu[ins.id], ref[ins.id], rtol, atol)
        if not ok:
            bad.add(ins.id)
            if not any(i.id in bad for i in ins.inputs):
                return Divergence("gpu", ins.id, instruction_label(ins), ins.id, err)
    return None


def numeric_bisect(session, inputs: Mapping[str, np.ndarray] | None = None) -> Divergence | None:
    """The first pass of the session's trace that breaks tolerance, the innermost nested pass
    that does, and the first diverging replacement inside it (None when every pass keeps the
    outputs). `inputs` replaces the session's numeric inputs first."""
    if inputs is not None:
        session.traces.set_inputs(inputs)
    trace = session.trace
    bad = trace.first_numeric_failure()
    if bad is None:
        return None
    cfg = session.traces.numeric_config()
    rec = _innermost_failure(trace, bad, cfg)
    found = locate_divergence(
        rec.before, rec.after, cfg.inputs, pass_path=rec.path, replacements=rec.replacements, tolerance=cfg.tolerance
    )
    if found.instruction_id is None and rec is not bad:
        found = locate_divergence(
            bad.before,
            bad.after,
            cfg.inputs,
            pass_path=bad.path,
            replacements=bad.replacements,
            tolerance=cfg.tolerance,
        )
    return found


# ---- performance -------------------------------------------------------------------------------
def ddmin(
    changes: Sequence[Any],
    is_bad: Callable[[Sequence[Any]], bool],
    *,
    are_bad: Callable[[list[list[Any]]], list[bool]] | None = None,
) -> list[Any]:
    """Minimal subset of `changes` for which `is_bad` still holds (1-minimal, Zeller & Hildebrandt).

    `is_bad(all changes)` must be True and `is_bad([])` False. With `are_bad` (a batch of subsets
    -> one verdict each, e.g. Dask tasks in parallel) every chunk of a round, then every
    complement, is tested at once; the subsets chosen are the ones the serial order would choose."""
    cur = list(changes)
    if not is_bad(cur):
        raise MigxError("delta debugging needs the full set of changes to reproduce the problem")
    if is_bad([]):
        raise MigxError("the problem shows up with none of the changes applied; nothing to bisect")
    n = 2
    cache: dict[tuple[int, ...], bool] = {}

    def key(subset: list[Any]) -> tuple[int, ...]:
        return tuple(sorted(changes.index(c) for c in subset))

    def first_bad(subsets: list[list[Any]]) -> list[Any] | None:
        subsets = [x for x in subsets if x]
        todo = [x for x in subsets if key(x) not in cache]
        if are_bad is not None and len(todo) > 1:
            for x, verdict in zip(todo, are_bad(todo)):
                cache[key(x)] = bool(verdict)
        for x in subsets:
            if key(x) not in cache:
                cache[key(x)] = bool(is_bad(x))
            if cache[key(x)]:
                return x
        return None

    while len(cur) >= 2:
        chunks = [cur[i * len(cur) // n : (i + 1) * len(cur) // n] for i in range(n)]
        found = first_bad(chunks)
        if found is not None:
            cur, n = found, 2
            continue
        found = first_bad([[c for c in cur if c not in ch] for ch in chunks])
        if found is not None:
            cur, n = found, max(n - 1, 2)
            continue
        if n >= len(cur):
            break
        n = min(len(cur), 2 * n)
    return cur


@dataclass
class PerfBisectResult:
    culprits: list[str]  # toggle targets (pass paths) responsible
    good: float
    bad: float
    evaluations: int

    def describe(self) -> str:
        return (
            f"{', '.join(self.culprits)} account(s) for the regression ({self.good:.4g} -> {self.bad:.4g}; "
            f"{self.evaluations} configurations measured)"
        )


def perf_bisect(
    session,
    toggles: Mapping[str, bool],
    measure: Callable[[Any], float],
    *,
    threshold: float | None = None,
    cluster: str | None = None,
    workers: int | None = None,
    gpus: int | None = None,
    sweeper: Any = None,
) -> PerfBisectResult:
    """`toggles` maps pass paths to the enabled state of the *bad* configuration (the session's
    current state is the good one). Finds a minimal set of those toggles that, applied to the good
    configuration, make `measure(session)` exceed `threshold` (default: halfway to the bad value).
    The session is left in its original configuration.

    By default every configuration is measured here, in this session (`measure` may hold live
    state such as an open GPU timer). With `workers=`, `cluster=`, `gpus=` or `sweeper=` each
    round's configurations are Dask tasks (migx_explore.sweep) measured in parallel on workers'
    own sessions; `measure` must then be picklable (a module function or a lambda)."""
    if any(x is not None for x in (cluster, workers, gpus, sweeper)):
        return _perf_bisect_sweep(session, toggles, measure, threshold, cluster, workers, gpus, sweeper)
    original = {path: e.enabled for path, e, _ in session.config.entries()}
    count = [0]

    def apply(subset: Sequence[str]) -> float:
        for path, enabled in original.items():
            session.set_enabled(path, enabled)
        for path in subset:
            session.set_enabled(path, toggles[path])
        count[0] += 1
        return float(measure(session))

    try:
        good = apply([])
        bad = apply(list(toggles))
        limit = _limit(good, bad, threshold)
        culprits = ddmin(list(toggles), lambda subset: apply(subset) > limit)
    finally:
        for path, enabled in original.items():
            session.set_enabled(path, enabled)
    return PerfBisectResult(culprits, good, bad, count[0])


def _limit(good: float, bad: float, threshold: float | None) -> float:
    limit = threshold if threshold is not None else (good + bad) / 2
    if not bad > limit:
        raise MigxError(f"the bad configuration measures {bad:.4g}, not above the threshold {limit:.4g}")
    return limit


def perf_task(session, payload: dict) -> dict:
    """One perf-bisect configuration on a sweep worker: the toggles applied, then measured."""
    for path, enabled in payload["toggles"].items():
        session.set_enabled(path, enabled)
    return {"value": float(payload["measure"](session))}


def _perf_bisect_sweep(session, toggles, measure, threshold, cluster, workers, gpus, sweeper) -> PerfBisectResult:
    from .sweep import SessionSpec, Sweeper

    own = sweeper is None
    sw = sweeper or Sweeper(cluster=cluster, workers=workers, gpus=gpus)
    spec = SessionSpec.of(session)
    count = [0]

    def measure_many(subsets: list[list[str]]) -> list[float]:
        payloads = [{"toggles": {p: toggles[p] for p in sub}, "measure": measure} for sub in subsets]
        recs = sw.map(spec, perf_task, payloads, ["+".join(sub) or "(good)" for sub in subsets])
        count[0] += len(subsets)
        for r in recs:
            if r.get("error"):
                raise MigxError(f"perf bisect: configuration {r['label']} failed: {r['error']}")
        return [r["value"] for r in recs]

    try:
        good, bad = measure_many([[], list(toggles)])
        limit = _limit(good, bad, threshold)
        culprits = ddmin(
            list(toggles),
            lambda sub: measure_many([sub])[0] > limit,
            are_bad=lambda subs: [v > limit for v in measure_many(subs)],
        )
    finally:
        if own:
            sw.close()
    return PerfBisectResult(culprits, good, bad, count[0])
