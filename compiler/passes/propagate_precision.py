"""propagate_precision (MIGraphX src/propagate_precision.cpp): run chains of ops in the highest
precision any of them already uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import dtypes
from ..ir import Instruction, Module
from ..op import Op
from .base import Pass, make_pass, pass_registry
from .dead_code_elimination import DeadCodeElimination


def _rank(t: str) -> tuple[bool, int]:
    d = dtypes.dtype(t)
    return (d.is_float, d.size)


def _higher(a: str, b: str) -> bool:
    """a is a higher precision of the same kind (float vs integral) than b."""
    da, db = dtypes.dtype(a), dtypes.dtype(b)
    return da.is_float == db.is_float and da.size > db.size


def _upgradable(ins: Instruction, target: str) -> bool:
    """A reduction or pointwise op (converts included, as in MIGraphX) of target's kind (float or
    integral). Unlike MIGraphX, a convert to or from bool is never upgraded: bool(x) -> int64 is
    not int64(x) (0.5 gives true, but truncates to 0)."""
    if not (ins.name.startswith("reduce_") or ins.op.has("pointwise")) or ins.module_inputs:
        return False
    if ins.shape.is_tuple or dtypes.dtype(ins.shape.type).is_float != dtypes.dtype(target).is_float:
        return False
    return ins.name != "convert" or "bool" not in (ins.shape.type, ins.inputs[0].shape.type)


def _non_scalar_const(x: Instruction) -> bool:
    """Not a broadcast scalar constant (MIGraphX's shape::scalar(): every stride 0)."""
    return not (x.shape.scalar_shape() and x.can_eval())


def _next_input(ins: Instruction) -> Instruction | None:
    """The one input that carries the data (scalar constants aside)."""
    if len(ins.inputs) == 1:
        return ins.inputs[0]
    data = list(dict.fromkeys(i for i in ins.inputs if _non_scalar_const(i)))
    return data[0] if len(data) == 1 else None


def _adjacent_inputs(convert: Instruction, target: str) -> list[Instruction]:
    out, x = [], convert.inputs[0]
    while _upgradable(x, target) and x not in out:
        nxt = _next_input(x)
        if nxt is None:
            break
        out.append(x)
        x = nxt
    return out


def _adjacent_outputs(convert: Instruction, target: str) -> list[Instruction]:
    out: list[Instruction] = []
    stack = [convert]
    while stack:
        x = stack.pop()
        for u in x.outputs:
            if _upgradable(u, target) and u not in out and _next_input(u) is x:
                out.append(u)
                stack.append(u)
    return out


def find_upgrades(module: Module) -> dict[int, tuple[Instruction, str]]:
    result: dict[int, tuple[Instruction, str]] = {}
    for c in module:
        if c.name != "convert":
            continue
        src, dst = c.inputs[0].shape.type, c.shape.type
        if src == "bool" or dst == "bool" or dtypes.dtype(src).is_float != dtypes.dtype(dst).is_float:
            continue  # MIGraphX stops where a convert crosses between integral and floating types
        if _higher(dst, src):
            group, t = _adjacent_inputs(c, dst), dst
        elif _higher(src, dst):
            group, t = _adjacent_outputs(c, src), src
        else:
            continue
        for ins in group:
            prev = result.get(ins.id)
            if prev is None or _rank(t) > _rank(prev[1]):
                result[ins.id] = (ins, t)
    return result


@dataclass(frozen=True)
class PropagatePrecision(Pass):
    """Compute the elementwise/reduce neighbours of an up- or down-cast in the higher precision
    (fp16 -> exp -> reduce_sum -> convert(float) computes exp and reduce_sum in float), then let
    eliminate_convert fold the convert pairs this leaves."""

    name: ClassVar[str] = "propagate_precision"
    note: ClassVar[str] = ("a chain through a convert to or from bool is not upgraded: MIGraphX's int64(x) in place of "
                           "bool(x) changes the values (0.5 is true but truncates to 0)")

    def apply_module(self, module: Module, ctx) -> bool:
        downs: dict[int, Instruction] = {}  # convert(high -> low) made here, by id

        def arg(i: Instruction, t: str) -> Instruction:
            if i.name == "convert" and i.inputs[0].shape.type == t:
                return i.inputs[0]  # skip the high -> low -> high round trip (eliminate_convert's job in MIGraphX)
            if i.shape.type == t:
                return i
            return module.insert_instruction(ins, Op("convert", target_type=t), [i])

        for ins, t in find_upgrades(module).values():
            if not ins.alive or ins.shape.type == t or ins.shape.is_tuple:
                continue
            with module.program.provenance([ins]):
                if ins.name == "convert":  # an upgraded convert converts straight to the higher type
                    up = module.insert_instruction(ins, Op("convert", target_type=t), [ins.inputs[0]])
                else:
                    up = module.insert_instruction(ins, ins.op, [arg(i, t) for i in ins.inputs])
                down = module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [up])
            downs[down.id] = down
            module.replace_all_uses(ins, down)
            module.remove_instruction(ins)
        if not downs:
            return False
        # convert(convert(high -> low) -> high): the original upcast now reads our downcast.
        for d in downs.values():
            for u in list(d.outputs):
                if u.name == "convert" and u.shape.type == d.inputs[0].shape.type:
                    module.replace_all_uses(u, d.inputs[0])
        if "eliminate_convert" in pass_registry():
            ctx.run_pass(make_pass("eliminate_convert"))
        ctx.run_pass(DeadCodeElimination())
        return True
