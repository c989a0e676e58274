"""The report's data, read off a session's trace: the pipeline tree (passes, toggles in effect,
no-op passes marked), and per pass its statistics, rewrite summary, numeric check and text diff.
Plain JSON-able dicts: the page draws them, a test can read them."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from ..compiler.snapshot import ProgramSnapshot
from ..stats import launch_count, op_histogram

if TYPE_CHECKING:  # pragma: no cover
    from ..compiler.passes import PassRecord
    from ..session import Session


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


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


def rewrite_lines(rec: PassRecord, before: ProgramSnapshot, after: ProgramSnapshot) -> list[str]:
    """`{from ops} → {to ops} × n` per kind of replacement the pass recorded, most frequent first,
    then the matcher rules that fired."""
    if not rec.changed:
        return []
    try:
        from ..rewrites import summary_lines  # the diffs branch's rewrite summaries, where present
    except ImportError:
        summary_lines = None
    if summary_lines is not None:
        return list(summary_lines(rec, before, after))
    # A replacement may point at an instruction the same pass replaced again (fused, then fused
    # further): follow each chain to what survives in `after`, and group by that survivor.
    succ: dict[int, list[int]] = {}
    for r in rec.replacements:
        succ.setdefault(r.old, []).append(r.new)

    def survivors(i: int) -> set[int]:
        out, todo, seen = set(), [i], {i}
        while todo:
            x = todo.pop()
            if x in after.by_id and x != i:
                out.add(x)
                continue
            for n in succ.get(x, ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return out

    groups: dict[int, set[str]] = {}
    for old in succ:
        if old in before.by_id:
            for new in survivors(old):
                groups.setdefault(new, set()).add(before.by_id[old][1].op.name)
    kinds = Counter((tuple(sorted(frm)), (after.by_id[new][1].op.name,)) for new, frm in groups.items())
    lines = [f"{{{', '.join(f) or '∅'}}} → {{{', '.join(t) or '∅'}}} × {n}" for (f, t), n in kinds.most_common()]
    rules = Counter(m.rule for m in rec.matches)
    lines += [f"rule {rule} matched × {n}" for rule, n in rules.most_common()]
    return lines


def numeric_info(session: Session, rec: PassRecord) -> dict[str, Any]:
    state = session.numeric_state(rec)
    n = rec.numeric
    text = {"unchanged": "not checked: the pass left the IR as it was",
            "off": "not checked: the numeric check was off",
            "pending": "not checked (deferred and not run)",
            "nested": "checked with its top-level pass"}.get(state, n.describe() if n is not None else "")
    out: dict[str, Any] = {"state": state, "text": text}
    if n is not None and not n.note:
        out.update(ok=n.ok, rms=_finite(n.rms), threshold=_finite(n.threshold), max_abs=_finite(n.max_abs),
                   tolerance=n.tolerance)
    return out


def _finite(x: float) -> float | None:
    return x if x == x and abs(x) != float("inf") else None


def pass_rows(session: Session) -> list[dict[str, Any]]:
    """One dict per trace record, in trace order (nested passes follow their parent)."""
    trace = session.trace
    counts = _Counts()
    rows = []
    for rec in trace.records:
        before, after = trace.snapshots(rec)
        ib, lb, hb = counts.of(before)
        ia, la, ha = counts.of(after)
        d = rec.diff
        rows.append({
            "i": rec.index, "path": rec.path, "name": rec.name, "pipeline": rec.pipeline, "depth": rec.depth,
            "parent": rec.parent, "status": rec.status, "reason": rec.reason, "user": rec.user,
            "changed": rec.changed, "noop": rec.noop,
            "summary": d.summary() if rec.changed else ("no change" if rec.status == "ok" else rec.status),
            "time_ms": round(rec.time_s * 1e3, 3),
            "options": _jsonable(rec.options),
            "validation": rec.validation,
            "stats": {"instructions": [ib, ia], "launches": [lb, la],
                      "added": len(d.added) if d else 0, "removed": len(d.removed) if d else 0,
                      "changed": len(d.changed) if d else 0, "matches": len(rec.matches),
                      "modules": [len(before.modules), len(after.modules)]},
            "ops": op_delta(hb, ha) if rec.changed else [],
            "rewrites": rewrite_lines(rec, before, after),
            "numeric": numeric_info(session, rec),
        })
    return rows


def pipeline_tree(session: Session) -> list[dict[str, Any]]:
    """The pipelines in order with their state; records point at their pipeline by name."""
    out = []
    for pl in session.pipelines:
        out.append({"name": pl.name, "enabled": pl.enabled,
                    "entries": len(pl.entries), "disabled": sum(1 for e in pl.entries if not e.enabled)})
    return out


def overview(session: Session) -> dict[str, Any]:
    trace = session.trace
    tops = trace.top_level()
    failure = trace.first_numeric_failure()
    checked = [r for r in trace.records if r.numeric is not None and not r.numeric.note]
    return {
        "instructions": [trace.initial.total_instructions(), trace.final.total_instructions()],
        "launches": [launch_count(trace.initial), launch_count(trace.final)],
        "passes": len(tops), "changed": sum(1 for r in tops if r.changed),
        "disabled": sum(1 for r in tops if r.status == "disabled"),
        "records": len(trace.records),
        "time_ms": round(sum(r.time_s for r in tops) * 1e3, 2),
        "error": trace.error,
        "numeric_checked": len(checked),
        "numeric_failure": None if failure is None else {"i": failure.index, "path": failure.path,
                                                           "text": failure.numeric.describe()},
        "warnings": session.warnings(),
    }


__all__ = ["numeric_info", "op_delta", "overview", "pass_rows", "pipeline_tree", "rewrite_lines"]
