"""Collapse chains of view ops into the fewest equivalent ones (simplify_reshapes'
find_nested_shape_transforms; MIGraphX uses its shape_transform_descriptor for this).

Reshape-like ops (reshape, squeeze, unsqueeze, flatten) and transposes only regroup and reorder
row-major index digits. We track those digits as *atoms*: each input axis starts as one atom; a
reshape that cuts through an atom splits it into an outer and an inner atom (everywhere it
appears), and a transpose reorders axes. At the end every output axis is a run of atoms and the
input is the atoms in their original order, so the chain equals

    reshape(x, atom sizes) -> transpose(atom order) -> reshape(out lens)

and we emit the shortest of its special cases (nothing, one reshape, one transpose, transpose +
reshape, reshape + transpose). Size-1 atoms carry no data and are dropped. A reshape that mixes
digits (e.g. {2, 3} -> {3, 2} after a transpose) has no atom form; a chain without transposes
still collapses to one reshape then.

Chains through broadcasts are checked by simulation on the (small) source: a chain whose result
is "reshape the source, then broadcast" becomes exactly that.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ...ir import Instruction
from ...op import Op
from ..rule_helpers import auto_reshape_op

RESHAPES = frozenset({"reshape", "squeeze", "unsqueeze", "flatten"})
BROADCASTS = frozenset({"broadcast", "multibroadcast"})
TRANSFORMS = RESHAPES | BROADCASTS | {"transpose"}
# Simulating a broadcast chain materialises one index per output element; beyond this we skip.
MAX_SIMULATED = 1 << 22


def regroup_atoms(
    axes: Sequence[Sequence[int]],
    lens: Sequence[int],
    size: Callable[[int], int],
    split: Callable[[int, int], tuple[int, int]],
) -> list[list[int]] | None:
    """The atoms of `axes` (in order) grouped into the axes of a reshape to `lens`, splitting an
    atom (split(atom, outer) -> (hi, lo)) where an output axis ends inside it; None where the
    reshape is not a regrouping of whole or split atoms (size-1 axes take no atom)."""
    seq = [a for ax in axes for a in ax]
    new_axes: list[list[int]] = []
    i = 0
    for d in lens:
        cur: list[int] = []
        rem = d
        while rem > 1:
            if i >= len(seq):
                return None
            a = seq[i]
            n = size(a)
            if rem % n == 0:
                cur.append(a)
                rem //= n
            elif n % rem == 0:
                hi, lo = split(a, rem)
                seq[i : i + 1] = [hi, lo]
                cur.append(hi)
                rem = 1
            else:
                return None
            i += 1
        new_axes.append(cur)
    return new_axes if i == len(seq) else None


class _Atoms:
    def __init__(self, lens: Sequence[int]):
        self.size: dict[int, int] = {}
        self.order: list[int] = []  # atoms of the input, outermost first
        self.axes: list[list[int]] = []
        for n in lens:
            if n == 1:
                self.axes.append([])
                continue
            a = self._new(n)
            self.order.append(a)
            self.axes.append([a])

    def _new(self, n: int) -> int:
        a = len(self.size)
        self.size[a] = n
        return a

    def _split(self, a: int, outer: int) -> tuple[int, int]:
        hi, lo = self._new(outer), self._new(self.size[a] // outer)
        k = self.order.index(a)
        self.order[k : k + 1] = [hi, lo]
        return hi, lo

    def reshape(self, lens: Sequence[int]) -> bool:
        new_axes = regroup_atoms(self.axes, lens, self.size.__getitem__, self._split)
        if new_axes is None:
            return False
        self.axes = new_axes
        return True

    def transpose(self, perm: Sequence[int]) -> None:
        self.axes = [self.axes[p] for p in perm]


def _perm_op(perm: Sequence[int]) -> Op | None:
    return None if list(perm) == list(range(len(perm))) else Op("transpose", permutation=list(perm))


def plan_reshape_transpose(in_lens: Sequence[int], chain: Sequence[Instruction]) -> list[Op] | None:
    """Fewest ops equal to `chain` (reshape-like ops and transposes) applied to lens `in_lens`."""
    out_lens = tuple(chain[-1].shape.lens)
    at = _Atoms(in_lens)
    has_transpose = any(ins.name == "transpose" for ins in chain)
    for ins in chain:
        if ins.name == "transpose":
            at.transpose(ins.op["permutation"])
        elif not at.reshape(ins.shape.lens):
            return None if has_transpose else [auto_reshape_op(in_lens, out_lens)]
    final = [a for ax in at.axes for a in ax]
    if final == at.order:
        return [auto_reshape_op(in_lens, out_lens)]
    for build in (_single_transpose, _transpose_reshape, _reshape_transpose):
        ops = build(at, tuple(in_lens), out_lens)
        if ops is not None:
            return ops
    sizes = [at.size[a] for a in at.order]
    perm = [at.order.index(a) for a in final]
    return [auto_reshape_op(in_lens, sizes), _perm_op(perm), auto_reshape_op([sizes[p] for p in perm], out_lens)]


def _input_unsplit(at: _Atoms, in_lens: tuple[int, ...]) -> bool:
    return len(at.order) == sum(1 for n in in_lens if n != 1)


def _output_unmerged(at: _Atoms) -> bool:
    return all(len(ax) <= 1 for ax in at.axes)


def _input_axis_of(at: _Atoms, in_lens: tuple[int, ...]) -> dict[int, int]:
    non1 = [i for i, n in enumerate(in_lens) if n != 1]
    return dict(zip(at.order, non1))


def _single_transpose(at: _Atoms, in_lens, out_lens) -> list[Op | None] | None:
    if not (_input_unsplit(at, in_lens) and _output_unmerged(at) and len(in_lens) == len(out_lens)):
        return None
    where = _input_axis_of(at, in_lens)
    ones = iter(i for i, n in enumerate(in_lens) if n == 1)
    return [_perm_op([where[ax[0]] if ax else next(ones) for ax in at.axes])]


def _transpose_reshape(at: _Atoms, in_lens, out_lens) -> list[Op | None] | None:
    if not _input_unsplit(at, in_lens):
        return None
    where = _input_axis_of(at, in_lens)
    final = [a for ax in at.axes for a in ax]
    perm = [where[a] for a in final] + [i for i, n in enumerate(in_lens) if n == 1]
    mid = [in_lens[p] for p in perm]
    return [_perm_op(perm), auto_reshape_op(mid, out_lens)]


def _reshape_transpose(at: _Atoms, in_lens, out_lens) -> list[Op | None] | None:
    if not _output_unmerged(at):
        return None
    ones = sum(1 for ax in at.axes if not ax)
    sizes = [at.size[a] for a in at.order] + [1] * ones
    spare = iter(range(len(at.order), len(sizes)))
    perm = [at.order.index(ax[0]) if ax else next(spare) for ax in at.axes]
    return [auto_reshape_op(in_lens, sizes), _perm_op(perm)]


def plan_broadcast_chain(x: Instruction, chain: Sequence[Instruction]) -> list[Op] | None:
    """A chain containing broadcasts that equals reshape(x) followed by one multibroadcast."""
    out_lens = tuple(chain[-1].shape.lens)
    if x.shape.elements() == 1:
        src = (1,) if len(x.shape.lens) > len(out_lens) else None
        first = auto_reshape_op(x.shape.lens, src) if src else None
        return [first, Op("multibroadcast", out_lens=out_lens)]
    if math.prod(out_lens) > MAX_SIMULATED or math.prod(out_lens) == 0:
        return None  # an empty result (Tile by 0) has no element positions to simulate
    idx = np.arange(x.shape.elements()).reshape(x.shape.lens)
    for ins in chain:
        idx = np.asarray(ins.op.spec.compute(ins.op, [idx], ins.shape, None))
    core_lens = []
    core = idx
    for axis, n in enumerate(out_lens):
        first = np.take(core, [0], axis=axis)
        if n > 1 and np.array_equal(np.broadcast_to(first, core.shape), core):
            core = first
            core_lens.append(1)
        else:
            core_lens.append(n)
    if core.size != x.shape.elements() or not np.array_equal(core.reshape(-1), np.arange(core.size)):
        return None
    src, n = tuple(x.shape.lens), len(out_lens)
    if tuple(core_lens) == (1,) * (n - len(src)) + src:  # multibroadcast aligns x to the right
        return [Op("multibroadcast", out_lens=out_lens)]
    # x's axes sit contiguously in the output: one broadcast. Not when x has 1-long axes of its own
    # (MIGraphX keeps unsqueeze + multibroadcast for those, and so do we).
    for k in range(n - len(src) + 1 if 1 not in src else 0):
        if tuple(core_lens) == (1,) * k + src + (1,) * (n - k - len(src)):
            return [Op("broadcast", axis=k, out_lens=out_lens)]
    return [auto_reshape_op(src, core_lens), Op("multibroadcast", out_lens=out_lens)]
