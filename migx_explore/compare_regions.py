"""Change regions between any two programs: what the Compare view (two passes, or a pass on vs
off) steps through with ◀ ▶, as the Diff view steps through one pass's regions.

The rewrite rows of the step A -> B (rewrites.summarize, as if B came from A in one pass) split
into connected regions (regions.change_regions), each with the scope of what it holds where the
session's scope table knows the instructions. Functions of a session; results are cached in
the session's state (`ComparedRegions`) per pair of snapshot objects (snapshots are never changed in place).

    regions = compare_regions.regions_between(session, a, b)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from migx_explore.compiler.snapshot import ProgramSnapshot
from migx_explore.compiler.snapshot import diff as snapshot_diff

from .instances import instance_scope
from .regions import Region, change_regions
from .rewrite_summary import summarize

if TYPE_CHECKING:
    from .session import Session

KEPT = 8  # pairs cached: Compare moves between a few choices, and each pair holds two programs


def scopes_of(session: Session, *snaps: ProgramSnapshot) -> dict[int, str]:
    """The scope of each instruction of `snaps`, as far as the session's scope table knows them
    (a program of a variant trace, e.g. "this pass off", may have ids the table never saw)."""
    from .pass_changes import scope_table

    out: dict[int, str] = {}
    table = scope_table(session)
    for snap in snaps:
        try:
            out.update(table.scopes_of(snap))
        except (KeyError, ValueError, IndexError):  # not a snapshot of this trace: no scopes, still regions
            continue
    return out


class ComparedRegions(list):
    """The session's (a, b, regions) of recent comparisons, newest last (Session.state)."""


class ComparedInstances(list):
    """The session's (a, b, (entries, instances, diff)) of recent comparisons (Session.state)."""


def regions_between(session: Session, a: ProgramSnapshot, b: ProgramSnapshot) -> list[Region]:
    """The change from program `a` to program `b` as connected regions, in program order."""
    cache = session.state(ComparedRegions)
    for ca, cb, found in cache:
        if ca is a and cb is b:
            return found
    found = change_regions(a, b, summarize(a, b), scopes_of(session, a, b))
    cache.append((a, b, found))
    del cache[:-KEPT]
    return found


def instances_between(session: Session, a: ProgramSnapshot, b: ProgramSnapshot) -> tuple[list[Region], list, Any]:
    """The change from `a` to `b` one rewrite instance at a time: entries for the region bar
    ("instance 3 of 12 · /model.2 · {add, mul} → pointwise"), rows in summary order (swapped
    inputs last), the RewriteInstance of each entry, and the SnapshotDiff a -> b."""
    cache = session.state(ComparedInstances)
    for ca, cb, found in cache:
        if ca is a and cb is b:
            return found
    scopes = scopes_of(session, a, b)
    entries, instances = [], []
    d = snapshot_diff(a, b)
    for row in summarize(a, b, d):
        for inst in row.instances:
            note = row.label.rsplit(" × ", 1)[0]
            entries.append(Region(inst.ids, instance_scope(inst, scopes), 0, 0, noun="instance", note=note))
            instances.append(inst)
    found = (entries, instances, d)
    cache.append((a, b, found))
    del cache[:-KEPT]
    return found


__all__ = ["instances_between", "regions_between", "scopes_of"]
