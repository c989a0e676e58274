"""Immutable snapshots of a program and structural diffs keyed by stable instruction ids.

A snapshot holds structure only: literal data is shared with the live program (it is immutable).
A module whose version did not change since the last snapshot reuses its previous record, so
snapshotting after every pass costs time only for the modules a pass touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from .ir import Instruction, Literal, Module, Program
from .op import Op
from .printer import format_literal, format_op
from .reprs import diff_html, diff_repr, snapshot_html, snapshot_repr
from .shape import Shape


@dataclass(frozen=True)
class InstrRecord:
    id: int
    op: Op
    inputs: tuple[int, ...]
    modules: tuple[str, ...]
    shape: Shape
    origin: tuple[int, ...] = ()
    literal: Literal | None = None

    @property
    def name(self) -> str:
        return self.op.name

    def same_content(self, other: InstrRecord) -> bool:
        """Equal op, inputs, submodules and shape (the literal compared by identity/content)."""
        if (
            (self.op is not other.op and self.op != other.op)
            or self.inputs != other.inputs
            or self.modules != other.modules
            or (self.shape is not other.shape and self.shape != other.shape)
        ):
            return False
        if self.literal is None or other.literal is None:
            return self.literal is other.literal
        return self.literal.same_as(other.literal)


@dataclass(frozen=True)
class ModuleSnapshot:
    name: str
    bypass: bool
    instrs: tuple[InstrRecord, ...]

    @cached_property
    def by_id(self) -> dict[int, InstrRecord]:
        return {r.id: r for r in self.instrs}

    def __len__(self) -> int:
        return len(self.instrs)

    @cached_property
    def sub_refs(self) -> tuple[tuple[str, int], ...]:
        """(submodule name, id of the instruction that takes it), in order."""
        return tuple((n, r.id) for r in self.instrs for n in r.modules)

    @cached_property
    def text(self) -> str:
        """This module as print_program prints it (header line and one line per instruction).
        Printed from the records and kept with the snapshot: a module a pass left alone is the
        same object in the next snapshot, so a program's text costs only its changed modules."""
        return print_module_records(self)


CHUNK = 64  # modules per shared chunk of a program snapshot


class _Modules(Mapping):
    """Name -> ModuleSnapshot of one program snapshot, read through its shared chunks."""

    __slots__ = ("_snap",)

    def __init__(self, snap: ProgramSnapshot):
        self._snap = snap

    def __getitem__(self, name: str) -> ModuleSnapshot:
        k = self._snap._index[name]
        return self._snap._chunks[k // CHUNK][k % CHUNK]

    def __contains__(self, name: object) -> bool:
        return name in self._snap._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._snap._index)

    def __len__(self) -> int:
        return len(self._snap._index)

    def keys(self):  # a set-like view: `a.keys() - b.keys()` as for a dict
        return self._snap._index.keys()


