"""Modules and programs, with the mutation API every pass goes through (instructions and
literals live in compiler/instruction.py and are re-exported here).

Identity: every instruction gets an `id` from its program's counter when created. The id never
changes while the instruction lives (`replace_instruction` mutates in place and keeps it). An
instruction created during a pass records in `origin` the ids it came from: the instructions a
matcher bound (`Program.provenance`) and any instruction whose uses it took over
(`replace_all_uses`). Diffs, graph colouring and "where did this node go" rest on this.

Claims: `replace_all_uses(old, new)` is a claim that `new` computes the value `old` did. While a
pass runs, the pass manager collects these claims (`Replacement`: old id, new id, the matcher
rule applying at the time) so numeric bisect compares each value only with the one it claims
to equal, never with whatever it was derived from.

Modules keep instructions in a doubly linked list, so passes insert and remove in O(1) while
sweeping. All mutation goes through Module methods (Instruction fields are read-only properties),
which lets a module keep a version counter that snapshots use to skip unchanged modules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import IRError
from .instruction import Instruction, Literal, Sentinel  # noqa: F401  (Literal re-exported)
from .instruction_order import drop_user, stable_topological_order
from .ir_checks import remember_shape, structure_key, validate_module
from .op import Op, compute_shape
from .printer import print_module, print_program
from .shape import Shape


@dataclass(frozen=True)
class Replacement:
    """`new` took over every use of `old`: a claim that it computes the same value."""

    old: int
    new: int
    rule: str = ""  # the matcher rule being applied ("" outside rules)
    module: str = "main"


class Module:
    def __init__(self, name: str, program: Program):
        self.name = name
        self.program = program
        self._bypass = False
        self._head = Sentinel()
        self._tail = Sentinel()
        self._head._next = self._tail
        self._tail._prev = self._head
        self._count = 0
        self.version = 0
        # The snapshot record to_program rebuilt this module from: its structure while its version
        # is still `rebuilt_at` (snapshot.rebuilt_record; snapshot_mirror.py re-points it).
        self.rebuilt_from: Any = None
        self.rebuilt_at = 0

    # A module whose version or bypass flag moved is noted on its program, so the next snapshot
    # re-reads only those modules (compiler/snapshot.py) instead of looking at every module.
    @property
    def version(self) -> int:
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        self._version = value
        dirty = getattr(self.program, "_snap_dirty", None)
        if dirty is not None:
            dirty.add(self)

    @property
    def bypass(self) -> bool:
        return self._bypass

    @bypass.setter
    def bypass(self, value: bool) -> None:
        self._bypass = value
        self.version = self.version

    # iteration --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Instruction]:
        """Forward iteration that tolerates removal of the current instruction."""
        ins = self._head._next
        while ins is not self._tail:
            yield ins
            # Removal keeps a dead instruction's links, so we can step past it (and past a run of
            # dead successors); an instruction inserted after the current one is visited next.
            ins = ins._next
            while ins is not self._tail and not ins._alive:
                ins = ins._next

    def __reversed__(self) -> Iterator[Instruction]:
        ins = self._tail._prev
        while ins is not self._head:
            yield ins
            ins = ins._prev
            while ins is not self._head and not ins._alive:
                ins = ins._prev

    def __len__(self) -> int:
        return self._count

    def instructions(self) -> list[Instruction]:
        return list(self)

    @property
    def first(self) -> Instruction | None:
        return self._head.next

    @property
    def last(self) -> Instruction | None:
        return self._tail.prev

    def end(self) -> Instruction:
        """Position marker 'after the last instruction' for insert_instruction(before=...)."""
        return self._tail

    def params(self) -> list[Instruction]:
        return [i for i in self if i.is_param()]

    def param_names(self) -> list[str]:
        return [i.param_name for i in self.params()]

    def get_parameter(self, name: str) -> Instruction:
        for i in self:
            if i.is_param() and i.param_name == name:
                return i
        raise IRError(f"module {self.name}: no parameter named {name!r}; have {', '.join(self.param_names())}")

    def get_parameter_shapes(self) -> dict[str, Shape]:
        return {i.param_name: i.shape for i in self.params()}

    def return_instruction(self) -> Instruction | None:
        last = self.last
        return last if last is not None and last.is_return() else None

    def output_instructions(self) -> list[Instruction]:
        ret = self.return_instruction()
        if ret is not None:
            return list(ret._inputs)
        return [self.last] if self.last is not None else []

    def output_shapes(self) -> list[Shape]:
        return [i.shape for i in self.output_instructions()]

    def sub_modules(self) -> list[Module]:
        # Kept per version: get_modules walks every module's submodules after each pass (each
        # snapshot), which cost the program's size per pass, times thousands of nested passes
        # over a decode step split into 255 submodules. Every mutation through the Module API
        # bumps the version; snapshot(fresh=True) drops the cache (a pass may have gone around it).
        cached = self.__dict__.get("_sub_modules")
        if cached is not None and cached[0] == self.version:
            return list(cached[1])
        seen: dict[str, Module] = {}
        for ins in self:
            for m in ins._module_inputs:
                seen.setdefault(m.name, m)
        self._sub_modules = (self.version, tuple(seen.values()))
        return list(seen.values())

    def index_of(self) -> dict[int, int]:
        return {ins._id: k for k, ins in enumerate(self)}

    # creation --------------------------------------------------------------------------------------
    def _new(
        self,
        op: Op,
        inputs: Sequence[Instruction],
        module_inputs: Sequence[Module] = (),
        shape: Shape | None = None,
        literal: Literal | None = None,
    ) -> Instruction:
        for i in inputs:
            if not isinstance(i, Instruction) or isinstance(i, Sentinel):
                raise IRError(f"module {self.name}: {op.name} input {i!r} is not an instruction")
            if not i._alive:
                raise IRError(f"module {self.name}: {op.name} uses removed instruction #{i._id} ({i.name})")
            if i._module is not self:
                raise IRError(
                    f"module {self.name}: {op.name} uses #{i._id} ({i.name}) from module "
                    f"{i._module.name}; values cannot cross modules"
                )
        ruled = shape is None
        shape = compute_shape(op, [i._shape for i in inputs], list(module_inputs)) if ruled else shape
        prog = self.program
        ins = Instruction(self, op, inputs, module_inputs, shape, prog._current_origin(), literal, prog._take_id())
        if ruled:
            remember_shape(self, ins)
        # Once per distinct input: `ins` is new, so no use list holds it yet (a membership test
        # here scanned the whole use list of a widely shared value: O(n^2) on long chains).
        for i in {id(i): i for i in inputs}.values():
            i._outputs.append(ins)
        return ins

    def _link_before(self, ins: Instruction, before: Instruction) -> Instruction:
        if before is not self._tail and before._module is not self:
            raise IRError(f"module {self.name}: insertion point #{before._id} is in module {before._module.name}")
        prev = before._prev
        prev._next = ins
        ins._prev = prev
        ins._next = before
        before._prev = ins
        self._count += 1
        self.version += 1
        return ins

    def add_instruction(
        self,
        op: Op,
        inputs: Sequence[Instruction] = (),
        module_inputs: Sequence[Module] = (),
    ) -> Instruction:
        """Append at the end (before a trailing @return, if there is one)."""
        ret = self.return_instruction()
        return self.insert_instruction(ret if ret is not None else self._tail, op, inputs, module_inputs)

    def insert_instruction(
        self, before: Instruction, op: Op, inputs: Sequence[Instruction] = (), module_inputs: Sequence[Module] = ()
    ) -> Instruction:
        return self._link_before(self._new(op, inputs, module_inputs), before)

    def insert_after(
        self, after: Instruction, op: Op, inputs: Sequence[Instruction] = (), module_inputs: Sequence[Module] = ()
    ) -> Instruction:
        return self.insert_instruction(after._next, op, inputs, module_inputs)

    def add_parameter(self, name: str, shape: Shape) -> Instruction:
        if any(p.param_name == name for p in self.params()):
            raise IRError(f"module {self.name}: parameter {name!r} already exists")
        params = self.params()
        before = params[-1]._next if params else self._head._next
        return self._link_before(self._new(Op("@param", name=name), (), (), shape), before)

    def add_literal(self, value: Any, shape: Shape | None = None, *, before: Instruction | None = None) -> Instruction:
        lit = value if isinstance(value, Literal) else Literal(value, shape)
        if before is None:
            # Literals go at the end of the leading run of params and literals, so a printed
            # module reads: params, literals (in creation order), code.
            before = self._head._next
            while before is not self._tail and before._op.name in ("@param", "@literal"):
                before = before._next
        return self._link_before(self._new(Op("@literal"), (), (), lit.shape, lit), before)

    def add_return(self, inputs: Sequence[Instruction]) -> Instruction:
        if self.return_instruction() is not None:
            raise IRError(f"module {self.name} already has a @return; use replace_return")
        return self._link_before(self._new(Op("@return"), inputs), self._tail)

    def replace_return(self, inputs: Sequence[Instruction]) -> Instruction:
        ret = self.return_instruction()
        if ret is None:
            return self.add_return(inputs)
        return self.replace_instruction(ret, ret.op, inputs)

    # rewriting -----------------------------------------------------------------------------------
    def replace_instruction(
        self,
        ins: Instruction,
        op: Op | None = None,
        inputs: Sequence[Instruction] | None = None,
        module_inputs: Sequence[Module] | None = None,
    ) -> Instruction:
        """Change op and/or inputs in place; the id is kept, the shape recomputed.

        If the new shape differs from the old one every user is re-checked, so a rewrite cannot
        silently leave users with stale shapes."""
        self._check_owned(ins)
        log = self.program.replacement_log
        if log is not None and self.program._rule_stack and (op is not None or inputs is not None):
            # A rule rewrote `ins` in place: it still claims its old value (the rule is recorded).
            log.append(Replacement(ins._id, ins._id, self.program._rule_stack[-1], self.name))
        op = ins._op if op is None else op
        new_inputs = list(ins._inputs) if inputs is None else list(inputs)
        mods = list(ins._module_inputs) if module_inputs is None else list(module_inputs)
        for i in new_inputs:
            if i._module is not self or not i._alive:
                raise IRError(f"module {self.name}: replacement input #{i._id} ({i.name}) is not live in this module")
            if i is ins:
                raise IRError(f"module {self.name}: #{ins._id} ({op.name}) cannot use itself")
        ruled = op.name not in ("@param", "@literal")
        shape = compute_shape(op, [i._shape for i in new_inputs], mods) if ruled else ins._shape
        for old in ins._inputs:
            if old not in new_inputs and ins in old._outputs:
                old._outputs.remove(ins)
        for i in new_inputs:
            if ins not in i._outputs:
                i._outputs.append(ins)
        ins._op, ins._inputs, ins._module_inputs = op, new_inputs, mods
        old_shape, ins._shape = ins._shape, shape
        if ruled:
            remember_shape(self, ins)
        self.version += 1
        if old_shape != shape:
            for user in list(ins._outputs):
                if not user.is_return():
                    self.replace_instruction(user)
        return ins

    def replace_all_uses(self, old: Instruction, new: Instruction) -> Instruction:
        """Make every user of `old` (including @return) use `new` instead. Returns `new`."""
        self._check_owned(old)
        self._check_owned(new)
        if old is new:
            return new
        log = self.program.replacement_log
        if log is not None:
            rules = self.program._rule_stack
            log.append(Replacement(old._id, new._id, rules[-1] if rules else "", self.name))
        epoch = self.program._epoch
        if new._id >= epoch and old._id not in new._origin:
            # A value created in this pass takes over old's uses: record where it came from (and,
            # if old was itself new in this pass, where old came from).
            extra = (old._id,) + (old._origin if old._id >= epoch else ())
            new._origin = tuple(dict.fromkeys(new._origin + extra))
        for user in list(old._outputs):
            if user is new:
                continue
            user._inputs = [new if i is old else i for i in user._inputs]
            old._outputs.remove(user)
            if user not in new._outputs:
                new._outputs.append(user)
            if user._shape is not None and not user.is_return() and new._shape != old._shape:
                self.replace_instruction(user)
        self.version += 1
        return new

    def replace(self, old: Instruction, op_or_new: Op | Instruction, inputs: Sequence[Instruction] = ()) -> Instruction:
        """MIGraphX-style replace: with an Instruction, redirect uses; with an Op, insert a new
        instruction right before `old` and redirect uses to it. `old` is left for DCE."""
        if isinstance(op_or_new, Instruction):
            return self.replace_all_uses(old, op_or_new)
        new = self.insert_instruction(old, op_or_new, inputs)
        return self.replace_all_uses(old, new)

    def remove_instruction(self, ins: Instruction) -> None:
        self._check_owned(ins)
        if ins._outputs:
            users = ", ".join(f"#{u._id} ({u.name})" for u in ins._outputs)
            raise IRError(f"module {self.name}: cannot remove #{ins._id} ({ins.name}); still used by {users}")
        for i in {id(i): i for i in ins._inputs}.values():
            drop_user(i._outputs, ins)
        ins._prev._next = ins._next
        ins._next._prev = ins._prev
        ins._alive = False
        self._count -= 1
        self.version += 1

    def remove_instructions(self, instrs: Iterable[Instruction]) -> None:
        """Remove a set of instructions that only use each other (users first)."""
        todo = list(instrs)
        ids = {i._id for i in todo}
        for ins in todo:
            ext = [u for u in ins._outputs if u._id not in ids]
            if ext:
                raise IRError(
                    f"module {self.name}: cannot remove #{ins._id} ({ins.name}); still used by "
                    + ", ".join(f"#{u._id} ({u.name})" for u in ext)
                )
        for ins in todo:
            for i in {id(i): i for i in ins._inputs}.values():
                drop_user(i._outputs, ins)
            ins._outputs.clear()
        for ins in todo:
            ins._prev._next = ins._next
            ins._next._prev = ins._prev
            ins._alive = False
            self._count -= 1
        self.version += 1

    def move_instruction(self, ins: Instruction, before: Instruction) -> None:
        self._check_owned(ins)
        if ins is before:
            return
        ins._prev._next = ins._next
        ins._next._prev = ins._prev
        self._count -= 1
        self._link_before(ins, before)

    def move_before_users(self, ins: Instruction) -> None:
        """Hoist nothing, but make sure `ins` comes before all its users (after rewiring)."""
        order = self.index_of()
        first = min((order[u._id] for u in ins._outputs), default=None)
        if first is not None and order[ins._id] > first:
            target = next(u for u in self if order[u._id] == first)
            self.move_instruction(ins, target)

    def sort(self) -> None:
        """Stable topological sort: keep the current order except where a use precedes its def."""
        ins_list = list(self)
        result = stable_topological_order(ins_list)
        if [i._id for i in result] == [i._id for i in ins_list]:
            return
        self._head._next = self._tail
        self._tail._prev = self._head
        self._count = 0
        for ins in result:
            self._link_before(ins, self._tail)

    def _check_owned(self, ins: Instruction) -> None:
        if ins._module is not self:
            raise IRError(f"instruction #{ins._id} ({ins.name}) belongs to module {ins._module.name}, not {self.name}")
        if not ins._alive:
            raise IRError(f"module {self.name}: instruction #{ins._id} ({ins.name}) was removed")

    # validation --------------------------------------------------------------------------------
    def validate(self, *, submodule_stamp: Callable[[Module], object] | None = None) -> None:
        """Check use lists, def-before-use, shapes and references; raise ValidationError naming the
        module and instruction at fault (compiler/ir_checks.py, which says what the stamp is)."""
        validate_module(self, submodule_stamp)

    def __repr__(self) -> str:
        return f"<Module {self.name} ({self._count} instructions)>"

    def __str__(self) -> str:
        return print_module(self)


class Program:
    def __init__(self, *, next_id: int = 0, empty: bool = False):
        """A program with an empty main module (`empty=True`: no modules, ids from `next_id`; how
        copies and snapshots rebuild one with the same ids)."""
        self.modules: dict[str, Module] = {}
        # Modules changed since the last snapshot, and that snapshot (compiler/snapshot.py).
        self._snap_dirty: set[Module] = set()
        self._snap_last = None
        self._next_id = next_id
        self._epoch = next_id  # ids >= epoch were created during the current pass
        self._origin_stack: list[tuple[int, ...]] = []
        self._rule_stack: list[str] = []
        # Where replace_all_uses records its claims while a pass runs (set by the pass manager).
        self.replacement_log: list[Replacement] | None = None
        # The model's own scope of each imported instruction ("model.8/m.0/cv1"), by id. Set by
        # the importer and shared, never changed, by copies and snapshots; what passes create
        # inherits a scope through `origin` (the explorer derives it), unless the pass knows
        # better and assigns a new, extended mapping (rewrite_rnn: one scope per time step).
        self.scopes: Mapping[int, str] = {}
        if not empty:
            self.create_module("main")

    @property
    def main(self) -> Module:
        return self.modules["main"]

    def _take_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i

    def _current_origin(self) -> tuple[int, ...]:
        return self._origin_stack[-1] if self._origin_stack else ()

    def begin_epoch(self) -> None:
        """Mark the start of a pass: instructions created from now on count as new for provenance."""
        self._epoch = self._next_id

    @contextlib.contextmanager
    def provenance(self, sources: Iterable[Instruction | int], rule: str = ""):
        """Instructions created inside this block record `sources` (and their origins, if they are
        themselves new) as where they came from; replacements made inside it name `rule`."""
        ids: list[int] = []
        for s in sources:
            if isinstance(s, Instruction):
                ids.append(s._id)
                if s._id >= self._epoch:
                    ids.extend(s._origin)
            else:
                ids.append(int(s))
        self._origin_stack.append(tuple(dict.fromkeys(ids)))
        if rule:
            self._rule_stack.append(rule)
        try:
            yield
        finally:
            self._origin_stack.pop()
            if rule:
                self._rule_stack.pop()

    def create_module(self, name: str) -> Module:
        if name in self.modules:
            raise IRError(f"module {name!r} already exists")
        m = Module(name, self)
        self.modules[name] = m
        return m

    def unique_module_name(self, prefix: str) -> str:
        n = 0
        while f"{prefix}{n}" in self.modules:
            n += 1
        return f"{prefix}{n}"

    def remove_module(self, name: str) -> None:
        if name == "main":
            raise IRError("cannot remove the main module")
        for m in self.modules.values():
            for ins in m:
                if any(sm.name == name for sm in ins._module_inputs):
                    raise IRError(f"cannot remove module {name!r}: used by {m.name} #{ins._id} ({ins.name})")
        del self.modules[name]

    def rename_module(self, old: str, new: str) -> None:
        if new in self.modules:
            raise IRError(f"module {new!r} already exists")
        m = self.modules.pop(old)
        m.name = new
        self.modules[new] = m
        m.version += 1

    def get_modules(self) -> list[Module]:
        """main first, then submodules depth-first in order of first use, then unused modules."""
        out: list[Module] = []
        seen: set[str] = set()

        def walk(m: Module) -> None:
            if m.name in seen:
                return
            seen.add(m.name)
            out.append(m)
            for sm in m.sub_modules():
                walk(sm)

        walk(self.main)
        for m in self.modules.values():
            if m.name not in seen:
                walk(m)
        return out

    def remove_unused_modules(self) -> list[str]:
        used = {m.name for m in self.get_modules_reachable()}
        dead = [n for n in self.modules if n not in used]
        for n in dead:
            del self.modules[n]
        return dead

    def get_modules_reachable(self) -> list[Module]:
        out: list[Module] = []
        seen: set[str] = set()
        stack = [self.main]
        while stack:
            m = stack.pop()
            if m.name in seen:
                continue
            seen.add(m.name)
            out.append(m)
            stack.extend(m.sub_modules())
        return out

    def validate(self) -> None:
        for m in self.get_modules():
            m.validate()

    def total_instructions(self) -> int:
        return sum(len(m) for m in self.modules.values())

    def copy(self) -> Program:
        """Structural copy with the same ids (literal data shared, not copied)."""
        p = Program(next_id=self._next_id, empty=True)
        p.scopes = self.scopes
        for m in self.get_modules():
            p.modules[m.name] = Module(m.name, p)
            p.modules[m.name].bypass = m.bypass
        for m in self.get_modules():
            copy = p.modules[m.name]
            live: dict[int, Instruction] = {}
            for ins in m:
                uses = ([live[i._id] for i in ins._inputs], [p.modules[s.name] for s in ins._module_inputs])
                new = Instruction(copy, ins._op, *uses, ins._shape, ins._origin, ins._literal, ins._id)
                for i in new._inputs:
                    if new not in i._outputs:
                        i._outputs.append(new)
                live[ins._id] = new
                copy._link_before(new, copy._tail)
            copy.version = 0
        return p

    def structure_key(self) -> tuple:
        """Modules and, position by position, ops, inputs, submodules, shapes and literal values.
        Instruction ids are left out (a parsed program gets fresh ids)."""
        return structure_key(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return self.structure_key() == other.structure_key()

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return print_program(self)

    def __repr__(self) -> str:
        return f"<Program {len(self.modules)} modules, {self.total_instructions()} instructions>"
