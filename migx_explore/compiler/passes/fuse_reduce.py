"""fuse_reduce (MIGraphX src/fuse_reduce.cpp).

fuse_reduce turns each reduce op into `fused_reduce{axes}(x), [<mod>:<reduce_op>N]` (a bypass
submodule with the real input shape), then fuses, up to 4 sweeps:
  pointwise -> reduce        (find_pointwise_reduce: module `<pw module>:<reduce module>`)
  reduce -> pointwise        (find_reduce_pointwise: `<reduce module>:<pw module>`)
  reduce -> reduce           (find_reduce_reduce, same axes)
each also across one broadcast between the two. As in MIGraphX the merged submodule keeps the
`pointwise` instruction (and its pointwise submodule) of a fused elementwise op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Instruction, Module
from ..matcher import MatchResult, name
from ..op import Op
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule
from ..shape import Shape
from .fusion_helpers import BROADCASTS, SubmoduleInputs, copy_body, drop_if_unused, new_submodule, param_name

REDUCE_OPS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_any", "reduce_all")
ARG_OPS = ("argmin", "argmax")  # wrapped too, with fused_reduce axes = {axis} (as MIGraphX)
SWEEPS = 4


def create_reduce_modules(module: Module) -> bool:
    changed = False
    for ins in list(module):
        if ins.name not in REDUCE_OPS + ARG_OPS or len(ins.inputs) != 1 or ins.shape.dyn_dims is not None:
            continue
        x = ins.inputs[0]
        if ins.name in ARG_OPS:
            axis = ins.op["axis"] % max(x.shape.ndim, 1)
            axes, op = (axis,), ins.op.with_(axis=axis)
        else:
            axes = tuple(sorted(a % x.shape.ndim for a in ins.op["axes"]))
            op = ins.op.with_(axes=axes)
        if not axes:
            continue
        sub = new_submodule(module.program, f"{module.name}:{ins.name}")
        p = sub.add_parameter(param_name(0), Shape.of(x.shape.type, x.shape.lens))
        sub.add_return([sub.add_instruction(op, [p])])
        module.replace_instruction(ins, Op("fused_reduce", axes=axes), [x], [sub])
        changed = True
    return changed


def fuse_region(module: Module, region: list[Instruction], axes: tuple[int, ...], mod_name: str) -> Instruction:
    """Replace `region` (a chain in module order whose last instruction is the only one used outside
    it) by one fused_reduce. fused_reduce members are inlined; other ops are copied as they are."""
    prog = module.program
    out = region[-1]
    sub = new_submodule(prog, mod_name, exact=True)
    mapping: dict[int, Instruction] = {}
    binder = SubmoduleInputs(sub, mapping)
    arg = binder.bind
    old_mods = []
    for ins in region:
        if ins.name == "fused_reduce":
            rm = ins.module_inputs[0]
            old_mods.append(rm)
            mapping[ins.id] = copy_body(rm, sub, {p.id: arg(x) for p, x in zip(rm.params(), ins.inputs)})[0]
        else:
            mapping[ins.id] = sub.add_instruction(ins.op, [arg(x) for x in ins.inputs], ins.module_inputs)
    sub.add_return([mapping[out.id]])
    new = module.insert_instruction(out, Op("fused_reduce", axes=axes), binder.inputs, [sub])
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

    def pattern(self):
        return name(self.root)

    def chain(self, r: MatchResult) -> list[Instruction] | str:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, module: Module, r: MatchResult) -> list[Instruction] | str:
        return self.chain(r)

    def rewrite(self, module: Module, r: MatchResult, region: list[Instruction]) -> None:
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
    enable_rewrite_reshapes: bool = True

    def apply_module(self, module: Module, ctx) -> bool:
        changed = create_reduce_modules(module)
        for _ in range(SWEEPS):
            if not rewriter_of(ctx).find_matches(module, *RULES):
                break
            changed = True
        return changed