class ProgramSnapshot:
    """The modules of a program, in get_modules order, with its id counter and scopes.

    Modules are held in chunks of CHUNK, and a snapshot taken after a pass that changed a few
    modules shares every other chunk (and the name index) with the snapshot before it: a trace
    over a range of 255 lengths has thousands of nested passes over thousands of modules, and a
    whole module list per snapshot made memory grow with their product."""

    __slots__ = ("_chunks", "_index", "next_id", "scopes", "__dict__")

    def __init__(self, modules: Sequence[ModuleSnapshot], next_id: int, scopes: Mapping[int, str] | None = None):
        mods = tuple(modules)
        self._chunks = tuple(mods[k : k + CHUNK] for k in range(0, len(mods), CHUNK))
        self._index = {m.name: k for k, m in enumerate(mods)}
        self.next_id = next_id
        self.scopes = {} if scopes is None else scopes  # Program.scopes (shared, read-only)

    @classmethod
    def _shared(
        cls,
        chunks: tuple[tuple[ModuleSnapshot, ...], ...],
        index: dict[str, int],
        next_id: int,
        scopes: Mapping[int, str],
    ) -> ProgramSnapshot:
        snap = cls.__new__(cls)
        snap._chunks, snap._index, snap.next_id, snap.scopes = chunks, index, next_id, scopes
        return snap

    @property
    def modules(self) -> tuple[ModuleSnapshot, ...]:
        # Flattened when asked, not kept (see the class note).
        return tuple(m for c in self._chunks for m in c)

    @property
    def by_name(self) -> Mapping[str, ModuleSnapshot]:
        return _Modules(self)

    def module(self, name: str = "main") -> ModuleSnapshot:
        return self.by_name[name]

    def __repr__(self) -> str:
        return snapshot_repr(self)

    def _repr_html_(self) -> str:
        return snapshot_html(self)

    def module_count(self) -> int:
        return len(self._index)

    @property
    def by_id(self) -> dict[int, tuple[str, InstrRecord]]:
        """id -> (module name, record) over the whole program: built when asked, not kept (one
        program-sized dict per snapshot of a trace over 255 lengths was gigabytes); a caller that
        looks up many ids keeps the dict."""
        return {r.id: (m.name, r) for m in self.modules for r in m.instrs}

    def total_instructions(self) -> int:
        return sum(len(m) for m in self.modules)

    def to_program(self) -> Program:
        p = Program(next_id=self.next_id, empty=True)
        p.scopes = self.scopes
        for ms in self.modules:
            m = Module(ms.name, p)
            m.bypass = ms.bypass
            p.modules[ms.name] = m
        mods = p.modules
        for ms in self.modules:
            m = mods[ms.name]
            live: dict[int, Instruction] = {}
            for r in ms.instrs:
                inputs = [live[i] for i in r.inputs]
                ins = Instruction(m, r.op, inputs, [mods[n] for n in r.modules], r.shape, r.origin, r.literal, r.id)
                if len(inputs) == 1:
                    inputs[0]._outputs.append(ins)
                elif inputs:
                    for i in {id(i): i for i in inputs}.values():  # once per distinct input
                        i._outputs.append(ins)
                live[r.id] = ins
            link_in_order(m, live.values())
            m.version = 0
            m.rebuilt_from = ms
        return p

    @property
    def text(self) -> str:
        # Joined on demand, not kept: a trace over a range of 255 lengths has thousands of
        # snapshots of thousands of modules, whose module texts are shared.
        return "\n".join(m.text for m in self.modules)


def rebuilt_record(m: Module) -> ModuleSnapshot | None:
    """The snapshot record module `m` was rebuilt from (to_program, or a ProgramMirror's patch),
    while `m` is unedited since; else None."""
    src = m.rebuilt_from
    return src if src is not None and m.version == m.rebuilt_at else None


def print_module_records(ms: ModuleSnapshot) -> str:
    """print_module of a module snapshot without rebuilding it (the same text: params print by
    name, other instructions as @<index>, names outside main prefixed with `<module>:`)."""
    prefix = "" if ms.name == "main" else ms.name + ":"
    names: dict[int, str] = {}
    lines = [f'module: "{ms.name}"' + (" bypass" if ms.bypass else "")]
    for k, r in enumerate(ms.instrs):
        op = r.op
        if op.name == "@param":
            name = names[r.id] = prefix + op["name"]
            lines.append(f"{name} = @param:{op['name']} -> {r.shape}")
            continue
        name = names[r.id] = f"{prefix}@{k}"
        if op.name == "@literal":
            lines.append(f"{name} = @literal{format_literal(r.literal.data, False)} -> {r.shape}")
            continue
        args = ",".join(names.get(i, f"<#{i}>") for i in r.inputs)
        if op.name == "@return":
            lines.append(f"{name} = @return({args})")
            continue
        text = f"{name} = {format_op(op)}({args})"
        if r.modules:
            text += ", [" + ", ".join(r.modules) + "]"
        lines.append(f"{text} -> {r.shape}")
    return "\n".join(lines) + "\n"


_CACHE_ATTR = "_snapshot_cache"


