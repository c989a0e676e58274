"""Rewrite summaries: what a pass did, grouped into rows `{from ops} -> {to ops} x count`.

A pass's change is split into *instances*: connected groups of the instructions it removed, added
or changed, joined by the links the IR records (an added instruction's `origin`, and the pass's
`replacements`, "new took over old's uses"). Instances with the same set of ops on each side make
one row, e.g. `{add, sigmoid, mul} -> pointwise x 57`, `convolution -> gpu::convolution x 64`,
`contiguous removed x 98`. Each row keeps its instances' ids, so a view can step through them.

Instructions inside fused submodules count as their owner (the `pointwise` instruction in the
module that holds them), so a fusion reads as `{add, mul} -> pointwise` rather than listing the
copies the submodule holds. An instruction whose only change is that an input was swapped (the
users of a removed `contiguous`) is a consequence, not a rewrite: those are one `rewired` row.

Data only (no widgets, no graphviz): the explorer, `pass_changes.rewrites(session)` and `trace --out`'s
index.json all read these rows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from migx_explore.compiler.ir import Replacement
from migx_explore.compiler.pass_infra import PassRecord, Trace
from migx_explore.compiler.snapshot import InstrRecord, ProgramSnapshot, SnapshotDiff, differing_modules
from migx_explore.compiler.snapshot import diff as snapshot_diff

# Row kinds. "rewrite": ops replaced by other ops; "removed": ops deleted with nothing new in their
# place; "added": new ops with no link to anything the pass removed or changed; "changed": the same
# instruction with a different op or attributes; "rewired": only inputs changed.
KINDS = ("rewrite", "removed", "added", "changed", "rewired")
# Ops whose `op` attribute is the printed op they wrap (the gpu layer's lowered kernels).
_WRAPPING_OPS = ("gpu::precompile_op", "gpu::code_object", "gpu::host_op")


@dataclass(frozen=True)
class RewriteInstance:
    """One occurrence of a row: the ids it took from the before program and the ids it left in the
    after program (an instruction changed in place is on both sides), each in program order."""

    before: tuple[int, ...]
    after: tuple[int, ...]

    @property
    def ids(self) -> tuple[int, ...]:
        """Every id of the instance, before side first, each once."""
        return tuple(dict.fromkeys(self.before + self.after))


@dataclass(frozen=True)
class RewriteRow:
    """`before` ops -> `after` ops, `count` times. Ops are distinct names in the program order of
    the first instance."""

    before: tuple[str, ...]
    after: tuple[str, ...]
    kind: str
    instances: tuple[RewriteInstance, ...]

    @property
    def count(self) -> int:
        return len(self.instances)

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(i for inst in self.instances for i in inst.ids)

    @property
    def label(self) -> str:
        """e.g. "{add, sigmoid, mul} → pointwise × 57", "contiguous removed × 98"."""
        lhs, rhs = _ops_text(self.before), _ops_text(self.after)
        text = {
            "removed": f"{lhs} removed",
            "added": f"{rhs} added",
            "rewired": f"{lhs} inputs rewired",
            "changed": f"{lhs} changed" if self.before == self.after else f"{lhs} → {rhs}",
        }.get(self.kind, f"{lhs} → {rhs}")
        return f"{text} × {self.count}"

    def as_json(self, with_ids: bool = False) -> dict[str, Any]:
        """The index.json form: {"from": [...], "to": [...], "count": N, "kind": ...} (+ "ids")."""
        d: dict[str, Any] = {"from": list(self.before), "to": list(self.after), "count": self.count, "kind": self.kind}
        if with_ids:
            d["ids"] = [list(inst.ids) for inst in self.instances]
        return d


def _ops_text(ops: Sequence[str]) -> str:
    if not ops:
        return "∅"
    return ops[0] if len(ops) == 1 else "{" + ", ".join(ops) + "}"


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}
        self.size: dict[Any, int] = {}

    def add(self, x: Any) -> None:
        if x not in self.parent:
            self.parent[x] = x
            self.size[x] = 1

    def find(self, x: Any) -> Any:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:  # path compression keeps later finds flat
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, x: Any, y: Any) -> None:
        rx, ry = self.find(x), self.find(y)
        if rx != ry:
            self.parent[ry] = rx
            self.size[rx] += self.size.pop(ry)


class _Side:
    """One snapshot seen as top-level units: every instruction maps to the top-level instruction
    that owns the submodule it lives in (itself when it is top-level)."""

    def __init__(self, snap: ProgramSnapshot, focus: Collection[str] | None = None):
        """focus: the modules a step changed; only they and the modules that own them (up to
        main) are indexed. A step over one of 255 submodules then costs that submodule, not the
        program (summaries of every pass of a decode trace over a range were quadratic)."""
        self.snap = snap
        mods = snap.modules
        self._owner: dict[str, int] = {}
        owner_module: dict[str, str] = {}
        for m in mods:
            for name, rid in m.sub_refs:
                if name not in self._owner:
                    self._owner[name] = rid
                    owner_module[name] = m.name
        if focus is not None:
            keep = {mods[0].name} if mods else set()
            for name in focus:
                while name not in keep:
                    keep.add(name)
                    name = owner_module.get(name, name)
            mods = tuple(m for m in mods if m.name in keep)
        self.modules = mods
        self.by_id = {r.id: (m.name, r) for m in mods for r in m.instrs}
        # A submodule nobody calls (made by a pass and not used yet, or left for dead code
        # elimination) is one unit, named by its first instruction.
        main = snap.modules[0].name if snap.module_count() else None
        self._orphan_head = {
            m.name: m.instrs[0].id for m in mods if m.name != main and m.name not in self._owner and m.instrs
        }
        self.position = {r.id: k for k, r in enumerate(r for m in mods for r in m.instrs)}
        self._unit: dict[int, int] = {}

    def unit(self, i: int) -> int:
        u = self._unit.get(i)
        if u is None:
            u, seen = i, {i}
            while True:
                module = self.by_id[u][0]
                owner = self._owner.get(module, self._orphan_head.get(module))
                if owner is None or owner in seen:  # top-level, or the head of an orphan module
                    break
                seen.add(owner)
                u = owner
            self._unit[i] = u
        return u

    def op(self, i: int) -> str:
        module, r = self.by_id[i]
        if self._orphan_head.get(module) == i:
            return "submodule"  # the unit stands for the whole uncalled module
        return op_name(r)


def op_name(r: InstrRecord) -> str:
    """The op's name as rows show it; an op that wraps another (`gpu::precompile_op`, MIGraphX
    prints it `gpu::precompile_op[op=...]`) names it, else every lowered pointwise, im2col or
    concat reads the same."""
    name = r.op.name
    if name in _WRAPPING_OPS:
        inner = str(r.op.attrs.get("op", ""))
        if inner:
            return f"{name}[{inner.split('[', 1)[0]}]"
    return name


def _rewired_only(a: InstrRecord, b: InstrRecord) -> bool:
    return a.op == b.op and a.modules == b.modules and a.shape == b.shape and a.inputs != b.inputs


def summarize(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    diff: SnapshotDiff | None = None,
    replacements: Iterable[Replacement] = (),
    *,
    transient: Mapping[int, tuple[int, ...]] | None = None,
) -> list[RewriteRow]:
    """The rewrite rows of the step `before` -> `after` (most frequent first, `rewired` last).

    transient: the origins of instructions that existed only inside the step (made and replaced
    by the nested passes of a pipeline pass). An origin naming one of them is followed through
    it, so `sigmoid` fused first into an intermediate `pointwise`, then into the final one, still
    links to the final one."""
    d = diff if diff is not None else snapshot_diff(before, after)
    if d.is_noop:
        return []
    focus = {m.name for pair in differing_modules(before, after) for m in pair if m is not None}
    bs, as_ = _Side(before, focus), _Side(after, focus)
    # The touched units on each side: ("b", id) in before, ("a", id) in after.
    b_units = {bs.unit(i) for i in d.removed} | {bs.unit(i) for i in d.changed}
    a_units = {as_.unit(i) for i in d.added} | {as_.unit(i) for i in d.changed}
    # A unit whose body (submodule) changed is itself changed, even if its own record is not.
    both = (b_units & as_.by_id.keys()) | (a_units & bs.by_id.keys())
    b_units |= both & bs.by_id.keys()
    a_units |= both & as_.by_id.keys()
    uf = _UnionFind()
    for u in b_units:
        uf.add(("b", u))
    for u in a_units:
        uf.add(("a", u))
    for u in b_units & a_units:  # the same instruction, before and after
        uf.union(("b", u), ("a", u))
    _link_origins(uf, d, bs, as_, b_units, transient or {})
    rewired = {u for u in b_units & a_units if _rewired_only(bs.by_id[u][1], as_.by_id[u][1])}
    # "x took over old's uses" where x is an instruction that was already there and only had an
    # input swapped (eliminate_identity, CSE) deletes old; it does not rewrite old into x.
    _link_replacements(uf, replacements, bs, as_, b_units, a_units - rewired)
    _absorb(uf, "b", bs, b_units - a_units, b_units - rewired)
    _absorb(uf, "a", as_, a_units - b_units, a_units - rewired)
    return _rows(uf, bs, as_, b_units, a_units)


def _link_origins(
    uf: _UnionFind, d: SnapshotDiff, bs: _Side, as_: _Side, b_units: set[int], transient: Mapping[int, tuple[int, ...]]
) -> None:
    # An origin naming an untouched instruction is context (an input the new code reads), not a link.
    for i in d.added:
        ua = as_.unit(i)
        for o in _origins(as_.by_id[i][1].origin, bs, transient):
            if bs.unit(o) in b_units:
                uf.union(("a", ua), ("b", bs.unit(o)))


def _origins(direct: tuple[int, ...], bs: _Side, transient: Mapping[int, tuple[int, ...]]) -> set[int]:
    """The before-side ids `direct` names, through any transient instructions in between."""
    found, todo, seen = set(), list(direct), set(direct)
    while todo:
        o = todo.pop()
        if o in bs.by_id:
            found.add(o)
            continue
        for p in transient.get(o, ()):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return found


def _link_replacements(
    uf: _UnionFind, replacements: Iterable[Replacement], bs: _Side, as_: _Side, b_units: set[int], a_units: set[int]
) -> None:
    news: dict[int, list[int]] = {}
    for r in replacements:
        if r.old != r.new:
            news.setdefault(r.old, []).append(r.new)

    def survivors(i: int, seen: set[int]) -> Iterable[int]:
        # a replacement may itself be replaced later in the same pass (nested passes): follow it
        if i in as_.by_id:
            yield i
            return
        for n in news.get(i, ()):
            if n not in seen:
                seen.add(n)
                yield from survivors(n, seen)

    for old, targets in news.items():
        if old not in bs.by_id or bs.unit(old) not in b_units:
            continue
        for t in targets:
            for n in survivors(t, {t}):
                if as_.unit(n) in a_units:
                    uf.union(("b", bs.unit(old)), ("a", as_.unit(n)))


def _absorb(uf: _UnionFind, side: str, sd: _Side, loose: set[int], targets: set[int]) -> None:
    """Join each unlinked instruction to the rewrite its users all belong to: a `sigmoid` that
    died because the `mul` reading it was fused, a literal made for the op that reads it. Latest
    first, so a dead chain joins link by link."""
    users: dict[int, set[int]] = {}
    for m in sd.modules:  # inputs are module-local: the loose ones' users are in these modules
        for r in m.instrs:
            for i in r.inputs:
                if i in loose:
                    users.setdefault(i, set()).add(sd.unit(r.id))
    for u in sorted(loose, key=sd.position.__getitem__, reverse=True):
        if uf.size[uf.find((side, u))] > 1 or not users.get(u):
            continue
        if not users[u] <= targets:
            continue
        roots = {uf.find((side, v)) for v in users[u]}
        if len(roots) == 1:
            uf.union(roots.pop(), (side, u))


def _rows(uf: _UnionFind, bs: _Side, as_: _Side, b_units: set[int], a_units: set[int]) -> list[RewriteRow]:
    groups: dict[Any, tuple[list[int], list[int]]] = {}
    for u in b_units:
        groups.setdefault(uf.find(("b", u)), ([], []))[0].append(u)
    for u in a_units:
        groups.setdefault(uf.find(("a", u)), ([], []))[1].append(u)
    rows: dict[tuple, list[RewriteInstance]] = {}
    names: dict[tuple, tuple[tuple[str, ...], tuple[str, ...], str]] = {}
    for bl, al in groups.values():
        bl.sort(key=bs.position.__getitem__)
        al.sort(key=as_.position.__getitem__)
        kind = _kind(bl, al, bs, as_)
        b_ops = tuple(dict.fromkeys(bs.op(i) for i in bl))
        a_ops = tuple(dict.fromkeys(as_.op(i) for i in al))
        key = (kind, frozenset(b_ops), frozenset(a_ops))
        rows.setdefault(key, []).append(RewriteInstance(tuple(bl), tuple(al)))
        names.setdefault(key, (b_ops, a_ops, kind))
    out = []
    for key, insts in rows.items():
        insts.sort(
            key=lambda x: (
                bs.position.get(x.before[0], -1) if x.before else -1,
                as_.position.get(x.after[0], -1) if x.after else -1,
            )
        )
        b_ops, a_ops, kind = names[key]
        first = insts[0]  # name the ops in the program order of the first instance
        b_ops = tuple(dict.fromkeys(bs.op(i) for i in first.before)) or b_ops
        a_ops = tuple(dict.fromkeys(as_.op(i) for i in first.after)) or a_ops
        if kind == "rewired":
            continue
        out.append(RewriteRow(b_ops, a_ops, kind, tuple(insts)))
    out.sort(key=lambda r: (-r.count, _first_position(r, bs, as_)))
    rewired = [inst for key, insts in rows.items() if key[0] == "rewired" for inst in insts]
    if rewired:  # one row: swapped inputs follow from the rows above
        rewired.sort(key=lambda x: bs.position[x.before[0]])
        ops = tuple(dict.fromkeys(bs.op(x.before[0]) for x in rewired))
        out.append(RewriteRow(ops, ops, "rewired", tuple(rewired)))
    return out


def _kind(bl: list[int], al: list[int], bs: _Side, as_: _Side) -> str:
    if not al:
        return "removed"
    if not bl:
        return "added"
    if len(bl) == 1 and al == bl:
        b, a = bs.by_id[bl[0]][1], as_.by_id[al[0]][1]
        return "rewired" if _rewired_only(b, a) else "changed"
    return "rewrite"


def _first_position(row: RewriteRow, bs: _Side, as_: _Side) -> int:
    inst = row.instances[0]
    return bs.position[inst.before[0]] if inst.before else as_.position[inst.after[0]]


def record_rewrites(trace: Trace, rec: PassRecord) -> list[RewriteRow]:
    """The rows of one trace record (none for a pass that changed nothing)."""
    if not rec.changed:
        return []
    before, after = trace.snapshots(rec)
    return summarize(before, after, rec.diff, rec.replacements, transient=transient_origins(trace, rec))


def transient_origins(trace: Trace, rec: PassRecord) -> dict[int, tuple[int, ...]]:
    """Origins of the instructions that nested passes of `rec` made and a later one removed, read
    from the nested records' snapshots (none for a pass without nested passes)."""
    out: dict[int, tuple[int, ...]] = {}
    first_new = trace.snapshots(rec)[0].next_id  # ids below it existed before the step
    seen: set[int] = set()  # module snapshots are shared between records: read each once
    todo = list(rec.children)
    while todo:
        child = trace.records[todo.pop()]
        todo.extend(child.children)
        if child.after is None or child.before is None:
            continue
        # only what the nested pass changed: the rest is in the snapshot before the step
        for _, m in differing_modules(child.before, child.after):
            if m is None or id(m) in seen:
                continue
            seen.add(id(m))
            for r in m.instrs:
                if r.origin and r.id >= first_new:
                    out.setdefault(r.id, r.origin)
    return out


def index_rewrites(trace: Trace, rec: PassRecord) -> dict[str, Any]:
    """The per-pass entry `trace --out` adds to index.json: {"rewrites": [...]} for a changed pass."""
    if not rec.changed:
        return {}
    return {"rewrites": [row.as_json() for row in record_rewrites(trace, rec)]}


__all__ = [
    "KINDS",
    "RewriteInstance",
    "RewriteRow",
    "index_rewrites",
    "record_rewrites",
    "summarize",
    "op_name",
    "transient_origins",
]
