"""Giving the instructions of one program the ids of their counterparts in another, so that two
traces of the same model under different configurations can be diffed by id like two passes.

Why: ids are stable along one trace, but two traces that part ways (a pass switched off) number
every instruction created after that point differently. Diffed by raw id, "fusion off vs on" at
the end of the pipeline showed ~1,000 added and ~1,000 removed instructions on yolov8, most of
them the same kernels under other numbers.

How (`align_ids(base, other, shared_below)`):
1. ids below `shared_below` were made before the traces parted, so they name the same
   instruction in both and stay as they are;
2. submodules (fused kernels' bodies) are matched by content: a hash over their ops, shapes,
   literals and internal wiring, independent of ids and module names; a matched body's
   instructions take the base body's ids position by position and its name;
3. the other instructions, in program order, match an unused base instruction with the same op,
   shape, (aligned) inputs and submodules; failing that, one with the same op, shape and origin
   (what a pass made out of the same source instruction, e.g. the lowered form of one
   convolution); failing that, one of the same op kind and shape with the most inputs in common
   (a changed instruction), or the only one of its kind in each (the scratch allocation), so a
   change upstream does not unmatch everything below it;
4. what is left gets fresh ids above both programs', so it can never pose as a base instruction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from migx_explore.compiler.op import format_op
from migx_explore.compiler.snapshot import InstrRecord, ModuleSnapshot, ProgramSnapshot


def align_ids(base: ProgramSnapshot, other: ProgramSnapshot, shared_below: int = 0) -> ProgramSnapshot:
    """`other` with ids (and submodule names) renamed to those of matching instructions in `base`."""
    return _Aligner(base, other, shared_below).run()


class _Aligner:
    def __init__(self, base: ProgramSnapshot, other: ProgramSnapshot, shared_below: int):
        self.base, self.other, self.shared = base, other, shared_below
        self.ids: dict[int, int] = {}  # other id -> base id (or a fresh one)
        self.names: dict[str, str] = {}  # other module name -> base module name
        self.used: set[int] = set()
        self.fresh = max(base.next_id, other.next_id)
        self._op_text: dict[int, str] = {}
        self.body_matched: set[str] = set()

    # ---- keys ------------------------------------------------------------------------------------
    def op_text(self, r: InstrRecord) -> str:
        key = id(r.op)
        text = self._op_text.get(key)
        if text is None:
            text = self._op_text[key] = format_op(r.op)
        return text

    def body_hashes(self, prog: ProgramSnapshot) -> dict[str, int]:
        """A content hash per module, independent of instruction ids and module names."""
        out: dict[str, int] = {}

        def module_hash(name: str, stack: tuple[str, ...] = ()) -> int:
            if name in out:
                return out[name]
            if name in stack or name not in prog.by_name:
                return hash(("?", name))
            inner: dict[int, int] = {}
            for r in prog.module(name).instrs:
                subs = tuple(module_hash(m, stack + (name,)) for m in r.modules)
                lit = r.literal.content_hash() if r.literal is not None else None
                inner[r.id] = hash((self.op_text(r), r.shape, tuple(inner.get(i, -1) for i in r.inputs), subs, lit))
            out[name] = hash(tuple(inner.values()))
            return out[name]

        for m in prog.modules:
            module_hash(m.name)
        return out

    # ---- matching ---------------------------------------------------------------------------------
    def run(self) -> ProgramSnapshot:
        self.match_bodies()
        by_key: dict[tuple, list[int]] = {}
        by_origin: dict[tuple, list[int]] = {}
        self.by_op: dict[tuple, list[int]] = {}
        self.base_inputs: dict[int, tuple[int, ...]] = {}
        self.by_kind: dict[tuple, list[int]] = {}
        for mname, r in self.base_records():
            if r.id >= self.shared:
                by_key.setdefault(self.strong_key(r, mname, base=True), []).append(r.id)
                if r.origin:
                    by_origin.setdefault(self.weak_key(r, mname, base=True), []).append(r.id)
                self.by_op.setdefault((mname, r.op.name, r.shape), []).append(r.id)
                self.by_kind.setdefault((mname, r.op.name), []).append(r.id)
                self.base_inputs[r.id] = r.inputs
        other_kinds = Counter(
            (self.module_name(m.name, False), r.op.name)
            for m in self.other.modules
            for r in m.instrs
            if r.id >= self.shared
        )
        for m in self.other.modules:
            if m.name in self.body_matched:
                continue  # renamed position by position already
            for r in m.instrs:
                if r.id in self.ids:
                    continue
                if r.id < self.shared:
                    self.take(r.id, r.id)
                    continue
                hit = self.pop(by_key.get(self.strong_key(r, m.name)))
                weak = self.weak_key(r, m.name) if hit is None and r.origin else None
                if weak is not None:
                    hit = self.pop(by_origin.get(weak))
                if hit is None and r.inputs:
                    hit = self.partial(r, m.name)
                kind = (self.module_name(m.name, False), r.op.name)
                if hit is None and other_kinds[kind] == 1 and len(self.by_kind.get(kind, ())) == 1:
                    hit = self.pop(list(self.by_kind[kind]))  # the one allocation of each: the same buffer
                self.take(r.id, hit)
        return self.renamed()

    def base_records(self) -> Iterable[tuple[str, InstrRecord]]:
        for m in self.base.modules:
            for r in m.instrs:
                yield m.name, r

    def match_bodies(self) -> None:
        """Submodules with the same content get the base's name and ids (position by position)."""
        base_hash, other_hash = self.body_hashes(self.base), self.body_hashes(self.other)
        free: dict[int, list[str]] = {}
        for name, h in base_hash.items():
            if name != "main":
                free.setdefault(h, []).append(name)
        for name, h in other_hash.items():
            if name == "main":
                continue
            candidates = free.get(h)
            match = (name if candidates and name in candidates else candidates[0]) if candidates else None
            if match is None:
                continue
            candidates.remove(match)
            self.names[name] = match
            self.body_matched.add(name)
            for mine, theirs in zip(self.other.module(name).instrs, self.base.module(match).instrs):
                self.ids[mine.id] = theirs.id
                self.used.add(theirs.id)

    def strong_key(self, r: InstrRecord, module: str, base: bool = False) -> tuple:
        inputs = r.inputs if base else tuple(self.ids.get(i, ("?", i)) for i in r.inputs)
        modules = r.modules if base else tuple(self.names.get(m, ("?", m)) for m in r.modules)
        lit = r.literal.content_hash() if r.literal is not None else None
        return (self.module_name(module, base), self.op_text(r), r.shape, inputs, modules, lit)

    def weak_key(self, r: InstrRecord, module: str, base: bool = False) -> tuple | None:
        """Op, shape and origin, when every origin id names the same instruction in both programs
        (origins often name instructions a later pass removed, numbered apart in each trace)."""
        origin = r.origin if base else tuple(self.ids.get(i, i) if i >= self.shared else i for i in r.origin)
        if not base and any(i >= self.shared and i not in self.ids for i in r.origin):
            return None
        return (self.module_name(module, base), self.op_text(r), r.shape, origin)

    def module_name(self, name: str, base: bool) -> str:
        return name if base else self.names.get(name, name)

    def partial(self, r: InstrRecord, module: str, look: int = 64) -> int | None:
        """The unused base instruction of the same op kind (attributes may differ: a buffer's
        offset, a kernel's key) and shape sharing the most inputs, at least one. A consumer of
        something that differs (an extra contiguous in front of it) still pairs with its
        counterpart, shown as changed, so one difference does not unmatch everything below it."""
        mine = tuple(self.ids.get(i, -1) for i in r.inputs)
        best, best_score = None, 0
        for c in [
            c for c in self.by_op.get((self.module_name(module, False), r.op.name, r.shape), ()) if c not in self.used
        ][:look]:
            theirs = self.base_inputs[c]
            score = sum(1 for a, b in zip(mine, theirs) if a == b) if len(theirs) == len(mine) else 0
            if score > best_score:
                best, best_score = c, score
        return best

    def pop(self, candidates: list[int] | None) -> int | None:
        while candidates:
            hit = candidates.pop(0)
            if hit not in self.used:
                return hit
        return None

    def take(self, mine: int, theirs: int | None) -> None:
        if theirs is None:
            theirs = self.fresh
            self.fresh += 1
        self.ids[mine] = theirs
        self.used.add(theirs)

    # ---- output ----------------------------------------------------------------------------------
    def renamed(self) -> ProgramSnapshot:
        base_names = set(self.base.by_name)
        for m in self.other.modules:  # an unmatched body must not take a base body's name
            if m.name not in self.names:
                self.names[m.name] = m.name if m.name == "main" or m.name not in base_names else f"{m.name}'"
        modules = []
        for m in self.other.modules:
            recs = tuple(
                InstrRecord(
                    self.ids.get(r.id, r.id),
                    r.op,
                    tuple(self.ids.get(i, i) for i in r.inputs),
                    tuple(self.names.get(n, n) for n in r.modules),
                    r.shape,
                    tuple(self.ids.get(i, i) for i in r.origin),
                    r.literal,
                )
                for r in m.instrs
            )
            modules.append(ModuleSnapshot(self.names[m.name], m.bypass, recs))
        return ProgramSnapshot(tuple(modules), max(self.fresh, self.base.next_id))


# For aligners that match differently (migraphx/trace.py keeps module names, migraphx/compare.py
# matches literals by shape): subclass and override a key or a step.
IdAligner = _Aligner

__all__ = ["IdAligner", "align_ids"]
