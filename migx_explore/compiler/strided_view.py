"""A chain of view ops read as one strided view, when it is one.

A value computed by reshape / transpose / (multi)broadcast / (un)squeeze / contiguous from a
tensor only moves elements around, so a kernel could read the tensor itself at the right
offsets. The IR cannot always say so: `reshape` needs a standard input, so reshaping a broadcast
(grouped-query attention's K/V repeat, [B, Hkv, rep, S, D] -> [B, Hkv·rep, S, D]) materialises a
copy, and so does the `contiguous` exporters put before a reshape of a transpose.

Here each axis of a value is a list of atoms (length, stride) over the source buffer, outer
first: axis index i reads atom k at digit k of i in the mixed radix of the atom lengths. A
reshape regroups the atoms (splitting one when an axis boundary falls inside it), a transpose
permutes axes, a broadcast adds stride-0 atoms, a contiguous changes nothing; so every chain of
these composes, and what remains is whether each axis of the result is one stride. The
head axis of a repeated K is two atoms, (Hkv, s) then (rep, 0): not one stride, but split
into [Hkv, rep] it is. `refine_batch` finds the split of the leading (batch) axes that makes
every operand of a kernel strided at once (attention splits Q, the masks and the output the same
way, which is free for them: one stride splits into any factors).
"""

from __future__ import annotations

from collections.abc import Sequence

from .ir import Instruction
from .shape import Shape

Atom = tuple[int, int]  # (length, stride in elements of the source buffer)
Axes = list[list[Atom]]  # one list of atoms per axis, outer atom first; [] is an axis of length 1

VIEW_CHAIN_OPS = ("reshape", "transpose", "multibroadcast", "broadcast", "unsqueeze", "squeeze", "contiguous")


def axes_of(shape: Shape) -> Axes:
    return [[(n, s)] if n != 1 else [] for n, s in zip(shape.lens, shape.strides)]


def _regroup(atoms: list[Atom], lens: Sequence[int]) -> Axes | None:
    """Row-major reshape of the flat atom sequence into axes of `lens`, splitting atoms where an
    axis boundary falls inside one; None when a boundary falls between digits of no atom."""
    rest = [a for a in atoms if a[0] != 1]
    out: Axes = []
    k = 0
    for n in lens:
        if n == 0:
            return None
        axis: list[Atom] = []
        need = n
        while need > 1:
            if k >= len(rest):
                return None
            a, s = rest[k]
            if a <= need:
                if need % a:
                    return None
                axis.append((a, s))
                need //= a
                k += 1
            else:
                if a % need:
                    return None
                axis.append((need, s * (a // need)))
                rest[k] = (a // need, s)
                need = 1
        out.append(axis)
    return out if k == len(rest) else None


def _flat(axes: Axes) -> list[Atom]:
    return [a for axis in axes for a in axis]


def _broadcast(axes: Axes, in_lens: Sequence[int], out_lens: Sequence[int], axis: int) -> Axes:
    out: Axes = [[(n, 0)] if n != 1 else [] for n in out_lens]
    for i, n in enumerate(in_lens):
        if n == out_lens[axis + i]:
            out[axis + i] = axes[i]
    return out


def apply_view(ins: Instruction, axes: Axes, in_lens: Sequence[int]) -> Axes | None:
    """`axes` (of a value with lens `in_lens`) after the view `ins`; None if not expressible."""
    out_lens = ins.shape.lens
    if ins.name == "contiguous":
        return axes
    if ins.name == "transpose":
        return [axes[p] for p in ins.op["permutation"]]
    if ins.name in ("reshape", "squeeze", "unsqueeze"):
        return _regroup(_flat(axes), out_lens)
    if ins.name == "multibroadcast" and len(ins.inputs) == 1:
        return _broadcast(axes, in_lens, out_lens, len(out_lens) - len(in_lens))
    if ins.name == "broadcast":
        return _broadcast(axes, in_lens, out_lens, ins.op["axis"])
    return None


def compose(shape: Shape, chain: Sequence[Instruction]) -> Axes | None:
    """The axes of the last instruction of `chain` (views, source side first) read from a
    buffer of `shape` that stands for the first one's input; None if some step is no view."""
    axes, lens = axes_of(shape), shape.lens
    for ins in chain:
        if ins.name not in VIEW_CHAIN_OPS:
            return None
        got = apply_view(ins, axes, lens)
        if got is None:
            return None
        axes, lens = got, ins.shape.lens
    return axes


def merge(atoms: Sequence[Atom]) -> list[Atom]:
    """Adjacent atoms that are one stride together, merged (outer length n1, stride n2·s2)."""
    out: list[Atom] = []
    for n, s in atoms:
        if n == 1:
            continue
        if out and out[-1][1] == n * s:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return out


def is_copy_view(ins: Instruction) -> bool:
    """A view op that copies: contiguous, or a reshape of a value that is not standard."""
    if ins.name == "contiguous":
        return True
    return ins.name == "reshape" and not ins.inputs[0].shape.standard()


def view_chain(x: Instruction) -> list[Instruction]:
    """The view ops that compute `x`, source side first, from the first one that copies (empty
    when none copies: then `x` already reads its source through strides)."""
    chain = []
    ins = x
    while ins.name in VIEW_CHAIN_OPS and len(ins.inputs) == 1:
        chain.append(ins)
        ins = ins.inputs[0]
    chain.reverse()
    first = next((k for k, c in enumerate(chain) if is_copy_view(c)), None)
    return [] if first is None else chain[first:]


def _split_points(axes_list: Sequence[Sequence[Atom]], n: int) -> list[int] | None:
    """Factors (outer first) of an axis of length n that every atom list splits into: the
    union of their inner products must be a chain of divisors."""
    if n == 1:
        return []
    inner = set()
    for atoms in axes_list:
        p = 1
        for a, _ in reversed(merge(atoms)[1:]):
            p *= a
            inner.add(p)
    pts = sorted(inner)
    for lo, hi in zip([1, *pts], [*pts, n]):
        if hi % lo:
            return None
    return [hi // lo for lo, hi in zip([1, *pts], [*pts, n])][::-1]


def refine_batch(operands: Sequence[Axes], nbatch: int) -> tuple[list[int], list[list[int]]] | None:
    """Split the leading `nbatch` axes (the same lens in every operand) so each operand reads as
    one strided tensor: (refined batch lens, per operand its strides: the refined batch axes,
    then its other axes). Batch factors of length 1 are dropped. None when the splits of two
    operands cross, or a non-batch axis is not one stride."""
    lens: list[int] = []
    per_axis: list[list[int]] = []
    for b in range(nbatch):
        n = 1
        for a, _ in operands[0][b]:
            n *= a
        factors = _split_points([op[b] for op in operands], n)
        if factors is None:
            return None
        per_axis.append(factors)
        lens += factors
    strides_list = []
    for op in operands:
        strides: list[int] = []
        for b, factors in enumerate(per_axis):
            parts = _regroup(op[b], factors)
            if parts is None:
                return None
            for part in parts:
                m = merge(part)
                if len(m) > 1:
                    return None
                strides.append(m[0][1] if m else 0)
        for axis in op[nbatch:]:
            m = merge(axis)
            if len(m) > 1:
                return None
            strides.append(m[0][1] if m else 0)
        strides_list.append(strides)
    return lens, strides_list