def snapshot_module(m: Module, fresh: bool = False) -> ModuleSnapshot:
    cache = getattr(m, _CACHE_ATTR, None)
    if (
        not fresh
        and cache is not None
        and cache[0] == m.version
        and cache[1].name == m.name
        and cache[1].bypass == m.bypass
    ):
        return cache[1]
    if (
        cache is not None
        and cache[1].name == m.name
        and cache[1].bypass == m.bypass
        and _unchanged_by_identity(m, cache[1].instrs)
    ):
        # The fresh re-read after a pass, mostly: every instruction still holds the very op,
        # shape, literal and origin objects recorded, so nothing is rebuilt or compared deeply
        # (this re-read runs over the whole program after each top-level pass).
        setattr(m, _CACHE_ATTR, (m.version, cache[1]))
        return cache[1]
    # a local index, not the snapshot's cached `by_id`: kept on every snapshot of a long trace
    # it would hold a dict per module version
    before = {r.id: r for r in cache[1].instrs} if cache is not None else {}
    recs = tuple(_record(ins, before.get(ins._id)) for ins in m)
    if (
        cache is not None
        and cache[1].name == m.name
        and cache[1].bypass == m.bypass
        and _same_records(cache[1].instrs, recs)
    ):
        # A fresh read that found the module as it was: share the earlier snapshot, so memory
        # grows with what passes change, not with the program times the passes (and diff sees
        # the module as untouched by identity).
        snap = cache[1]
    else:
        snap = ModuleSnapshot(m.name, m.bypass, recs)
        if cache is not None and fresh:
            # Changed behind the version counter: the next program snapshot must re-read it.
            dirty = getattr(m.program, "_snap_dirty", None)
            if dirty is not None:
                dirty.add(m)
    setattr(m, _CACHE_ATTR, (m.version, snap))
    return snap


def _record(ins: Instruction, before: InstrRecord | None) -> InstrRecord:
    """`ins`'s record: the one of the snapshot before where nothing in it changed, so records
    are shared between consecutive snapshots and what a pass left alone is known by identity
    (the incremental evaluator's per-pass check skips those records, compiler/ref_incremental.py)."""
    inputs = tuple(i._id for i in ins._inputs)
    modules = tuple(sm.name for sm in ins._module_inputs)
    if (
        before is not None
        and before.op is ins._op
        and before.shape is ins._shape
        and before.literal is ins._literal
        and before.origin == ins._origin
        and before.inputs == inputs
        and before.modules == modules
    ):
        return before
    return InstrRecord(ins._id, ins._op, inputs, modules, ins._shape, ins._origin, ins._literal)


def link_in_order(m: Module, instrs: Iterable[Instruction]) -> None:
    """Make `instrs` the whole of m's instruction list, in that order: one pass of links, not
    Module._link_before's checks and version moves per instruction (those were a third of the
    rebuild the per-pass check does)."""
    prev, count = m._head, 0
    for ins in instrs:
        prev._next = ins
        ins._prev = prev
        prev = ins
        count += 1
    prev._next = m._tail
    m._tail._prev = prev
    m._count = count


def _unchanged_by_identity(m: Module, recs: tuple[InstrRecord, ...]) -> bool:
    if m._count != len(recs):
        return False
    for ins, r in zip(m, recs):
        if (
            ins._id != r.id
            or ins._op is not r.op
            or ins._shape is not r.shape
            or ins._literal is not r.literal
            or ins._origin is not r.origin
            or len(ins._inputs) != len(r.inputs)
            or len(ins._module_inputs) != len(r.modules)
        ):
            return False
        if any(i._id != j for i, j in zip(ins._inputs, r.inputs)) or any(
            sm.name != n for sm, n in zip(ins._module_inputs, r.modules)
        ):
            return False
    return True


def _same_records(a: tuple[InstrRecord, ...], b: tuple[InstrRecord, ...], literal_object: bool = True) -> bool:
    """Records pairwise the same: ids, origins and content; `literal_object`: a literal must be
    the very object too (a snapshot shared with a module holds the module's literals), else
    equal data is enough."""
    return len(a) == len(b) and all(
        x is y
        or (
            x.id == y.id
            and x.origin == y.origin
            and (not literal_object or x.literal is y.literal)
            and x.same_content(y)
        )
        for x, y in zip(a, b)
    )


