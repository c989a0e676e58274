"""fuse_reduce, split_reduce and the composite fuse_pointwise_reduce (MIGraphX src/fuse_reduce.cpp,
src/split_reduce.cpp, src/fuse_pointwise_reduce.cpp).

fuse_reduce turns each reduce op into `fused_reduce{axes}(x), [<mod>:<reduce_op>N]` (a bypass
submodule with the real input shape), then fuses, up to 4 sweeps:
  pointwise -> reduce        (find_pointwise_reduce: module `<pw module>:<reduce module>`)
  reduce -> pointwise        (find_reduce_pointwise: `<reduce module>:<pw module>`)
  reduce -> reduce           (find_reduce_reduce, same axes)
each also across one broadcast between the two. As in MIGraphX the merged submodule keeps the
`pointwise` instruction (and its pointwise submodule) of a fused elementwise op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..ir import Instruction, Module
from ..matcher import MatchResult, Rule, find_matches, name
from ..op import Op
from ..shape import Shape
from ._fusion_util import BROADCASTS, copy_body, depends_on, drop_if_unused, new_submodule, param_name
from .base import Pass, make_pass, pass_registry
from .fuse_pointwise import FusePointwise

REDUCE_OPS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_any", "reduce_all")
SWEEPS = 4


def create_reduce_modules(module: Module) -> bool:
    changed = False
    for ins in list(module):
        if ins.name not in REDUCE_OPS or len(ins.inputs) != 1 or ins.shape.dyn_dims is not None:
            continue
        x = ins.inputs[0]
        axes = tuple(sorted(a % x.shape.ndim for a in ins.op["axes"]))
        if not axes:
            continue
        sub = new_submodule(module.program, f"{module.name}:{ins.name}")
        p = sub.add_parameter(param_name(0), Shape.of(x.shape.type, x.shape.lens))
        sub.add_return([sub.add_instruction(ins.op.with_(axes=axes), [p])])
        module.replace_instruction(ins, Op("fused_reduce", axes=axes), [x], [sub])
        changed = True
    return changed


def fuse_region(module: Module, region: list[Instruction], axes: tuple[int, ...], mod_name: str) -> Instruction:
    """Replace `region` (a chain in module order whose last instruction is the only one used outside
    it) by one fused_reduce. fused_reduce members are inlined; other ops are copied as they are."""
    prog = module.program
    out = region[-1]
    sub = new_submodule(prog, mod_name, exact=True)
    inputs: list[Instruction] = []
    mapping: dict[int, Instruction] = {}

    def arg(x: Instruction) -> Instruction:
        if x.id not in mapping:
            mapping[x.id] = sub.add_parameter(param_name(len(inputs)), Shape.of(x.shape.type, x.shape.lens))
            inputs.append(x)
        return mapping[x.id]

    old_mods = []
    for ins in region:
        if ins.name == "fused_reduce":
            rm = ins.module_inputs[0]
            old_mods.append(rm)
            mapping[ins.id] = copy_body(rm, sub, {p.id: arg(x) for p, x in zip(rm.params(), ins.inputs)})[0]
        else:
            mapping[ins.id] = sub.add_instruction(ins.op, [arg(x) for x in ins.inputs], ins.module_inputs)
    sub.add_return([mapping[out.id]])
    new = module.insert_instruction(out, Op("fused_reduce", axes=axes), inputs, [sub])
    module.replace_all_uses(out, new)
    module.remove_instructions(region)
    drop_if_unused(prog, old_mods)
    return new


def _single(x: Instruction) -> bool:
    return not x.shape.is_tuple and len(x.outputs) == 1


def _through_broadcast(root: Instruction, want: str) -> list[Instruction] | None:
    """[producer] or [producer, broadcast] for the first input of `root` that is a `want` op used
    only by root (directly or through a broadcast used only by root)."""
    for x in root.inputs:
        if x.name == want and _single(x) and x.outputs[0] is root:
            return [x]
        if x.name in BROADCASTS and _single(x) and x.outputs[0] is root:
            p = x.inputs[0]
            # Only same-rank broadcasts move inside: the generated reduce kernels index every
            # input over the full rank (a rank-expanding one, e.g. a [B, S] padding mask feeding a
            # [B, H, S, S] softmax, stays outside as a free view).
            if p.name == want and _single(p) and p.shape.ndim == x.shape.ndim:
                return [p, x]
    return None


class _ReduceRule(Rule):
    root = ""

    def matcher(self):
        return name(self.root)

    def chain(self, r: MatchResult) -> list[Instruction] | str:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, module: Module, r: MatchResult) -> str | None:
        c = self.chain(r)
        return c if isinstance(c, str) else None

    def apply(self, module: Module, r: MatchResult) -> None:
        region = self.chain(r)
        first, last = region[0], region[-1]
        reduce = first if first.name == "fused_reduce" else last
        mod_name = f"{first.module_inputs[0].name}:{last.module_inputs[0].name}"
        fuse_region(module, region, reduce.op["axes"], mod_name)


class PointwiseReduce(_ReduceRule):
    name = "find_pointwise_reduce"
    root = "fused_reduce"

    def chain(self, r):
        c = _through_broadcast(r.root, "pointwise")
        return c + [r.root] if c else "no input is a pointwise op used only by this reduce"


class ReducePointwise(_ReduceRule):
    name = "find_reduce_pointwise"
    root = "pointwise"

    def chain(self, r):
        p = r.root
        if p.shape.is_tuple:
            return "multi-output pointwise"
        c = _through_broadcast(p, "fused_reduce")
        if not c:
            return "no input is a fused_reduce used only by this pointwise op"
        red = c[0]
        if p.shape.lens not in (red.shape.lens, red.inputs[0].shape.lens):
            return f"pointwise lens {list(p.shape.lens)} are neither the reduce's input nor output lens"
        return c + [p]


class ReduceReduce(_ReduceRule):
    name = "find_reduce_reduce"
    root = "fused_reduce"

    def chain(self, r):
        c = _through_broadcast(r.root, "fused_reduce")
        if not c:
            return "no input is a fused_reduce used only by this reduce"
        if c[0].op["axes"] != r.root.op["axes"]:
            return f"axes differ ({c[0].op['axes']} vs {r.root.op['axes']})"
        return c + [r.root]


RULES = (ReducePointwise(), PointwiseReduce(), ReduceReduce())


@dataclass(frozen=True)
class FuseReduce(Pass):
    """Make reductions fused_reduce kernels and fuse elementwise producers/consumers into them.

    enable_rewrite_reshapes is accepted for pipeline fidelity; moving reshapes across reductions
    (MIGraphX's reduce_reshape) is not implemented, so it changes nothing."""

    name: ClassVar[str] = "fuse_reduce"
    note: ClassVar[str] = "reshape rewrites around reductions (enable_rewrite_reshapes) are not implemented"
    enable_rewrite_reshapes: bool = True

    def apply_module(self, module: Module, ctx) -> bool:
        changed = create_reduce_modules(module)
        for _ in range(SWEEPS):
            if not find_matches(module, *RULES):
                break
            changed = True
        return changed


# ---- split_reduce ------------------------------------------------------------------------------
def reduce_size(ins: Instruction) -> int:
    # Inputs can have lower rank than the reduction (broadcast inside the submodule): read the
    # reduced extents from a full-rank input.
    lens = max((i.shape.lens for i in ins.inputs), key=len)
    return math.prod(lens[a] for a in ins.op["axes"])


def _split_plan(rm: Module) -> list[Instruction] | str:
    reduces = [i for i in rm if i.op.has("reduce")]
    if not reduces:
        return "no reduction inside"
    if any(i.name != "reduce_sum" for i in reduces):
        return "only reduce_sum can be split (partial results are added atomically)"
    if any(i.shape.type not in ("float32", "float16") for i in reduces):
        return "only float and half reductions are split"
    if any(depends_on_any(r, reduces) for r in reduces):
        return "a reduction depends on another one (would need two global syncs)"
    return reduces


def depends_on_any(a: Instruction, others: list[Instruction]) -> bool:
    return any(o is not a and depends_on(a, o) for o in others)


def split_fused_reduce(module: Module, ins: Instruction, reduces: list[Instruction]) -> None:
    """ins = fused_reduce(...), [rm]  ==>  split_fused_reduce of the part up to the reductions, then
    the rest of rm inlined into `module` on its results (fuse_pointwise fuses it afterwards)."""
    prog = module.program
    rm = ins.module_inputs[0]
    splitm = new_submodule(prog, rm.name + "_split", exact=True)
    # Part one: the reductions and what they read.
    need: dict[int, Instruction] = {}
    stack = list(reduces)
    while stack:
        x = stack.pop()
        if x.id not in need:
            need[x.id] = x
            stack.extend(x.inputs)
    mapping: dict[int, Instruction] = {}
    inputs: list[Instruction] = []
    for p, x in zip(rm.params(), ins.inputs):
        if p.id in need:
            mapping[p.id] = splitm.add_parameter(param_name(len(inputs)), p.shape)
            inputs.append(x)
    for x in rm:
        if x.id in need and not x.is_param():
            mapping[x.id] = splitm.add_literal(x.literal) if x.is_literal() else splitm.add_instruction(
                x.op, [mapping[i.id] for i in x.inputs], x.module_inputs)
    splitm.add_return([mapping[r.id] for r in reduces])
    split = module.insert_instruction(ins, Op("split_fused_reduce", axes=ins.op["axes"]), inputs, [splitm])
    results = [split] if len(reduces) == 1 else [
        module.insert_instruction(ins, Op("get_tuple_elem", index=k), [split]) for k in range(len(reduces))]
    # Part two: everything after the reductions, recomputed in the parent from the same inputs.
    outer: dict[int, Instruction] = {p.id: x for p, x in zip(rm.params(), ins.inputs)}
    outer.update({r.id: v for r, v in zip(reduces, results)})
    for x in rm:
        if x.id in outer or x.is_param() or x.is_return():
            continue
        if x.is_literal():
            outer[x.id] = module.add_literal(x.literal)
        else:
            outer[x.id] = module.insert_instruction(ins, x.op, [outer[i.id] for i in x.inputs], x.module_inputs)
    module.replace_all_uses(ins, outer[rm.output_instructions()[0].id])
    module.remove_instruction(ins)
    drop_if_unused(prog, [rm])


@dataclass(frozen=True)
class SplitReduce(Pass):
    """A fused_reduce over more than split_size elements becomes a split_fused_reduce (many
    workgroups per output, partial sums added atomically: `assign_add`) followed by its elementwise
    tail, which needs the finished sums and so moves out into the parent (MIGraphX split_reduce)."""

    name: ClassVar[str] = "split_reduce"
    must_follow: ClassVar[tuple[str, ...]] = ("fuse_reduce",)
    split_size: int = 65280

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in list(module):
            if ins.name != "fused_reduce" or not ins.alive or reduce_size(ins) <= self.split_size:
                continue
            plan = _split_plan(ins.module_inputs[0])
            if isinstance(plan, str):
                continue
            with module.program.provenance([ins]):
                split_fused_reduce(module, ins, plan)
            changed = True
        return changed


@dataclass(frozen=True)
class FusePointwiseReduce(Pass):
    """MIGraphX's composite: fuse_pointwise, optimize_module, fuse_reduce, fuse_pointwise (with
    reshape rewrites), fuse_reduce, split_reduce, fuse_pointwise (with broadcast rewrites) and a
    multi-output fuse_pointwise, each a nested pass (a child in the trace)."""

    name: ClassVar[str] = "fuse_pointwise_reduce"
    split_size: int = 65280
    enable_multi_output: bool = True  # MIGRAPHX_DISABLE_MULTI_OUTPUT_FUSION turns it off

    def steps(self) -> list[Pass]:
        out: list[Pass] = [FusePointwise(enable_rewrite_reshapes=False)]
        if "optimize_module" in pass_registry():
            out.append(make_pass("optimize_module"))
        out += [FuseReduce(enable_rewrite_reshapes=False), FusePointwise(enable_rewrite_reshapes=True),
                FuseReduce(enable_rewrite_reshapes=True), SplitReduce(split_size=self.split_size),
                FusePointwise(enable_rewrite_broadcasts=True)]
        if self.enable_multi_output:
            out.append(FusePointwise(enable_multi_output=True))
        return out

    def apply_module(self, module: Module, ctx) -> bool:
        return ctx.run_passes(self.steps())
