"""One Program kept equal to successive snapshots of a trace by patching what changed.

The per-pass numeric check evaluates the program after every pass, and `ProgramSnapshot.to_program`
builds every instruction of every module anew each time: for a program of hundreds of
instructions that was a sixth of a reference forward per pass, for passes that changed a handful.
`ProgramMirror.update(snap)` re-reads only the modules whose snapshot is not the object it read
last (compiler/snapshot.py shares untouched modules, and the records of untouched instructions,
between consecutive snapshots), keeps each instruction whose record is the very one it was built
from, builds the others, and relinks the module in the snapshot's order.

The mirror is for reading values (the incremental evaluator, compiler/ref_incremental.py): use
lists (`Instruction.outputs`) are not kept, and the program changes under the caller at the
next update. Anything else wants `snap.to_program()`.
"""

from __future__ import annotations

from .ir import Instruction, Module, Program
from .snapshot import ModuleSnapshot, ProgramSnapshot, differing_modules, link_in_order


class ProgramMirror:
    """`update(snap)`: a Program with snap's modules and instructions (see the module note)."""

    def __init__(self) -> None:
        self.program: Program | None = None
        self._snap: ProgramSnapshot | None = None
        # module name -> {stable id: (the record it was built from, the instruction)}
        self._built: dict[str, dict[int, tuple]] = {}

    def update(self, snap: ProgramSnapshot) -> Program:
        p, last = self.program, self._snap
        if p is None or last is None:
            p = self.program = Program(next_id=snap.next_id, empty=True)
            pairs = [(None, ms) for ms in snap.modules]
        else:
            pairs = list(differing_modules(last, snap))
        mods = p.modules
        for _, ms in pairs:  # every module exists before any instruction names it
            if ms is not None and ms.name not in mods:
                mods[ms.name] = Module(ms.name, p)
        for before, ms in pairs:
            if ms is None:
                del mods[before.name]
                self._built.pop(before.name, None)
            else:
                self._patch(mods[ms.name], ms, mods)
        p.scopes, p._next_id = snap.scopes, snap.next_id
        p._snap_dirty.clear()  # never snapshotted: the set would only grow
        self._snap = snap
        return p

    def _patch(self, m: Module, ms: ModuleSnapshot, mods: dict[str, Module]) -> None:
        old = self._built.get(ms.name, {})
        built: dict[int, tuple] = {}
        live: dict[int, Instruction] = {}
        for r in ms.instrs:
            inputs = [live[i] for i in r.inputs]
            e = old.get(r.id)
            if e is not None and e[0] is r:
                ins = e[1]
                if any(a is not b for a, b in zip(ins._inputs, inputs)):
                    ins._inputs = inputs  # the same ids, an input rebuilt
            else:
                ins = Instruction(m, r.op, inputs, [mods[n] for n in r.modules], r.shape, r.origin, r.literal, r.id)
            built[r.id] = (r, ins)
            live[r.id] = ins
        link_in_order(m, live.values())
        m._bypass = ms.bypass
        # A new version, so nothing cached by (module, version) (evaluation plans, submodule
        # lists) describes the module as it was; the snapshot record stands for it from here.
        m.version = m.version + 1
        m.__dict__.pop("_sub_modules", None)
        m.rebuilt_from, m.rebuilt_at = ms, m.version
        self._built[ms.name] = built


__all__ = ["ProgramMirror"]