def snapshot(p: Program, fresh: bool = False) -> ProgramSnapshot:
    """`fresh=True` re-reads every instruction instead of trusting module version counters (used
    after passes that may have mutated instructions behind the mutation API).

    Otherwise only the modules changed since the program's last snapshot are looked at (the
    program notes them), and the new snapshot shares the rest with the last one."""
    last: ProgramSnapshot | None = getattr(p, "_snap_last", None)
    dirty: set[Module] | None = getattr(p, "_snap_dirty", None)
    if fresh:
        for m in p.modules.values():
            m.__dict__.pop("_sub_modules", None)
    snap = None
    if not fresh and last is not None and dirty is not None:
        snap = _updated(p, last, dirty)
    if snap is None:
        snap = _rebuilt(p, last, fresh)
    if dirty is not None:
        dirty.clear()
        p._snap_last = snap
    return snap


def _updated(p: Program, last: ProgramSnapshot, dirty: set[Module]) -> ProgramSnapshot | None:
    """`last` with the dirty modules re-read, or None when the set or order of modules may have
    changed (a module added, removed or renamed, or a module's submodules changed)."""
    index = last._index
    if len(p.modules) != len(index):
        return None
    chunks = None
    for m in dirty:
        k = index.get(m.name)
        if k is None or p.modules.get(m.name) is not m:
            return None
        old = last._chunks[k // CHUNK][k % CHUNK]
        ms = snapshot_module(m)
        if ms is old:
            continue
        if tuple(sm.name for sm in m.sub_modules()) != _sub_names(old):
            return None
        if chunks is None:
            chunks = list(last._chunks)
        c = list(chunks[k // CHUNK])
        c[k % CHUNK] = ms
        chunks[k // CHUNK] = tuple(c)
    if chunks is None and last.next_id == p._next_id and last.scopes is p.scopes:
        return last
    return ProgramSnapshot._shared(last._chunks if chunks is None else tuple(chunks), index, p._next_id, p.scopes)


def _sub_names(ms: ModuleSnapshot) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for r in ms.instrs:
        for n in r.modules:
            seen.setdefault(n)
    return tuple(seen)


def _rebuilt(p: Program, last: ProgramSnapshot | None, fresh: bool) -> ProgramSnapshot:
    """Every module re-read in get_modules order; chunks and the name index equal to the last
    snapshot's are reused."""
    mods = [snapshot_module(m, fresh) for m in p.get_modules()]
    index = {m.name: k for k, m in enumerate(mods)}
    old_chunks: tuple = ()
    if last is not None:
        old_chunks = last._chunks
        if last._index == index:
            index = last._index
    chunks = []
    for j, k in enumerate(range(0, len(mods), CHUNK)):
        c = tuple(mods[k : k + CHUNK])
        if j < len(old_chunks) and len(old_chunks[j]) == len(c) and all(x is y for x, y in zip(old_chunks[j], c)):
            c = old_chunks[j]
        chunks.append(c)
    return ProgramSnapshot._shared(tuple(chunks), index, p._next_id, p.scopes)


def same_program(a: ProgramSnapshot, b: ProgramSnapshot) -> bool:
    """Whether two snapshots hold the very same program: modules in order, instruction ids,
    content and origins, the id counter and the scopes (what a pass run on either can see)."""
    if a is b:
        return True
    if a.next_id != b.next_id or list(a._index) != list(b._index) or a.scopes != b.scopes:
        return False
    return all(
        ma is mb or (ma.bypass == mb.bypass and _same_records(ma.instrs, mb.instrs, literal_object=False))
        for ma, mb in zip(a.modules, b.modules)
    )


@dataclass(frozen=True)
class SnapshotDiff:
    """What a pass did, keyed by stable id (across all modules)."""

    added: frozenset[int]
    removed: frozenset[int]
    changed: frozenset[int]
    modules_added: tuple[str, ...] = ()
    modules_removed: tuple[str, ...] = ()
    # replaced_by[removed id] = ids of new instructions whose origin names it
    replaced_by: dict[int, tuple[int, ...]] = field(default_factory=dict)
    after: ProgramSnapshot | None = field(default=None, repr=False, compare=False)

    @property
    def unchanged(self) -> frozenset[int]:
        """Ids present on both sides with the same content. Computed when asked, not stored: the
        set is the size of the program, and a trace over a range of lengths has thousands of
        nested passes that each touch one submodule (storing it made memory quadratic)."""
        if self.after is None:
            return frozenset()
        return frozenset(self.after.by_id.keys() - self.added - self.changed)

    @property
    def is_noop(self) -> bool:
        return not (self.added or self.removed or self.changed or self.modules_added or self.modules_removed)

    def __repr__(self) -> str:
        return diff_repr(self)

    def _repr_html_(self) -> str:
        return diff_html(self)

    def summary(self) -> str:
        if self.is_noop:
            return "no change"
        parts = [f"+{len(self.added)}", f"-{len(self.removed)}", f"~{len(self.changed)}"]
        if self.modules_added:
            parts.append(f"modules +{len(self.modules_added)}")
        if self.modules_removed:
            parts.append(f"modules -{len(self.modules_removed)}")
        return " ".join(parts)


def diff(before: ProgramSnapshot, after: ProgramSnapshot) -> SnapshotDiff:
    # A module a pass left alone is the same ModuleSnapshot object on both sides: its ids are
    # unchanged without looking at them one by one, and only the other modules are indexed. (A
    # whole-program index per snapshot made every pass cost the size of the program times the
    # number of modules, e.g. 255 submodules of a decode step traced over a range of lengths.)
    bm, am = before.by_name, after.by_name
    a: dict[int, tuple[str, InstrRecord]] = {}
    b: dict[int, tuple[str, InstrRecord]] = {}
    for ma, mb in _differing_modules(before, after):
        if ma is not None:
            a.update((r.id, (ma.name, r)) for r in ma.instrs)
        if mb is not None:
            b.update((r.id, (mb.name, r)) for r in mb.instrs)
    added = frozenset(b.keys() - a.keys())
    removed = frozenset(a.keys() - b.keys())
    changed = set()
    for i in a.keys() & b.keys():
        (ma, ra), (mb, rb) = a[i], b[i]
        if ma != mb or (ra is not rb and not ra.same_content(rb)):
            changed.add(i)
    replaced_by: dict[int, list[int]] = {}
    for i in sorted(added):  # new ids in creation order, whatever the set's layout
        for o in b[i][1].origin:
            if o in removed or o in changed:
                replaced_by.setdefault(o, []).append(i)
    same_names = before._index is after._index
    return SnapshotDiff(
        added,
        removed,
        frozenset(changed),
        () if same_names else tuple(sorted(am.keys() - bm.keys())),
        () if same_names else tuple(sorted(bm.keys() - am.keys())),
        {k: tuple(v) for k, v in replaced_by.items()},
        after,
    )


def differing_modules(before: ProgramSnapshot, after: ProgramSnapshot):
    """(before's, after's) module snapshots that are not the same object, by name (None on the
    side that lacks the module): what a step changed, found without reading unchanged modules."""
    return _differing_modules(before, after)


def _differing_modules(before: ProgramSnapshot, after: ProgramSnapshot):
    """(before's, after's) module snapshot per name whose two sides are not the same object
    (None on the side that lacks it). Two snapshots with one name index are compared chunk by
    chunk, so a pass that touched one module of thousands costs one chunk."""
    if before._index is after._index:
        for cb, ca in zip(before._chunks, after._chunks):
            if cb is not ca:
                yield from ((x, y) for x, y in zip(cb, ca) if x is not y)
        return
    bm, am = before.by_name, after.by_name
    for name, ma in bm.items():
        mb = am.get(name)
        if mb is not ma:
            yield ma, mb
    for name, mb in am.items():
        if name not in bm:
            yield None, mb


def structurally_equal(p: Program, q: Program) -> bool:
    """Same modules, and position by position the same ops, inputs, submodules, shapes and literal
    values. Instruction ids are not compared (a parsed program gets fresh ids)."""
    return p.structure_key() == q.structure_key()


def structure_key(p: Program) -> tuple:
    return p.structure_key()
