"""Bisecting: which pass broke the numbers (and at which instruction), and which toggles made a
program slower (or broke graph capture).

Numeric: the trace's per-pass numeric check finds the first pass whose outputs leave tolerance;
`locate_divergence` then evaluates every value before and after that pass on the same inputs and
walks the new program in order to the first instruction whose value differs from its counterpart
(same stable id, or the instruction it came from) while its inputs still agree.

Performance: `ddmin` is Zeller's delta debugging over the set of toggles that differ between a
good and a bad configuration; `perf_bisect` wires it to a Session and any measure (GPU latency,
kernel count, "graph capture fails").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .compiler.errors import MigxError
from .compiler.ref import evaluate_all
from .compiler.snapshot import ProgramSnapshot


@dataclass
class Divergence:
    pass_path: str
    instruction_id: int | None
    label: str
    counterpart_id: int | None
    max_abs: float
    note: str = ""

    def describe(self) -> str:
        if self.instruction_id is None:
            return f"pass {self.pass_path}: no single diverging instruction found ({self.note})"
        via = f" (compared with #{self.counterpart_id})" if self.counterpart_id != self.instruction_id else ""
        return (f"pass {self.pass_path}: first diverging instruction {self.label}{via}, "
                f"max|err| {self.max_abs:.3e}")


def _close_scaled(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> tuple[bool, float]:
    """GPU vs reference for one intermediate value: the error is measured against the tensor's
    scale (max |ref|), not element by element, because a long fp32 reduction (a GEMM with
    K = 4608, say) legitimately differs by accumulation order on elements near zero."""
    ok, err = _close(a, b, rtol, atol)
    if ok:
        return ok, err
    scale = float(np.max(np.abs(np.nan_to_num(np.asarray(b, np.float64))), initial=0.0))
    return err <= atol + rtol * scale, err


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> tuple[bool, float]:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        if a.size != b.size:
            return False, float("inf")
        a = a.reshape(b.shape)
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        return bool(np.array_equal(a, b)), float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max(initial=0))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same = (np.isnan(a64) & np.isnan(b64)) | (a64 == b64)
    err = np.where(same, 0.0, np.abs(a64 - b64))
    err = np.nan_to_num(err, nan=np.inf)
    return bool(np.all(err <= atol + rtol * np.abs(np.nan_to_num(b64)))), float(err.max(initial=0.0))


def locate_divergence(before: ProgramSnapshot, after: ProgramSnapshot, inputs: Mapping[str, np.ndarray], *,
                      pass_path: str = "", rtol: float = 1e-4, atol: float = 1e-5) -> Divergence:
    """First instruction of `after` (main module) whose value disagrees with its counterpart in
    `before` while all of its own inputs agree (or have no counterpart)."""
    vb = evaluate_all(before.to_program(), inputs)
    prog_after = after.to_program()
    va = evaluate_all(prog_after, inputs)
    agree: dict[int, bool] = {}
    for ins in prog_after.main:
        if ins.is_builtin() or ins.id not in va:
            agree[ins.id] = True
            continue
        cands = [ins.id] if ins.id in vb else [o for o in ins.origin if o in vb]
        cands = [c for c in cands if np.asarray(vb[c]).size == np.asarray(va[ins.id]).size]
        if not cands:
            agree[ins.id] = all(agree.get(i.id, True) for i in ins.inputs)
            continue
        results = [(c, *_close(va[ins.id], vb[c], rtol, atol)) for c in cands]
        ok = any(r[1] for r in results)
        agree[ins.id] = ok
        if not ok and all(agree.get(i.id, True) for i in ins.inputs):
            c, _, err = min(results, key=lambda r: r[2])
            from .compiler.printer import instruction_label

            return Divergence(pass_path, ins.id, instruction_label(ins), c, err)
    return Divergence(pass_path, None, "", None, 0.0, "outputs differ only through instructions without "
                                                      "counterparts (e.g. a whole subgraph replaced)")


def gpu_divergence(snap: ProgramSnapshot, inputs: Mapping[str, np.ndarray], *, rtol: float = 1e-3,
                   atol: float = 1e-4) -> Divergence | None:
    """Run a backend-lowered program on the GPU reading back every value, and find the first
    instruction whose GPU result disagrees with the reference evaluator's while its inputs agree
    (a kernel or lowering bug). None when every value agrees."""
    from .gpu_bridge import compile_snapshot

    compiled = compile_snapshot(snap)
    try:
        return first_gpu_divergence(compiled, inputs, rtol=rtol, atol=atol)
    finally:
        compiled.close()


def first_gpu_divergence(compiled, inputs: Mapping[str, np.ndarray], *, rtol: float = 1e-3,
                         atol: float = 1e-4) -> Divergence | None:
    from .compiler.printer import instruction_label
    from .compiler.ref import with_buffer_params

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


def numeric_bisect(session) -> Divergence | None:
    """The first pass of the session's trace that breaks tolerance, and where inside it."""
    trace = session.trace
    bad = trace.first_numeric_failure()
    if bad is None:
        return None
    cfg = session.numeric_config()
    return locate_divergence(bad.before, bad.after, cfg.inputs, pass_path=bad.path, rtol=cfg.rtol, atol=cfg.atol)


# ---- performance -------------------------------------------------------------------------------
def ddmin(changes: Sequence[Any], is_bad: Callable[[Sequence[Any]], bool]) -> list[Any]:
    """Minimal subset of `changes` for which `is_bad` still holds (1-minimal, Zeller & Hildebrandt).

    `is_bad(all changes)` must be True and `is_bad([])` False."""
    cur = list(changes)
    if not is_bad(cur):
        raise MigxError("delta debugging needs the full set of changes to reproduce the problem")
    if is_bad([]):
        raise MigxError("the problem shows up with none of the changes applied; nothing to bisect")
    n = 2
    cache: dict[tuple[int, ...], bool] = {}

    def test(subset: list[Any]) -> bool:
        key = tuple(sorted(changes.index(c) for c in subset))
        if key not in cache:
            cache[key] = bool(is_bad(subset))
        return cache[key]

    while len(cur) >= 2:
        chunks = [cur[i * len(cur) // n:(i + 1) * len(cur) // n] for i in range(n)]
        reduced = False
        for ch in chunks:
            if ch and test(ch):
                cur, n, reduced = ch, 2, True
                break
        if not reduced:
            for ch in chunks:
                comp = [c for c in cur if c not in ch]
                if comp and test(comp):
                    cur, n, reduced = comp, max(n - 1, 2), True
                    break
        if not reduced:
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
        return (f"{', '.join(self.culprits)} account(s) for the regression ({self.good:.4g} -> {self.bad:.4g}; "
                f"{self.evaluations} configurations measured)")


def perf_bisect(session, toggles: Mapping[str, bool], measure: Callable[[Any], float], *,
                threshold: float | None = None) -> PerfBisectResult:
    """`toggles` maps pass paths to the enabled state of the *bad* configuration (the session's
    current state is the good one). Finds a minimal set of those toggles that, applied to the good
    configuration, make `measure(session)` exceed `threshold` (default: halfway to the bad value).
    The session is left in its original configuration."""
    original = {path: e.enabled for path, e, _ in session.entries()}
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
        limit = threshold if threshold is not None else (good + bad) / 2
        if not bad > limit:
            raise MigxError(f"the bad configuration measures {bad:.4g}, not above the threshold {limit:.4g}")
        culprits = ddmin(list(toggles), lambda subset: apply(subset) > limit)
    finally:
        for path, enabled in original.items():
            session.set_enabled(path, enabled)
    return PerfBisectResult(culprits, good, bad, count[0])
