"""Pieces shared by the fusion passes: submodule creation and naming, copying instruction bodies
between modules, dependence queries, and cleanup of what a rewrite orphaned."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ..ir import Instruction, Module, Program
from ..ref import eval_instruction
from ..shape import Shape

VIEW_SKIP = ("contiguous", "broadcast", "multibroadcast")
BROADCASTS = ("broadcast", "multibroadcast")


def param_name(i: int) -> str:
    """MIGraphX's param_name(i): fused submodule parameters are x0, x1, ..."""
    return f"x{i}"


def new_submodule(program: Program, name: str, *, exact: bool = False) -> Module:
    """A bypass module named `name` if free (exact) or `name` plus the smallest free number."""
    if exact and name not in program.modules:
        m = program.create_module(name)
    else:
        m = program.create_module(program.unique_module_name(name if not exact else name + "_"))
    m.bypass = True
    return m


class SubmoduleInputs:
    """Binds outer instructions to a new submodule's parameters x0, x1, ... in first-use order:
    `bind(x)` is the parameter standing for x inside, `inputs` what the fused instruction takes.
    `mapping` (outer id -> inner instruction) may be shared with the caller's copies."""

    def __init__(self, sub: Module, mapping: dict[int, Instruction] | None = None):
        self.sub = sub
        self.inputs: list[Instruction] = []
        self.mapping = {} if mapping is None else mapping

    def bind(self, x: Instruction) -> Instruction:
        if x.id not in self.mapping:
            shape = Shape.of(x.shape.type, x.shape.lens)
            self.mapping[x.id] = self.sub.add_parameter(param_name(len(self.inputs)), shape)
            self.inputs.append(x)
        return self.mapping[x.id]


def scalar_constant(ins: Instruction) -> np.ndarray | None:
    """The value of a one-element constant, looking through broadcasts (MIGraphX's get_scalar)."""
    src = ins
    while src.name in VIEW_SKIP and len(src.inputs) == 1:
        src = src.inputs[0]
    s = src.shape
    if s.is_tuple or s.dyn_dims is not None or s.elements() != 1 or not src.can_eval():
        return None
    return np.asarray(eval_instruction(src)).reshape(-1)[:1].reshape(())


def depends_on(a: Instruction, b: Instruction) -> bool:
    """True if `a` uses `b`, directly or through other instructions."""
    seen: set[int] = set()
    stack = [a]
    while stack:
        x = stack.pop()
        for i in x.inputs:
            if i is b:
                return True
            if i.id not in seen and not i.is_builtin():
                seen.add(i.id)
                stack.append(i)
    return False


def copy_body(
    src: Module, dst: Module, params: Mapping[int, Instruction], before: Instruction | None = None
) -> list[Instruction]:
    """Copy the non-param instructions of `src` into `dst` (before `before`, else at the end),
    with src params mapped through `params` (by id). Returns the copies of src's outputs."""
    mapping: dict[int, Instruction] = dict(params)
    for ins in src:
        if ins.is_param():
            continue
        if ins.is_return():
            break
        if ins.is_literal():
            mapping[ins.id] = dst.add_literal(ins.literal)
            continue
        args = [mapping[i.id] for i in ins.inputs]
        if before is None:
            mapping[ins.id] = dst.add_instruction(ins.op, args, ins.module_inputs)
        else:
            mapping[ins.id] = dst.insert_instruction(before, ins.op, args, ins.module_inputs)
    return [mapping[o.id] for o in src.output_instructions()]


def scalar_param_shape(s: Shape) -> Shape:
    """Pointwise submodule params are scalars of the input's type (lens {1}, strides {0})."""
    return Shape.scalar(s.type)


def referenced_modules(program: Program) -> set[str]:
    """Names of the modules some instruction refers to (one scan of the program)."""
    return {m.name for mod in program.modules.values() for ins in mod for m in ins.module_inputs}


def drop_if_unused(program: Program, mods: Iterable[Module]) -> None:
    """Remove submodules nothing refers to any more (a fusion replaced their only user)."""
    mods = [m for m in mods if program.modules.get(m.name) is m]
    if not mods:
        return
    used = referenced_modules(program)
    for m in mods:
        if m.name not in used and m.name != "main":
            del program.modules[m.name]  # checked above; remove_module would scan the program again


def remove_dead(module: Module, candidates: Iterable[Instruction]) -> None:
    """Remove candidates that lost all their users, and their inputs that become unused in turn
    (a broadcast feeding an inlined scalar, ...). Params and @return are never removed."""
    stack = list(candidates)
    while stack:
        ins = stack.pop()
        if not ins.alive or ins.outputs or ins.is_param() or ins.is_return() or ins.op.has("side_effect"):
            continue
        if ins is module.last:
            continue
        inputs = list(ins.inputs)
        module.remove_instruction(ins)
        stack.extend(inputs)


def fix_order(module: Module, ins: Instruction) -> None:
    """After rewiring, make sure every user of `ins` (and of its tuple elements) comes after it."""
    order = module.index_of()
    pos = order[ins.id]
    users = [u for u in ins.outputs] + [v for u in ins.outputs if u.name == "get_tuple_elem" for v in u.outputs]
    if any(order[u.id] < pos for u in users):
        module.sort()


def ensure_order(module: Module) -> None:
    """Re-sort the module if a rewrite left a use before its definition."""
    order = module.index_of()
    if any(order[i.id] > order[ins.id] for ins in module for i in ins.inputs):
        module.sort()
