"""Immutable snapshots of a program and structural diffs keyed by stable instruction ids.

A snapshot holds structure only: literal data is shared with the live program (it is immutable).
A module whose version did not change since the last snapshot reuses its previous record, so
snapshotting after every pass costs time only for the modules a pass touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from .ir import Instruction, Literal, Module, Program
from .op import Op
from .printer import format_literal, format_op
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
        if (self.op != other.op or self.inputs != other.inputs or self.modules != other.modules
                or self.shape != other.shape):
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
    def text(self) -> str:
        """This module as print_program prints it (header line and one line per instruction).
        Printed from the records and kept with the snapshot: a module a pass left alone is the
        same object in the next snapshot, so a program's text costs only its changed modules."""
        return print_module_records(self)


@dataclass(frozen=True, eq=False)
class ProgramSnapshot:
    modules: tuple[ModuleSnapshot, ...]
    next_id: int
    scopes: Mapping[int, str] = field(default_factory=dict)  # Program.scopes (shared, read-only)

    @cached_property
    def by_name(self) -> dict[str, ModuleSnapshot]:
        return {m.name: m for m in self.modules}

    def module(self, name: str = "main") -> ModuleSnapshot:
        return self.by_name[name]

    @cached_property
    def by_id(self) -> dict[int, tuple[str, InstrRecord]]:
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
        for ms in self.modules:
            m = p.modules[ms.name]
            live: dict[int, Instruction] = {}
            for r in ms.instrs:
                ins = Instruction(m, r.op, [live[i] for i in r.inputs], [p.modules[n] for n in r.modules],
                                  r.shape, r.origin, r.literal, r.id)
                for i in {id(i): i for i in ins._inputs}.values():  # no scan of a long use list
                    i._outputs.append(ins)
                live[r.id] = ins
                m._link_before(ins, m._tail)
            m.version = 0
        return p

    @property
    def text(self) -> str:
        # Joined on demand, not kept: a trace over a range of 255 lengths has thousands of
        # snapshots of thousands of modules, whose module texts are shared.
        return "\n".join(m.text for m in self.modules)


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
    if (not fresh and cache is not None and cache[0] == m.version and cache[1].name == m.name
            and cache[1].bypass == m.bypass):
        return cache[1]
    recs = tuple(
        InstrRecord(ins._id, ins._op, tuple(i._id for i in ins._inputs),
                    tuple(sm.name for sm in ins._module_inputs), ins._shape, ins._origin, ins._literal)
        for ins in m)
    if (cache is not None and cache[1].name == m.name and cache[1].bypass == m.bypass
            and _same_records(cache[1].instrs, recs)):
        # A fresh read that found the module as it was: share the earlier snapshot, so memory
        # grows with what passes change, not with the program times the passes (and diff sees
        # the module as untouched by identity).
        snap = cache[1]
    else:
        snap = ModuleSnapshot(m.name, m.bypass, recs)
    setattr(m, _CACHE_ATTR, (m.version, snap))
    return snap


def _same_records(a: tuple[InstrRecord, ...], b: tuple[InstrRecord, ...]) -> bool:
    return len(a) == len(b) and all(x.id == y.id and x.origin == y.origin and x.literal is y.literal
                                    and x.same_content(y) for x, y in zip(a, b))


def snapshot(p: Program, fresh: bool = False) -> ProgramSnapshot:
    """`fresh=True` re-reads every instruction instead of trusting module version counters (used
    after passes that may have mutated instructions behind the mutation API)."""
    if fresh:
        for m in p.modules.values():
            m.__dict__.pop("_sub_modules", None)
    return ProgramSnapshot(tuple(snapshot_module(m, fresh) for m in p.get_modules()), p._next_id, p.scopes)


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
    for name, ma in bm.items():
        if am.get(name) is not ma:
            a.update((r.id, (name, r)) for r in ma.instrs)
    for name, mb in am.items():
        if bm.get(name) is not mb:
            b.update((r.id, (name, r)) for r in mb.instrs)
    added = frozenset(b.keys() - a.keys())
    removed = frozenset(a.keys() - b.keys())
    changed = set()
    for i in a.keys() & b.keys():
        (ma, ra), (mb, rb) = a[i], b[i]
        if ma != mb or not ra.same_content(rb):
            changed.add(i)
    replaced_by: dict[int, list[int]] = {}
    for i in sorted(added):  # new ids in creation order, whatever the set's layout
        for o in b[i][1].origin:
            if o in removed or o in changed:
                replaced_by.setdefault(o, []).append(i)
    return SnapshotDiff(
        added, removed, frozenset(changed),
        tuple(sorted(am.keys() - bm.keys())),
        tuple(sorted(bm.keys() - am.keys())),
        {k: tuple(v) for k, v in replaced_by.items()}, after)


def structurally_equal(p: Program, q: Program) -> bool:
    """Same modules, and position by position the same ops, inputs, submodules, shapes and literal
    values. Instruction ids are not compared (a parsed program gets fresh ids)."""
    return p.structure_key() == q.structure_key()


def structure_key(p: Program) -> tuple:
    return p.structure_key()
