"""Shared pieces for the rewrite passes (simplify_algebra, simplify_reshapes, eliminate_convert, the
rewrite_* passes): a `Finder` rule whose check and apply share one analysis, table rows built
from `# a -> b` specs, value replacement that respects module outputs, and the sweep loop.

A finder never "matches and then does nothing" (MIGraphX finders often `return` early from apply):
every early return is a refusal reason from `plan`, so `near_misses` can show it and
`find_matches` moves on to the next rule for that instruction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import IRError, MigxError
from ..ir import Instruction, Module
from ..matcher import Matcher, MatchResult, Rule, any_of, find_matches, is_constant, name, none_of, pred
from ..op import Op
from ..shape import Shape

Plan = str | Callable[[], Any]


class Finder(Rule):
    """A rule whose `plan(module, match)` returns a refusal reason or a closure that rewrites."""

    name = "finder"

    def plan(self, m: Module, r: MatchResult) -> Plan:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, m: Module, r: MatchResult) -> str | None:
        p = self.plan(m, r)
        return p if isinstance(p, str) else None

    def apply(self, m: Module, r: MatchResult) -> None:
        p = self.plan(m, r)
        if isinstance(p, str):
            raise IRError(f"{self.name}: apply called on a refused match ({p})")
        p()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


# ---- building replacements -----------------------------------------------------------------------
@dataclass(frozen=True)
class To:
    """A replacement expression: op name, arguments (binding names or nested `To`), attributes.
    An attribute value may be a function of the match (e.g. lens taken from a bound instruction)."""

    op: str
    args: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)


def to(op: str, *args: Any, **attrs: Any) -> To:
    return To(op, args, attrs)


def _attrs(spec: To, r: MatchResult) -> dict[str, Any]:
    return {k: (v(r) if callable(v) else v) for k, v in spec.attrs.items()}


def build(m: Module, r: MatchResult, spec: To | str, before: Instruction) -> Instruction:
    if isinstance(spec, str):
        return r[spec]
    inputs = [build(m, r, a, before) for a in spec.args]
    return m.insert_instruction(before, Op(spec.op, _attrs(spec, r)), inputs)


def replace_value(m: Module, ins: Instruction, new: Instruction) -> Instruction:
    """Make `new` take `ins`'s place. A module's trailing instruction is its output when there is no
    @return, so there the old instruction becomes `identity(new)` instead of being orphaned."""
    if new.shape.lens != ins.shape.lens or new.shape.type != ins.shape.type:
        raise IRError(f"cannot replace #{ins.id} {ins.shape} with #{new.id} {new.shape}: different value shape")
    if new is ins:
        return ins
    if not ins.outputs and ins is m.last and not ins.is_return():
        m.replace_instruction(ins, Op("identity"), [new])
        return ins
    m.replace_all_uses(ins, new)
    return new


def replace_with_op(m: Module, ins: Instruction, op: Op, inputs: Sequence[Instruction]) -> Instruction:
    """Rewrite `ins` in place (the id survives), checking the value keeps its lens and type."""
    lens, t = ins.shape.lens, ins.shape.type
    m.replace_instruction(ins, op, inputs)
    if ins.shape.lens != lens or ins.shape.type != t:
        raise IRError(f"rewrite of #{ins.id} changed its value shape to {ins.shape}")
    return ins


def rewrite_to(spec: To | str) -> Callable[[Module, MatchResult], None]:
    """apply() for a table row: the root becomes `spec` (rewritten in place, or replaced by a binding)."""

    def apply(m: Module, r: MatchResult) -> None:
        if isinstance(spec, str):
            replace_value(m, r.root, r[spec])
            return
        inputs = [build(m, r, a, r.root) for a in spec.args]
        replace_with_op(m, r.root, Op(spec.op, _attrs(spec, r)), inputs)

    return apply


class Row(Finder):
    """One table row: name, matcher, replacement spec (or function), optional refusal check."""

    def __init__(self, name: str, m: Matcher, out: To | str | Callable[[Module, MatchResult], Any],
                 check: Callable[[Module, MatchResult], str | None] | None = None):
        self.name, self._m, self._check = name, m, check
        self._apply = out if callable(out) and not isinstance(out, To) else rewrite_to(out)

    def matcher(self) -> Matcher:
        return self._m

    def plan(self, m: Module, r: MatchResult) -> Plan:
        reason = self._check(m, r) if self._check else None
        return reason if reason is not None else (lambda: self._apply(m, r))


def row(name: str, m: Matcher, out: To | str | Callable, check: Callable | None = None) -> Row:
    return Row(name, m, out, check)


# ---- running rules -------------------------------------------------------------------------------
def dce(m: Module) -> bool:
    from .dead_code_elimination import DeadCodeElimination

    return bool(DeadCodeElimination().apply_module(m, None))


def sweep(m: Module, rules: Sequence[Rule], *, with_dce: bool = True) -> bool:
    changed = find_matches(m, *rules) > 0
    if with_dce:
        changed = dce(m) or changed
    return changed


def until_stable(n: int, step: Callable[[], bool]) -> bool:
    """MIGraphX's repeat_while_changes, also reporting whether any iteration changed something."""
    any_change = False
    for _ in range(n):
        if not step():
            break
        any_change = True
    return any_change


# ---- shared matchers and queries -----------------------------------------------------------------
def lit_broadcast() -> Matcher:
    """A constant or a `broadcast` (MIGraphX's lit_broadcast: either can be folded or hoisted)."""
    return any_of(is_constant(), name("broadcast"))


def not_lit_broadcast() -> Matcher:
    return none_of(is_constant(), name("broadcast"))


def static(ins: Instruction) -> bool:
    return ins.shape.dyn_dims is None and not ins.shape.is_tuple


def all_static() -> Matcher:
    return pred("static_shapes", lambda ins: static(ins) and all(static(i) for i in ins.inputs),
                "dynamic or tuple shapes are left alone")


def users_named(ins: Instruction, *names: str) -> list[Instruction]:
    return [u for u in ins.outputs if u.name in names]


def const_value(ins: Instruction) -> np.ndarray:
    return np.asarray(ins.eval())


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


def broadcast_scalar(m: Module, before: Instruction, value: float, like: Instruction) -> Instruction:
    """A constant `value` in `like`'s type, broadcast to its lens (MIGraphX's insert_common_op on a
    scalar literal)."""
    from ..dtypes import np_dtype

    lit = m.add_literal(np.asarray([value], dtype=np_dtype(like.shape.type)))
    return m.insert_instruction(before, Op("multibroadcast", out_lens=like.shape.lens), [lit])
