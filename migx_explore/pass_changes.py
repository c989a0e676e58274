"""What one pass did, beyond its before/after snapshots and diff (Session.snapshots / diff): its
rewrite rows, the scope of every instruction, its change as connected regions, the stats row
the explorer shows, and the text diff. Functions of a session; `where` is a pass path or record
index (None: the current record), and the cursor never moves.

    from migx_explore import pass_changes
    pass_changes.rewrites(s, "fusion.fuse_pointwise_reduce"); pass_changes.regions(s)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .regions import Region, change_regions
from .rewrite_summary import RewriteRow, record_rewrites
from .scopes import ScopeTable
from .stats import launch_count

if TYPE_CHECKING:
    from migx_explore.compiler.pass_infra import PassRecord

    from .session import Session


def rewrites(session: Session, where: str | int | None = None) -> list[RewriteRow]:
    """What a pass did as rows `{from ops} -> {to ops} x count`, each with its instances' ids.
    See rewrites.py."""
    rec = session.record(where)
    return _cached(session.state(_RewritesByRecord), rec, lambda: record_rewrites(session.trace_so_far, rec))


class _PerRecord(dict):
    """record index -> (the record, a result for it), kept in the session's state."""


class _RewritesByRecord(_PerRecord):
    pass


class _ScopesByRecord(_PerRecord):
    """Also remembers the scope table its entries came from (a new trace gets a new table)."""

    table: ScopeTable | None = None


def _cached(cache: _PerRecord, rec: PassRecord, make: Any) -> Any:
    """One result per record (a step asks the same several times: view, tree, instance bar)."""
    hit = cache.get(rec.index)
    if hit is not None and hit[0] is rec:  # records are replaced, never changed, by a re-trace
        return hit[1]
    found = make()
    cache[rec.index] = (rec, found)
    return found


class _ScopeTableOf:
    """The session's scope table (Session.state), rebuilt for a new trace."""

    def __init__(self) -> None:
        self.table: ScopeTable | None = None


class _RegionsByRecord(_PerRecord):
    pass


def scope_table(session: Session) -> ScopeTable:
    """The session's scope table for the trace as far as it has run (kept in its state)."""
    trace = session.trace_so_far  # grows in place; a new configuration's trace is a new object
    held = session.state(_ScopeTableOf)
    if held.table is None or held.table.trace is not trace:
        held.table = ScopeTable(trace)
    return held.table


def scopes(session: Session, where: str | int | None = None) -> tuple[dict[int, str], dict[int, str]]:
    """The scope of every instruction before and after a record, as scopes.ScopeTable derives them
    (model paths, or graph-derived blocks)."""
    rec = session.record(where)
    table = scope_table(session)
    trace = session.trace_so_far  # holds rec: records are only ever appended to a trace

    def make() -> tuple[dict[int, str], dict[int, str]]:
        before, after = trace.snapshots(rec)
        prev = trace.records[rec.index - 1] if rec.index > 0 else None
        return table.scopes_of(before, prev), table.scopes_of(after, rec)

    cache = session.state(_ScopesByRecord)
    if cache.table is not table:  # a new configuration's trace: a new table
        cache.clear()
        cache.table = table
    return _cached(cache, rec, make)


def regions(session: Session, where: str | int | None = None) -> list[Region]:
    """A pass's change as connected regions in program order."""
    rec = session.record(where)
    cache = session.state(_RegionsByRecord)
    hit = cache.get(rec.index)
    if hit is not None and hit[0] is rec:  # records are replaced, never changed, by a re-trace
        return hit[1]
    sb, sa = scopes(session, rec.index)
    trace = session.trace_so_far
    before, after = trace.snapshots(rec)
    found = change_regions(before, after, rewrites(session, rec.index), {**sb, **sa})
    cache[rec.index] = (rec, found)
    return found


def text_diff(session: Session, context: int = 3) -> str:
    """The current pass's before and after as a unified text diff of the printed IR."""
    from .render import text_diff as unified

    return unified(session.before(), session.after(), context=context)


def stats(session: Session) -> dict[str, Any]:
    """The current pass's figures: status, time, instructions and launches before and after, and
    its numeric check (None while it is pending: the stats never wait for a check)."""
    r = session.current
    d = session.diff()
    before, after = session.snapshots()
    n = r.numeric if r.numeric_ready else None
    return {
        "pass": r.path,
        "status": r.status,
        "reason": r.reason,
        "time_ms": round(r.time_s * 1e3, 3),
        "added": len(d.added),
        "removed": len(d.removed),
        "changed": len(d.changed),
        "instructions_before": before.total_instructions(),
        "instructions_after": after.total_instructions(),
        "launches_before": launch_count(before),
        "launches_after": launch_count(after),
        "numeric_max_abs": None if n is None else n.max_abs,
        "numeric_ok": None if n is None else n.ok,
        "numeric_note": "" if n is None else n.note,
        # MIGraphX-style relative RMS of the worst output and its threshold (compiler/verify.py)
        "numeric_rms": None if n is None else n.rms,
        "numeric_threshold": None if n is None else n.threshold,
        "numeric_summary": "" if n is None else n.describe(),
        "numeric_state": session.traces.numeric_state(r),
        "matches": len(r.matches),
    }


__all__ = ["regions", "rewrites", "scopes", "stats", "text_diff"]
