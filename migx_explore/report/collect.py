"""The report's data, read off a session's trace: the pipeline tree (passes, toggles in effect,
no-op passes marked), and per pass its statistics, rewrite summary, numeric check and text diff.
Plain JSON-able dicts: the page draws them, a test can read them."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from migx_explore.compiler.pass_infra.trace import jsonable
from migx_explore.compiler.snapshot import ProgramSnapshot

from ..rewrite_summary import RewriteRow
from ..stats import launch_count, op_histogram

if TYPE_CHECKING:  # pragma: no cover
    from migx_explore.compiler.pass_infra import PassRecord

    from ..session import Session


class _Counts:
    """Instruction and launch counts per snapshot, computed once (snapshots are shared between
    consecutive records, so most are asked for twice)."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[ProgramSnapshot, int, int, Counter]] = {}

    def of(self, snap: ProgramSnapshot) -> tuple[int, int, Counter]:
        hit = self._seen.get(id(snap))
        if hit is None or hit[0] is not snap:
            hit = (snap, snap.total_instructions(), launch_count(snap), op_histogram(snap))
            self._seen[id(snap)] = hit
        return hit[1], hit[2], hit[3]


def op_delta(before: Counter, after: Counter, top: int = 12) -> list[list[Any]]:
    """[op, count change] for the ops whose count moved, biggest moves first."""
    moved = [(op, after.get(op, 0) - before.get(op, 0)) for op in set(before) | set(after)]
    moved = [m for m in moved if m[1]]
    moved.sort(key=lambda m: (-abs(m[1]), m[0]))
    return [list(m) for m in moved[:top]]


def rewrite_rows(rows: list[RewriteRow]) -> list[dict[str, Any]]:
    """The rewrite summary of a pass (migx_explore.rewrite_summary) as the page lists it: a label such as
    `{add, sigmoid, mul} → pointwise × 57`, its kind and count (the instances' ids travel in the
    pass's blob, for stepping through them in the graph)."""
    return [{"label": r.label, "kind": r.kind, "count": r.count} for r in rows]


def numeric_info(session: Session, rec: PassRecord) -> dict[str, Any]:
    state = session.traces.numeric_state(rec)
    n = rec.numeric
    text = {
        "unchanged": "not checked: the pass left the IR as it was",
        "off": "not checked: the numeric check was off",
        "pending": "not checked (deferred and not run)",
        "nested": "checked with its top-level pass",
    }.get(state, n.describe() if n is not None else "")
    out: dict[str, Any] = {"state": state, "text": text}
    if n is not None and not n.note:
        out.update(
            ok=n.ok,
            rms=_finite(n.rms),
            threshold=_finite(n.threshold),
            max_abs=_finite(n.max_abs),
            tolerance=n.tolerance,
        )
    return out


def _finite(x: float) -> float | None:
    return x if x == x and abs(x) != float("inf") else None


def pass_rows(session: Session, rewrites: dict[int, list[RewriteRow]]) -> list[dict[str, Any]]:
    """One dict per trace record, in trace order (nested passes follow their parent); `rewrites`:
    record index -> its rewrite rows."""
    trace = session.trace
    counts = _Counts()
    rows = []
    for rec in trace.records:
        before, after = trace.snapshots(rec)
        ib, lb, hb = counts.of(before)
        ia, la, ha = counts.of(after)
        d = rec.diff
        rows.append(
            {
                "i": rec.index,
                "path": rec.path,
                "name": rec.name,
                "pipeline": rec.pipeline,
                "depth": rec.depth,
                "parent": rec.parent,
                "status": rec.status,
                "reason": rec.reason,
                "user": rec.user,
                "changed": rec.changed,
                "noop": rec.noop,
                "summary": d.summary() if rec.changed else ("no change" if rec.status == "ok" else rec.status),
                "time_ms": round(rec.time_s * 1e3, 3),
                "options": jsonable(rec.options),
                "validation": rec.validation,
                "stats": {
                    "instructions": [ib, ia],
                    "launches": [lb, la],
                    "added": len(d.added) if d else 0,
                    "removed": len(d.removed) if d else 0,
                    "changed": len(d.changed) if d else 0,
                    "matches": len(rec.matches),
                    "modules": [len(before.modules), len(after.modules)],
                },
                "ops": op_delta(hb, ha) if rec.changed else [],
                "rewrites": rewrite_rows(rewrites.get(rec.index, [])),
                "numeric": numeric_info(session, rec),
            }
        )
    return rows


def pipeline_tree(session: Session) -> list[dict[str, Any]]:
    """The pipelines in order with their state; records point at their pipeline by name."""
    out = []
    for pl in session.pipelines:
        out.append(
            {
                "name": pl.name,
                "enabled": pl.enabled,
                "entries": len(pl.entries),
                "disabled": sum(1 for e in pl.entries if not e.enabled),
            }
        )
    return out


def overview(session: Session) -> dict[str, Any]:
    trace = session.trace
    tops = trace.top_level()
    failure = trace.first_numeric_failure()
    checked = [r for r in trace.records if r.numeric is not None and not r.numeric.note]
    return {
        "instructions": [trace.initial.total_instructions(), trace.final.total_instructions()],
        "launches": [launch_count(trace.initial), launch_count(trace.final)],
        "passes": len(tops),
        "changed": sum(1 for r in tops if r.changed),
        "disabled": sum(1 for r in tops if r.status == "disabled"),
        "records": len(trace.records),
        "time_ms": round(sum(r.time_s for r in tops) * 1e3, 2),
        "error": trace.error,
        "numeric_checked": len(checked),
        "numeric_failure": None
        if failure is None
        else {"i": failure.index, "path": failure.path, "text": failure.numeric.describe()},
        "warnings": session.config.warnings(),
    }


__all__ = ["numeric_info", "op_delta", "overview", "pass_rows", "pipeline_tree", "rewrite_rows"]
