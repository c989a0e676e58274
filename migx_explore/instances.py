"""Rewrite instances as the view steps through them: one occurrence of a summary row at a time.

A rewrite-summary row (`{add, sigmoid, mul} -> pointwise x 69`, rewrite_summary.py) is a list of
instances: the instructions one rewrite consumed and what replaced them. This module gives each
instance its place in the model (the deepest scope holding all of it, `/model.2/m.0`), says
where a row's instances are ("x 69 in 23 scopes: /model.2 x 6, ..."), whether they are all alike
up to names, and keeps the stepping state (row, instance) the explorer and the report show:
"instance 3 of 69 · /model.2/m.0", next / previous, jump to a scope.

Data only: no widgets, no graphviz (render/instance.py draws one instance).

    rows = pass_changes.rewrites(s); scopes = {**sb, **sa}  # pass_changes.scopes(s)
    view = InstanceView(rows, before, after, scopes); view.step(1); view.describe()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from migx_explore.compiler.printer import format_op
from migx_explore.compiler.snapshot import ProgramSnapshot

from .rewrite_summary import RewriteInstance, RewriteRow
from .scopes import common_scope

WHERE_SHOWN = 6  # scopes named in a row's "where" line; the rest are counted
_NAMED = ("@param", "@literal")  # ops whose attributes are names or data, not structure


@dataclass(frozen=True)
class RowPlaces:
    """Where one row's instances are: each instance's scope, and the scopes by count."""

    scopes: tuple[str, ...]  # instance k's scope ("" at the top)
    by_scope: tuple[tuple[str, int, int], ...]  # (scope, count, first instance), program order
    kinds: int  # distinct instances up to names (1: "all alike")

    def where(self, shown: int = WHERE_SHOWN) -> str:
        """e.g. "× 69 in 23 scopes: /model.2 × 6, /model.4 × 9, … 18 more"."""
        n = len(self.scopes)
        if len(self.by_scope) == 1:
            s = self.by_scope[0][0]
            return f"× {n} in /{s}" if s else f"× {n}"
        parts = [f"/{s} × {c}" for s, c, _ in self.by_scope[:shown]]
        more = len(self.by_scope) - shown
        tail = f", … {more} more" if more > 0 else ""
        return f"× {n} in {len(self.by_scope)} scopes: " + ", ".join(parts) + tail

    def alike(self) -> str:
        """ "all 103 alike" when every instance is the same rewrite up to names, else ""."""
        n = len(self.scopes)
        return f"all {n} alike" if n > 1 and self.kinds == 1 else ""


def _ids_scope(ids: Sequence[int], scopes: Mapping[int, str]) -> str:
    known = [scopes[i] for i in ids if scopes.get(i)]
    return common_scope(known)


def instance_scope(inst: RewriteInstance, scopes: Mapping[int, str]) -> str:
    """The deepest scope holding every scoped instruction of the instance ("" when none is
    scoped). What it consumed decides first: what replaced it inherits that scope, except for
    helpers (allocations) placed by their users, which may sit one level out."""
    s = _ids_scope(inst.before, scopes) if inst.before else ""
    return s or _ids_scope(inst.ids, scopes)


def _signature(inst: RewriteInstance, before: ProgramSnapshot, after: ProgramSnapshot) -> tuple:
    """The instance up to ids and names: ops, attributes, shapes and the wiring inside it."""
    out = []
    for side, ids in ((before, inst.before), (after, inst.after)):
        local = {i: k for k, i in enumerate(ids)}
        recs = side_records(side)
        for i in ids:
            r = recs.get(i)
            if r is None:
                out.append(("?",))
                continue
            op = r.op.name if r.op.name in _NAMED else format_op(r.op)
            wiring = tuple(local.get(j, -1) for j in r.inputs)
            out.append((op, str(r.shape), wiring, len(r.modules)))
        out.append("|")
    return tuple(out)


_RECORDS: dict[int, tuple[ProgramSnapshot, dict]] = {}


def side_records(snap: ProgramSnapshot) -> dict:
    """id -> InstrRecord over every module of `snap` (a few snapshots kept, by identity)."""
    hit = _RECORDS.get(id(snap))
    if hit is not None and hit[0] is snap:
        return hit[1]
    recs = {r.id: r for m in snap.modules for r in m.instrs}
    if len(_RECORDS) > 8:
        _RECORDS.clear()
    _RECORDS[id(snap)] = (snap, recs)
    return recs


def row_places(
    row: RewriteRow,
    scopes: Mapping[int, str],
    before: ProgramSnapshot | None = None,
    after: ProgramSnapshot | None = None,
) -> RowPlaces:
    """Each instance's scope, the scopes by count, and how many distinct instances there are
    (counted when the snapshots are given; else every instance counts as its own kind)."""
    per = tuple(instance_scope(inst, scopes) for inst in row.instances)
    counts: dict[str, list[int]] = {}
    for k, s in enumerate(per):
        counts.setdefault(s, [0, k])[0] += 1
    by_scope = tuple((s, c, first) for s, (c, first) in counts.items())
    if before is not None and after is not None:
        kinds = len({_signature(inst, before, after) for inst in row.instances})
    else:
        kinds = len(row.instances)
    return RowPlaces(per, by_scope, kinds)


@dataclass
class InstanceView:
    """Which instance of which row is shown, and the places of each row (computed on demand)."""

    rows: Sequence[RewriteRow]
    before: ProgramSnapshot
    after: ProgramSnapshot
    scopes: Mapping[int, str]
    row: int = 0
    index: int = 0

    def __post_init__(self) -> None:
        self._places: dict[int, RowPlaces] = {}

    def places(self, row: int | None = None) -> RowPlaces:
        k = self.row if row is None else row
        p = self._places.get(k)
        if p is None:
            p = self._places[k] = row_places(self.rows[k], self.scopes, self.before, self.after)
        return p

    @property
    def current(self) -> RewriteInstance | None:
        if not self.rows:
            return None
        return self.rows[self.row].instances[self.index]

    def pick(self, row: int, index: int = 0) -> RewriteInstance | None:
        """Show instance `index` of row `row` (both clamped)."""
        if not self.rows:
            return None
        self.row = max(0, min(row, len(self.rows) - 1))
        self.index = max(0, min(index, self.rows[self.row].count - 1))
        return self.current

    def step(self, by: int) -> RewriteInstance | None:
        """The next (by=1) or previous (-1) instance of the current row, wrapping around."""
        if not self.rows:
            return None
        n = self.rows[self.row].count
        self.index = (self.index + by) % n
        return self.current

    def jump(self, scope: str) -> RewriteInstance | None:
        """The first instance of the current row in `scope` (or under it); stays when none is."""
        if not self.rows:
            return None
        per = self.places().scopes
        for k, s in enumerate(per):
            if s == scope or s.startswith(scope + "/") or not scope:
                self.index = k
                break
        return self.current

    def scope(self) -> str:
        return self.places().scopes[self.index] if self.rows else ""

    def describe(self) -> str:
        """e.g. "instance 3 of 69 · /model.2/m.0"."""
        if not self.rows:
            return "no change"
        n = self.rows[self.row].count
        return f"instance {self.index + 1} of {n} · /{self.scope()}"

    def find(self, ids: Sequence[int]) -> tuple[int, int] | None:
        """(row, instance) of the instance holding any of `ids`."""
        want = set(ids)
        for r, row in enumerate(self.rows):
            for k, inst in enumerate(row.instances):
                if want & set(inst.ids):
                    return r, k
        return None


def scope_badges(
    rows: Sequence[RewriteRow], scopes: Mapping[int, str], *, skip_kinds: Sequence[str] = ("rewired",)
) -> dict[str, int]:
    """Instances per scope and every scope above it ("" is the whole model): the change badges
    of a scope tree for one pass."""
    out: dict[str, int] = {}
    for row in rows:
        if row.kind in skip_kinds:
            continue
        for inst in row.instances:
            s = instance_scope(inst, scopes)
            parts = [p for p in s.split("/") if p]
            for k in range(len(parts) + 1):
                key = "/".join(parts[:k])
                out[key] = out.get(key, 0) + 1
    return out


__all__ = ["WHERE_SHOWN", "InstanceView", "RowPlaces", "instance_scope", "row_places", "scope_badges", "side_records"]
