"""propagate_precision (MIGraphX src/propagate_precision.cpp): run chains of ops in the highest
precision any of them already uses."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import dtypes
from ..ir import Instruction, Module
from ..op import Op
from ..pass_infra import Pass, make_pass, pass_registry
from ..ref import eval_instruction
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


_VIEWS = ("reshape", "squeeze", "unsqueeze", "transpose", "slice")


def _float32_source(module: Module, x: Instruction, before: Instruction) -> Instruction | None:
    """A float32 tensor x rounds from at no kernel's cost: the param of x = convert(float32 param),
    or, for a low-precision x also widened for a float32 output, that widened value (a model
    output the GEMM's input also feeds: BERT's last layernorm, read by the pooler)."""
    if not dtypes.dtype(x.shape.type).is_float or not _higher("float32", x.shape.type):
        return None
    if x.name == "convert" and x.inputs[0].is_param() and x.inputs[0].shape.type == "float32":
        return x.inputs[0]
    widened = [
        u
        for u in x.outputs
        if u.name == "convert" and u.shape.type == "float32" and any(o.is_return() for o in u.outputs)
    ]
    if not widened:
        return None
    order = module.index_of()  # the GEMM's new input must already be computed where it is read
    return widened[0] if order[widened[0].id] < order[before.id] else None


def _narrowed_input(module: Module, x: Instruction, before: Instruction) -> Instruction | None:
    """When x, seen through reshape-like views, has a float32 source (_float32_source), that
    source seen through the same views (inserted before `before`); else None."""
    views = []
    while x.name in _VIEWS and len(x.inputs) == 1:
        views.append(x)
        x = x.inputs[0]
    out = _float32_source(module, x, before)
    if out is None:
        return None
    for v in reversed(views):
        out = module.insert_instruction(before, v.op, [out])
    return out


# A float32 GEMM runs without tensor cores (TF32 off): past this many multiply-adds (about a
# microsecond of float32 math on a current GPU) the saved convert launch no longer pays for it.
WIDEN_DOT_MAX_MACS = 1 << 24


def widen_input_dots(module: Module) -> list[Instruction]:
    """dot(convert_low(float32 input), constant) -> convert_low(dot(input, float32 constant)),
    the input possibly seen through reshape-like views.

    At fp16 the model's float32 input is narrowed to half before its first GEMM; that convert is
    a kernel of its own (cuBLAS takes no float32 x half operands), one launch the float32 program
    does not make. Multiplying in float32 against the weights widened at compile time reads the
    input as it is, and the narrowing moves after the product, where the bias / activation
    kernel that follows absorbs it (the upgrade below even computes those in float32). The
    result is closer to the float32 model, not further. Only GEMMs of at most WIDEN_DOT_MAX_MACS
    multiply-adds. Returns the new narrowing converts."""
    downs = []
    for ins in list(module):
        if ins.name != "dot" or not ins.alive or ins.shape.dyn_dims is not None:
            continue
        a, b = ins.inputs
        if math.prod(ins.shape.lens) * a.shape.lens[-1] > WIDEN_DOT_MAX_MACS:
            continue
        for k, (x, w) in enumerate(((a, b), (b, a))):
            if not w.can_eval() or w.shape.type != x.shape.type:
                continue
            with module.program.provenance([ins]):
                src = _narrowed_input(module, x, ins)
            if src is None:
                continue
            wide = module.add_literal(np.ascontiguousarray(np.asarray(eval_instruction(w), dtype=np.float32)))
            with module.program.provenance([ins]):
                new = module.insert_instruction(ins, ins.op, [src, wide] if k == 0 else [wide, src])
                down = module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [new])
            module.replace_all_uses(ins, down)
            module.remove_instruction(ins)
            downs.append(down)
            if _only_views_to_pointwise(down):
                _sink_convert(module, down)
            break
    return downs


_SINK_VIEWS = _VIEWS + ("multibroadcast", "broadcast")


# Ops whose kernel reads these inputs in any float type (and computes in float): a narrowing
# convert before them is dropped rather than run.
READS_ANY_FLOAT = {"lstm_recurrence": (0,), "lstm_recurrences": (0,)}


def _reads_any_float(u: Instruction, x: Instruction) -> bool:
    return any(u.inputs[k] is x for k in READS_ANY_FLOAT.get(u.name, ())) and u.inputs.count(x) == 1


def _only_views_to_pointwise(x: Instruction) -> bool:
    """Every path from x's users runs through views to a pointwise op (or one reading any float)."""
    return bool(x.outputs) and all(
        (u.name in _SINK_VIEWS and _only_views_to_pointwise(u))
        or (u.op.has("pointwise") and not u.is_return())
        or _reads_any_float(u, x)
        for u in x.outputs
    )


def _sink_convert(module: Module, convert: Instruction) -> None:
    """convert -> views -> pointwise becomes views -> convert -> pointwise on each path, so
    fuse_pointwise folds the conversion into the op that reads it (a view between them would
    keep the convert a kernel of its own)."""
    src = convert.inputs[0]
    for u in list(convert.outputs):
        if _reads_any_float(u, convert):
            module.replace_instruction(u, inputs=[src if i is convert else i for i in u.inputs])
            continue
        if u.name not in _SINK_VIEWS:
            continue
        with module.program.provenance([u, convert]):
            wide_view = module.insert_instruction(u, u.op, [src])
            narrow = module.insert_instruction(u, convert.op, [wide_view])
        module.replace_all_uses(u, narrow)
        module.remove_instruction(u)
        _sink_convert(module, narrow)
    if not convert.outputs:
        module.remove_instruction(convert)


@dataclass(frozen=True)
class PropagatePrecision(Pass):
    """Compute the elementwise/reduce neighbours of an up- or down-cast in the higher precision
    (fp16 -> exp -> reduce_sum -> convert(float) computes exp and reduce_sum in float), then let
    eliminate_convert fold the convert pairs this leaves. First, a GEMM of a narrowed float32
    program input by constants runs in float32 (widen_input_dots), so no convert kernel precedes
    it."""

    name: ClassVar[str] = "propagate_precision"

    def apply_module(self, module: Module, ctx) -> bool:
        downs: dict[int, Instruction] = {}  # convert(high -> low) made here, by id

        def arg(i: Instruction, t: str) -> Instruction:
            if i.name == "convert" and i.inputs[0].shape.type == t:
                return i.inputs[0]  # skip the high -> low -> high round trip (eliminate_convert's job in MIGraphX)
            if i.shape.type == t:
                return i
            return module.insert_instruction(ins, Op("convert", target_type=t), [i])

        widened = widen_input_dots(module)
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
            if widened:
                ctx.run_pass(DeadCodeElimination())
            return bool(widened)
        # convert(convert(high -> low) -> high): the original upcast now reads our downcast.
        for d in downs.values():
            for u in list(d.outputs):
                if u.name == "convert" and u.shape.type == d.inputs[0].shape.type:
                    module.replace_all_uses(u, d.inputs[0])
        if "eliminate_convert" in pass_registry():
            ctx.run_pass(make_pass("eliminate_convert"))
        ctx.run_pass(DeadCodeElimination())
        return True
