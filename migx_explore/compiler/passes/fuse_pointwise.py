"""fuse_pointwise (MIGraphX src/fuse_pointwise.cpp).

1. Every op with the `pointwise` trait becomes `pointwise(inputs...), [<mod>:pointwiseN]`: a bypass
   submodule with scalar params x0, x1, ... and @return. One-element constant inputs (through
   broadcasts) are inlined into the submodule as scalar literals.
2. Then, up to 8 times: optionally move reshapes (enable_rewrite_reshapes) and broadcasts
   (enable_rewrite_broadcasts) from between two pointwise ops onto the producer's inputs, and merge
   each pointwise op into its consumer when the consumer is its only user. The merged op keeps the
   producer's submodule name (MIGraphX extends the producer's module); the consumer's module is
   deleted at once rather than left behind for dead_code_elimination.
3. With enable_multi_output, a producer that has other users is merged into a pointwise consumer
   too, and so are sibling pointwise ops that read a common value; the merged submodule returns a
   tuple and each old value becomes a `get_tuple_elem`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Instruction, Module
from ..op import Op
from ..pass_infra import Pass
from ..shape import Shape
from .eliminate_identity import EliminateIdentity
from .fusion_helpers import (
    BROADCASTS,
    copy_body,
    depends_on,
    drop_if_unused,
    fix_order,
    new_submodule,
    param_name,
    remove_dead,
    scalar_constant,
    scalar_param_shape,
)

RESHAPES = ("reshape", "squeeze", "unsqueeze", "flatten")
# Views that only add or drop unit axes: any strides take them (a broadcast input included), where
# reshape and flatten regroup axes and need standard inputs.
UNIT_AXIS_VIEWS = ("squeeze", "unsqueeze")
MAX_ROUNDS = 8  # MIGraphX's loop bound in fuse_pointwise::apply


# ---- step 1: one submodule per pointwise op ------------------------------------------------------
def create_pointwise_modules(module: Module) -> bool:
    changed = False
    orphans: list[Instruction] = []
    names = _FreshNames(module.program, f"{module.name}:pointwise")
    for ins in list(module):
        if not ins.op.has("pointwise") or ins.module_inputs or ins.shape.is_tuple:
            continue
        consts = {i.id: scalar_constant(i) for i in ins.inputs}
        if all(v is not None for v in consts.values()):
            consts[ins.inputs[0].id] = None  # a pointwise op needs at least one input
        sub = names.create()
        mapping: dict[int, Instruction] = {}
        pw_inputs: list[Instruction] = []
        for i in ins.inputs:
            if i.id in mapping:
                continue
            if consts[i.id] is not None:
                mapping[i.id] = sub.add_literal(consts[i.id], Shape.scalar(i.shape.type))
                orphans.append(i)
            else:
                mapping[i.id] = sub.add_parameter(param_name(len(pw_inputs)), scalar_param_shape(i.shape))
                pw_inputs.append(i)
        sub.add_return([sub.add_instruction(ins.op, [mapping[i.id] for i in ins.inputs])])
        module.replace_instruction(ins, Op("pointwise"), pw_inputs, [sub])
        changed = True
    remove_dead(module, orphans)
    return changed


class _FreshNames:
    """new_submodule's smallest-free-number names, found without rescanning from 0 for every op
    (which made creating n submodules O(n^2))."""

    def __init__(self, program, prefix: str):
        self.program, self.prefix, self.n = program, prefix, 0

    def create(self) -> Module:
        while f"{self.prefix}{self.n}" in self.program.modules:
            self.n += 1
        return new_submodule(self.program, f"{self.prefix}{self.n}", exact=True)


# ---- merging -------------------------------------------------------------------------------------
def _values(x: Instruction) -> list[list[Instruction]]:
    """For each output of a pointwise op, the instructions that carry it (x, or its get_tuple_elems)."""
    n = len(x.module_inputs[0].output_instructions())
    if not x.shape.is_tuple:
        return [[x]]
    out: list[list[Instruction]] = [[] for _ in range(n)]
    for u in x.outputs:
        if u.name == "get_tuple_elem":
            out[u.op["index"]].append(u)
    return out


def _handle_index(a: Instruction, h: Instruction) -> int | None:
    """Which output of pointwise `a` the instruction `h` carries, if any."""
    if h is a and not a.shape.is_tuple:
        return 0
    if h.name == "get_tuple_elem" and h.inputs[0] is a:
        return h.op["index"]
    return None


def _producer_of(h: Instruction) -> Instruction | None:
    if h.name == "pointwise":
        return h
    if h.name == "get_tuple_elem" and h.inputs[0].name == "pointwise":
        return h.inputs[0]
    return None


def _tuple_consumers_ok(a: Instruction) -> bool:
    # a tuple-valued pointwise may only be read through get_tuple_elem
    return not a.shape.is_tuple or all(u.name == "get_tuple_elem" for u in a.outputs)


class Renames:
    """Module bookkeeping for one fuse_pointwise run. A merged submodule gets a temporary name and
    the name it should end up with (its producer's); modules a merge replaced may be dead. Both are
    settled once at the end, so a long chain of merges does not rescan the program each time."""

    def __init__(self, module: Module):
        self.module = module
        self.final: dict[str, str] = {}  # temporary name -> wanted name
        self.maybe_dead: list[Module] = []
        self.owned: set[str] = set()  # submodules this run created: only their one instruction uses them
        self._bodies: dict[str, _Body] = {}

    def body(self, sub: Module, inputs: list[Instruction]) -> _Body:
        """The extension state of `sub` (whose params stand for `inputs`), kept across merges."""
        b = self._bodies.get(sub.name)
        if b is None or b.module is not sub or [x.id for x in b.inputs] != [x.id for x in inputs]:
            old, b = b, _Body(sub, inputs)
            if old is not None and old.module is sub:
                b.sources = old.sources  # the body's provenance survives a change of its inputs
            self._bodies[sub.name] = b
        return b

    def settle(self) -> None:
        prog = self.module.program
        self._record_origins()
        drop_if_unused(prog, self.maybe_dead)
        for tmp, want in self.final.items():
            if tmp in prog.modules:
                free = want not in prog.modules
                prog.rename_module(tmp, want if free else prog.unique_module_name(f"{self.module.name}:pointwise"))
        self.final.clear()
        self.maybe_dead.clear()

    def _record_origins(self) -> None:
        """Give each fused op the provenance of everything merged into it, once: recording it at
        every merge of a chain (each origin holding all the earlier ones) cost O(n^2)."""
        for body in self._bodies.values():
            m = body.user
            if m is None or not m.alive:
                continue
            with self.module.program.provenance(body.sources):
                final = self.module.insert_instruction(m, m.op, list(m.inputs), list(m.module_inputs))
            self.module.replace_all_uses(m, final)
            self.module.remove_instruction(m)
        self._bodies.clear()


def merge_pointwise(module: Module, a: Instruction, b: Instruction, names: Renames) -> Instruction:
    """Fuse pointwise `a` and `b` into one pointwise placed where `b` was. Values of `a` that `b`
    reads are computed inside; values of `a` with other users become extra (tuple) outputs. The
    merged op's full provenance ([a, b] and all they came from) is recorded by `names.settle()`."""
    with module.program.provenance([b]):
        return _merge(module, a, b, names)


def _merge(module: Module, a: Instruction, b: Instruction, names: Renames) -> Instruction:
    am, bm = a.module_inputs[0], b.module_inputs[0]
    a_vals, b_vals = _values(a), _values(b)
    keep_a = [k for k, hs in enumerate(a_vals) if any(u is not b for h in hs for u in h.outputs)]
    # Only a value of `a` read outside `b`, or a sibling merge, can leave a use above the new op.
    may_reorder = bool(keep_a) or not any(_handle_index(a, x) is not None for x in b.inputs)
    names.final.pop(bm.name, None)
    names.maybe_dead.append(bm)
    if am.name in names.owned:
        # Extend the producer's own body with a copy of the consumer's: a chain of n merges then
        # costs O(n), where copying both bodies into a fresh module each time cost O(n^2).
        body = names.body(am, a.inputs)
    else:  # a submodule from before this pass may be shared: copy it into a fresh one first
        want = names.final.pop(am.name, am.name)
        names.maybe_dead.append(am)
        sub = new_submodule(module.program, f"{module.name}:pointwise~")
        names.final[sub.name] = want
        names.owned.add(sub.name)
        body = names.body(sub, [])
        copy_body(am, sub, {p.id: body.param_for(x) for p, x in zip(am.params(), a.inputs)})
    a_rets = body.module.output_instructions()
    b_map = {}
    for p, x in zip(bm.params(), b.inputs):
        k = _handle_index(a, x)
        b_map[p.id] = a_rets[k] if k is not None else body.param_for(x)
    b_rets = body.append(bm, b_map)
    outs = [a_rets[k] for k in keep_a] + b_rets
    body.module.replace_return(outs)
    merged = module.insert_instruction(b, Op("pointwise"), body.inputs, [body.module])
    body.sources += [a.id, *a.origin, b.id, *b.origin]
    body.user = merged
    carriers = [a_vals[k] for k in keep_a] + b_vals
    for idx, hs in enumerate(carriers):
        if len(outs) == 1:
            new = merged
        else:
            new = module.insert_instruction(b, Op("get_tuple_elem", index=idx), [merged])
        for h in hs:
            module.replace_all_uses(h, new)
    dead = [h for hs in b_vals for h in hs if h is not b] + [b]
    dead += [h for hs in a_vals for h in hs if h is not a] + [a]
    module.remove_instructions(dead)
    if may_reorder:
        fix_order(module, merged)
    return merged


class _Body:
    """A pointwise submodule being extended: the outer values its params stand for, and where new
    literals go, kept here so one extension costs the size of what it adds, not of the body."""

    def __init__(self, module: Module, inputs: list[Instruction]):
        self.module = module
        self.inputs = list(inputs)
        self.sources: list[int] = []  # ids merged into it so far (with their origins), for provenance
        self.user: Instruction | None = None  # the pointwise op that runs this body now
        self.params: dict[int, Instruction] = {}
        by_name = {}
        ins = module.first
        while ins is not None and ins.is_param():  # params are the module's leading run
            by_name[ins.param_name] = ins
            ins = ins.next
        for k, x in enumerate(self.inputs):
            self.params[x.id] = by_name[param_name(k)]

    def param_for(self, x: Instruction) -> Instruction:
        if x.id not in self.params:
            self.params[x.id] = self.module.add_parameter(param_name(len(self.inputs)), scalar_param_shape(x.shape))
            self.inputs.append(x)
        return self.params[x.id]

    def _code_start(self) -> Instruction | None:
        ins = self.module.first
        while ins is not None and (ins.is_param() or ins.is_literal()):
            ins = ins.next
        return ins

    def append(self, src: Module, mapping: dict[int, Instruction]) -> list[Instruction]:
        """Copy src's body (params mapped by id) before the @return; returns src's outputs' copies."""
        mapping = dict(mapping)
        code_start = None
        for ins in src:
            if ins.is_param():
                continue
            if ins.is_return():
                break
            if ins.is_literal():
                code_start = code_start or self._code_start()  # literals follow params and literals
                mapping[ins.id] = self.module.add_literal(ins.literal, before=code_start)
                continue
            # A copy comes from its source op alone: recording the whole merge ([a, b], whose
            # origins grow with every merge along a chain) would make a body's origins O(n^2).
            with self.module.program.provenance([ins]):
                mapping[ins.id] = self.module.add_instruction(
                    ins.op, [mapping[i.id] for i in ins.inputs], ins.module_inputs
                )
        return [mapping[o.id] for o in src.output_instructions()]


def _can_merge(a: Instruction, b: Instruction) -> bool:
    """No path from `a` to `b` other than through a's own values (merging would make a cycle)."""
    return (
        _tuple_consumers_ok(a)
        and _tuple_consumers_ok(b)
        and not any(_handle_index(a, x) is None and depends_on(x, a) for x in b.inputs)
    )


def fuse_producers(module: Module, multi_output: bool, names: Renames) -> bool:
    """Merge a pointwise producer into its pointwise consumer (only user, or any with multi_output)."""
    changed = False
    last = module.last
    for ins in module:
        if not ins.alive or ins.name != "pointwise" or (not ins.outputs and ins is not last):
            continue
        for x in ins.inputs:
            a = _producer_of(x)
            if a is None or a is ins:
                continue
            only_b = _tuple_consumers_ok(a) and all(u is ins for hs in _values(a) for h in hs for u in h.outputs)
            if only_b or (multi_output and _can_merge(a, ins)):
                merge_pointwise(module, a, ins, names)
                changed = True
                break
    return changed


def fuse_siblings(module: Module, names: Renames) -> bool:
    """Merge pointwise ops that read a common value and do not depend on each other."""
    changed = False
    for v in module:
        if not v.alive:
            continue
        users = [u for u in v.outputs if u.name == "pointwise" and _tuple_consumers_ok(u)]
        while len(users) >= 2:
            a, b = users[0], users[1]
            if depends_on(a, b) or depends_on(b, a):
                users.pop(1)
                continue
            order = module.index_of()
            a, b = sorted((a, b), key=lambda i: order[i.id])
            merged = merge_pointwise(module, a, b, names)
            users = [merged] + [u for u in users[2:] if u.alive]
            changed = True
    return changed


# ---- moving reshapes and broadcasts onto the producer's inputs -----------------------------------
def _single_use_pointwise(x: Instruction, user: Instruction) -> bool:
    return x.name == "pointwise" and not x.shape.is_tuple and list(x.outputs) == [user]


def _view_chain(v: Instruction, c: Instruction, kinds: tuple[str, ...]) -> list[Instruction] | None:
    """The views from a pointwise producer up to `v` (producer's side first) when each is of
    `kinds`, has one input and is read only by the next (v only by `c`); None otherwise. Unit-axis
    views may sit between broadcasts (a mask broadcast, then unsqueezed to the attention's rank)."""
    chain: list[Instruction] = []
    user = c
    while v.name in kinds and list(v.outputs) == [user] and len(v.inputs) == 1:
        chain.append(v)
        user, v = v, v.inputs[0]
        if v.name == "pointwise":
            return chain[::-1]
    return None


def rewrite_through(module: Module, kinds: tuple[str, ...], need_standard: bool) -> bool:
    """pointwise P -> views V -> pointwise C  ==>  pointwise P'(V(P's inputs)) -> C, so P' and C
    can merge. Each view must be the only user of what it reads, the last read only by C; reshapes
    other than squeeze / unsqueeze need standard inputs."""
    changed = False
    for c in module:
        if not c.alive or c.name != "pointwise":
            continue
        for v in c.inputs:
            chain = _view_chain(v, c, kinds)
            if chain is None:
                continue
            p = chain[0].inputs[0]
            if not _single_use_pointwise(p, chain[0]):
                continue
            regroups = any(x.name not in UNIT_AXIS_VIEWS for x in chain)
            if need_standard and regroups and not all(i.shape.standard() for i in p.inputs):
                continue
            with module.program.provenance([p, *chain]):
                moved = list(p.inputs)
                for x in chain:
                    moved = [module.insert_instruction(v, x.op, [i]) for i in moved]
                new_p = module.insert_instruction(v, p.op, moved, p.module_inputs)
            module.replace_all_uses(v, new_p)
            for x in [*chain[::-1], p]:
                module.remove_instruction(x)
            changed = True
            break
    return changed


@dataclass(frozen=True)
class FusePointwise(Pass):
    """Fuse elementwise ops into `pointwise` submodules and merge producer/consumer chains."""

    name: ClassVar[str] = "fuse_pointwise"
    enable_rewrite_reshapes: bool = True
    enable_rewrite_broadcasts: bool = False
    enable_multi_output: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        if any(i.name == "identity" for i in module):
            changed = ctx.run_pass(EliminateIdentity()) or changed
        before = set(module.program.modules)
        changed = create_pointwise_modules(module) or changed
        names = Renames(module)
        names.owned = set(module.program.modules) - before
        for _ in range(MAX_ROUNDS):
            if self.enable_rewrite_reshapes:
                changed = rewrite_through(module, RESHAPES, need_standard=True) or changed
            if self.enable_rewrite_broadcasts:
                changed = rewrite_through(module, BROADCASTS + UNIT_AXIS_VIEWS, need_standard=False) or changed
            merged = fuse_producers(module, self.enable_multi_output, names)
            if self.enable_multi_output:
                merged = fuse_siblings(module, names) or merged
            if not merged:
                break
            changed = True
        names.settle()
        return changed
