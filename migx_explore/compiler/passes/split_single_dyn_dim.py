"""split_single_dyn_dim (MIGraphX src/split_single_dyn_dim.cpp).

When the parameters have exactly one non-fixed dynamic dimension (one parameter, or several
sharing the same range), the module body is copied once per size in the range into a static
submodule `dim_N`; the module then reads

    @k = select_module[output_dyn_shapes={tuple_type, {...}}](params sorted by name), [dim_1, ...]
    @k+1 = get_tuple_elem[index=0](@k) ...     @return(...)

and the old body is left for dead_code_elimination. A module that already feeds a select_module
is left alone (so a second run changes nothing). Shape computations (dimensions_of and what
follows from it with literals, e.g. a KV cache length and the `range` built on it) are folded
to literals per size as they are copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..op import Op
from ..ops.dynamic_values import DYNAMIC_VALUE_OPS, static_form
from ..pass_infra import Pass
from ..shape import DynDim, Shape


def single_dyn_dim(module: Module) -> tuple[DynDim, dict[str, int]] | None:
    """The shared non-fixed dimension and, per dynamic param, its axis; None if there is not
    exactly one such range."""
    axes: dict[str, int] = {}
    ranges = set()
    for p in module.params():
        dd = p.shape.dyn_dims
        if dd is None:
            continue
        loose = [k for k, d in enumerate(dd) if not d.is_fixed]
        if len(loose) > 1:
            return None
        if loose:
            axes[p.param_name] = loose[0]
            ranges.add((dd[loose[0]].min, dd[loose[0]].max))
    if len(ranges) != 1:
        return None
    lo, hi = ranges.pop()
    return DynDim(lo, hi), axes


def _static(s: Shape, axis: int | None, size: int) -> Shape:
    if s.dyn_dims is None:
        return s
    lens = [d.max for d in s.dyn_dims]
    if axis is not None:
        lens[axis] = size
    return Shape.of(s.type, lens)


def shape_computations(module: Module) -> set[int]:
    """Ids of the instructions whose values follow from param shapes alone: dimensions_of and
    what is computed from it with literals (a cache length, positions, a range's limit)."""
    derived: set[int] = set()
    constant: set[int] = set()  # computed from literals alone (e.g. Shape of a static input, gathered)
    for ins in module:
        if ins.name == "dimensions_of":
            derived.add(ins.id)
        elif ins.is_literal():
            constant.add(ins.id)
        elif (
            ins.inputs
            and not ins.is_builtin()
            and not ins.module_inputs
            and ins.op.spec.compute is not None
            and all(i.id in derived or i.id in constant for i in ins.inputs)
        ):
            (derived if any(i.id in derived for i in ins.inputs) else constant).add(ins.id)
    return derived


def _value(ins: Instruction) -> np.ndarray:
    from ..ref import eval_instruction

    return ins.literal.data if ins.is_literal() else np.asarray(eval_instruction(ins))


def copy_static(module: Module, sub: Module, axes: dict[str, int], size: int) -> list[Instruction]:
    """Copy the body with static params. Shape computations are folded to literals as they are
    copied (simplify_dyn_ops's dimensions_of and constant rules, applied here so that every copied
    shape rule, e.g. a `range` whose length follows P, sees static inputs)."""
    from ..ref import run_instruction

    fold = shape_computations(module)
    mapping: dict[int, Instruction] = {}
    for ins in module:
        if ins.is_param():
            mapping[ins.id] = sub.add_parameter(ins.param_name, _static(ins.shape, axes.get(ins.param_name), size))
        elif ins.is_literal():
            mapping[ins.id] = sub.add_literal(ins.literal)
        elif ins.is_return():
            break
        elif ins.id in fold:
            args = [mapping[i.id] for i in ins.inputs]
            if ins.name == "dimensions_of":
                value = np.asarray(args[0].shape.lens[slice(ins.op["start"], ins.op["end"])], dtype=np.int64)
            else:
                tmp = sub.add_instruction(ins.op, args)
                value = run_instruction(tmp, [_value(a) for a in args], False)
                sub.remove_instruction(tmp)
            mapping[ins.id] = sub.add_literal(np.asarray(value))
        else:
            args = [mapping[i.id] for i in ins.inputs]
            op = ins.op
            if op.name in DYNAMIC_VALUE_OPS:  # its shape inputs are literals now: the static op
                found = static_form(op, args, [_value(a) if a.can_eval() else None for a in args])
                if found is not None:
                    op, args = found
            mapping[ins.id] = sub.add_instruction(op, args, ins.module_inputs)
    return [mapping[o.id] for o in module.output_instructions()]


BUCKET_MODES = ("", "pow2")
MIN_BUCKET = 16  # as the decoder's buckets (gpu/decode.py bucket_for)


def bucket_sizes(lo: int, hi: int, buckets: str = "") -> list[int]:
    """The sizes split_single_dyn_dim makes submodules for: every size in lo..hi, or with
    buckets="pow2" the decoder's buckets over that range (powers of two from MIN_BUCKET, capped at
    hi: 16, 32, 64, 128, 255 for 1..255), each standing for the sizes up to it."""
    if buckets not in BUCKET_MODES:
        raise ValueError(f"split_single_dyn_dim: unknown buckets {buckets!r}; use 'pow2' or '' (every size)")
    if not buckets:
        return list(range(lo, hi + 1))
    return sorted(
        {max(lo, min(hi, max(MIN_BUCKET, 1 << (n - 1).bit_length()))) for n in range(max(lo, 1), hi + 1)}
        | ({lo} if lo == 0 else set())
    )


@dataclass(frozen=True)
class SplitSingleDynDim(Pass):
    """Replace a single dynamic dimension by one static submodule per size plus select_module.

    buckets="pow2" traces a long range as the decoder runs it (one submodule per bucket, not per
    size): the explorer's fallback when every size is too many to trace; the program it makes
    runs only at the bucket sizes (the decoder pads a length up to its bucket)."""

    name: ClassVar[str] = "split_single_dyn_dim"
    buckets: str = ""

    def apply_module(self, module: Module, ctx) -> bool:
        found = single_dyn_dim(module)
        if found is None or any(u.name == "select_module" for p in module.params() for u in p.outputs):
            return False
        dim, axes = found
        subs = []
        for size in bucket_sizes(dim.min, dim.max, self.buckets):
            sub = ctx.create_module(f"dim_{size}" if module.name == "main" else f"{module.name}:dim_{size}")
            sub.add_return(copy_static(module, sub, axes, size))
            subs.append(sub)
        params = sorted(module.params(), key=lambda p: p.param_name)
        outs = module.output_instructions()
        attr = Shape.tuple_of([o.shape for o in outs])
        sel = module.add_instruction(Op("select_module", output_dyn_shapes=attr), params, subs)
        module.replace_return([module.add_instruction(Op("get_tuple_elem", index=k), [sel]) for k in range(len(outs))])
        return True
