"""Matchers and IR queries the rule-table passes share (simplify_algebra, simplify_reshapes,
eliminate_convert, the rewrite_* passes). The rule protocol itself is compiler/pattern_rewriter.py.

A rule here never "matches and then does nothing" (MIGraphX finders often `return` early from
apply): every early return is a refusal reason from `check`, so `near_misses` can show it and
`find_matches` moves on to the next rule for that instruction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import MigxError
from ..ir import Instruction, Module
from ..matcher import Matcher, any_of, is_constant, name, none_of, pred
from ..op import Op
from ..ref import eval_instruction
from ..shape import Shape


def lit_broadcast() -> Matcher:
    """A constant or a `broadcast` (MIGraphX's lit_broadcast: either can be folded or hoisted)."""
    return any_of(is_constant(), name("broadcast"))


def not_lit_broadcast() -> Matcher:
    return none_of(is_constant(), name("broadcast"))


def static(ins: Instruction) -> bool:
    return ins.shape.dyn_dims is None and not ins.shape.is_tuple


def all_static() -> Matcher:
    return pred(
        "static_shapes",
        lambda ins: static(ins) and all(static(i) for i in ins._inputs),
        "dynamic or tuple shapes are left alone",
    )


def users_named(ins: Instruction, *names: str) -> list[Instruction]:
    return [u for u in ins.outputs if u.name in names]


def const_value(ins: Instruction) -> np.ndarray:
    return np.asarray(eval_instruction(ins))


def is_integral(s: Shape) -> bool:
    return s.dtype.is_integral or s.type == "bool"


def slice_ranges(ins: Instruction) -> dict[int, tuple[int, int]]:
    """Normalized {axis: (start, end)} of a slice instruction."""
    from ..ops.common import norm_axes
    from ..ops.views import slice_bounds

    x = ins.inputs[0].shape
    axes = norm_axes(ins.op["axes"], x.ndim, "slice")
    return {ax: (st, en) for ax, st, en in slice_bounds(x.lens, axes, ins.op["starts"], ins.op["ends"])}


def slice_op(ranges: dict[int, tuple[int, int]]) -> Op:
    axes = sorted(ranges)
    return Op("slice", axes=axes, starts=[ranges[a][0] for a in axes], ends=[ranges[a][1] for a in axes])


def auto_reshape_op(src: Sequence[int], dims: Sequence[int]) -> Op | None:
    """The clearest view op turning lens `src` into `dims` (MIGraphX's insert_auto_reshape):
    None when equal, squeeze/unsqueeze when only 1s differ, else reshape."""
    src, dims = tuple(src), tuple(dims)
    if src == dims:
        return None
    if math.prod(src) != math.prod(dims):
        raise MigxError(f"cannot reshape {list(src)} to {list(dims)}")
    if [d for d in src if d != 1] == [d for d in dims if d != 1]:
        if len(src) > len(dims):
            axes = _ones_to_drop(src, dims)
            if axes is not None:
                return Op("squeeze", axes=axes)
        elif len(src) < len(dims):
            axes = _ones_to_drop(dims, src)
            if axes is not None:
                return Op("unsqueeze", axes=axes)
    return Op("reshape", dims=dims)


def _ones_to_drop(longer: Sequence[int], shorter: Sequence[int]) -> list[int] | None:
    """Axes of `longer` (all size 1) whose removal leaves `shorter`; greedy left to right."""
    axes, j = [], 0
    for i, n in enumerate(longer):
        if j < len(shorter) and n == shorter[j]:
            j += 1
        elif n == 1:
            axes.append(i)
        else:
            return None
    return axes if j == len(shorter) else None


def insert_ops(m: Module, before: Instruction, ops: Iterable[Op | None], x: Instruction) -> Instruction:
    for op in ops:
        if op is not None:
            x = m.insert_instruction(before, op, [x])
    return x


def move_before(m: Module, instrs: Iterable[Instruction], pos: Instruction) -> None:
    """Move `instrs` (and, recursively, their inputs) that sit at or after `pos` to just before it.
    Only for constant subtrees, whose inputs are all movable (MIGraphX's move_instructions_back)."""
    order = m.index_of()
    limit = order[pos.id]
    todo: dict[int, Instruction] = {}
    stack = list(instrs)
    while stack:
        ins = stack.pop()
        if order[ins.id] < limit or ins.id in todo:
            continue
        todo[ins.id] = ins
        stack.extend(ins.inputs)
    for ins in sorted(todo.values(), key=lambda i: order[i.id]):
        m.move_instruction(ins, pos)


def broadcast_literal(m: Module, before: Instruction, value: float, type_: str, lens) -> Instruction:
    """A constant `value` of element type `type_` broadcast to `lens`; a rank-0 target takes a
    rank-0 literal (multibroadcast cannot lower the rank)."""
    from ..dtypes import np_dtype
    from ..shape import Shape

    data = np.asarray(value, np_dtype(type_))
    if not lens:
        return m.add_literal(data, Shape.of(type_, ()))
    lit = m.add_literal(data, Shape.scalar(type_))
    return m.insert_instruction(before, Op("multibroadcast", out_lens=lens), [lit])


def broadcast_scalar(m: Module, before: Instruction, value: float, like: Instruction) -> Instruction:
    """A constant `value` in `like`'s type, broadcast to its lens (MIGraphX's insert_common_op on a
    scalar literal)."""
    from ..dtypes import np_dtype

    lit = m.add_literal(np.asarray([value], dtype=np_dtype(like.shape.type)))
    return m.insert_instruction(before, Op("multibroadcast", out_lens=like.shape.lens), [lit])
