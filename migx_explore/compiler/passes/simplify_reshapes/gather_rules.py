"""find_gather (MIGraphX src/simplify_reshapes.cpp, with generate_shape_transforms_for from
src/shape_transform_descriptor.cpp): a gather with constant indices that reads a *strided view* of
its data becomes view ops (slice, reshape, transpose, multibroadcast) instead of a gather kernel.

The decision is MIGraphX's, step for step:
1. Flatten: every output element's offset into the (row-major) data, as one list.
2. Group the list into arithmetic runs, the runs into runs of runs, and so on; every level must be
   uniform (same count and stride) with non-negative strides and no offset below the first. The
   levels are the view's lens and strides (a trailing 1-long stride-1 axis when no stride is 1).
3. The strides must nest (each divides the next larger) so that the view is: a 1-D window of the
   data from the first offset, reshaped into (stride ratios), transposed into output order,
   broadcast on the stride-0 axes, then sliced to the lens. A window reaching past the end reads
   a doubled copy of the data (broadcast {2, N} + reshape), as MIGraphX does.

We emit those ops directly where MIGraphX first simplifies them through its descriptor, so the
form can differ (same values); simple contiguous / evenly strided / repeated indices still get the
short slice (+ step / multibroadcast) + reshape form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...matcher import arg, is_constant, name, none_of, pred
from ...op import Op, compute_shape
from ...ops.common import norm_axis
from ...pattern_rewriter import Rule, replace_value
from ...ref import eval_instruction
from ...shape import Shape
from ..rule_helpers import all_static, auto_reshape_op, insert_ops


def strided_view(offsets: Sequence[int] | np.ndarray) -> tuple[list[int], list[int]] | None:
    """(lens, strides) of the view whose row-major elements are `offsets` (relative to the first),
    or None (MIGraphX make_strided_view).

    MIGraphX groups the offsets into arithmetic runs, the runs into runs of runs, and so on. A
    level of n bases splits into rows of c, c being the length of the leading run; it is a
    level of the view when every row steps by that run's (non-negative) stride and no row starts
    below the first offset. Done on whole arrays: a Resize's gather reads ~10^6 offsets, and one
    Python object per offset made this pass take seconds on a 640x640 detector."""
    bases = np.asarray(offsets, dtype=np.int64).reshape(-1)
    if bases.size == 0:
        return [0, 1], [0, 1]
    bases = bases - bases[0]
    if bases.size == 1:
        return [1], [1]
    lens: list[int] = []
    strides: list[int] = []
    while bases.size > 1:
        steps = np.diff(bases)
        stride = int(steps[0])
        if stride < 0:  # the second run would start below the first offset
            return None
        off = np.flatnonzero(steps != stride)
        run = int(off[0]) + 1 if off.size else int(bases.size)
        if bases.size % run:
            return None
        rows = bases.reshape(-1, run)
        if not (np.diff(rows, axis=1) == stride).all():
            return None
        bases = rows[:, 0]
        if (bases < 0).any():
            return None
        lens.append(run)
        strides.append(stride)
    lens.reverse()
    strides.reverse()
    if 1 not in strides:
        lens.append(1)
        strides.append(1)
    return lens, strides


def _multi(idx: int, lens: Sequence[int]) -> list[int]:
    out = [0] * len(lens)
    for k in range(len(lens) - 1, 0, -1):
        out[k] = idx % lens[k]
        idx //= lens[k]
    out[0] = idx
    return out


def view_ops(lens: list[int], strides: list[int], n: int, offset: int) -> list[Op] | None:
    """Ops turning a 1-D value of n elements into the strided view (lens, strides) starting at
    `offset`, or None (MIGraphX generate_shape_transforms_for, without its final simplification)."""
    lens, strides = list(lens), list(strides)
    if 1 not in strides and any(strides):
        lens.append(1)
        strides.append(1)
    last = max(range(len(strides)), key=lambda k: (strides[k], -k))
    total = max(1, strides[last] * lens[last])
    extra = n // total
    if extra > 1:
        lens.insert(0, 1)
        strides.insert(0, total)
    extra = max(1, extra)
    # Broadcast axes (stride 0) become 1-long axes with their neighbour's stride.
    nz = next((s for s in strides if s != 0), 1)
    pre_lens, pre_strides, prev = list(lens), list(strides), nz
    for k, s in enumerate(strides):
        if s == 0:
            pre_lens[k], pre_strides[k] = 1, prev
        else:
            prev = s
    perm = sorted(range(len(lens)), key=lambda k: (-pre_strides[k], -pre_lens[k]))
    iperm = [perm.index(k) for k in range(len(perm))]
    t_lens = [pre_lens[p] for p in perm]
    t_strides = [pre_strides[p] for p in perm]
    start = [t_strides[0]]
    for prev_s, cur in zip(t_strides, t_strides[1:]):
        if cur == 0 or prev_s % cur:
            return None
        start.append(prev_s // cur)
    start[0] = extra if extra > 1 else t_lens[0]
    nelements = math.prod(start)
    if nelements < math.prod(t_lens) * extra:
        return None
    start_mask = [0] * len(start)
    if offset:
        idx = _multi(offset, start)
        if all(i <= s - t for i, s, t in zip(idx, start, t_lens)):
            start_mask = [idx[p] for p in iperm]
            offset = 0
    slice_mask = [0 if s == t else t for s, t in zip(start, t_lens)]
    slice_mask = [slice_mask[p] for p in iperm]
    blens = [start[p] for p in iperm]
    blens = [ln if b == 1 else b for ln, b in zip(lens, blens)]
    ops: list[Op] = []
    end = offset + nelements
    if offset or nelements != n:
        if end > 2 * n:
            return None
        if end > n:  # read past the end: a doubled copy of the data keeps the window in bounds
            ops += [Op("broadcast", axis=1, out_lens=[2, n]), Op("reshape", dims=[2 * n])]
        ops.append(Op("slice", axes=[0], starts=[offset], ends=[end]))
    ops += [Op("reshape", dims=start), Op("transpose", permutation=iperm), Op("multibroadcast", out_lens=blens)]
    axes = [k for k, msk in enumerate(slice_mask) if msk]
    if axes:
        ops.append(
            Op("slice", axes=axes, starts=[start_mask[k] for k in axes], ends=[start_mask[k] + lens[k] for k in axes])
        )
    return ops


def flat_gather_offsets(data_lens: Sequence[int], indices: np.ndarray, axis: int) -> np.ndarray:
    """Row-major offset into data of every output element of gather(data, indices, axis)."""
    flat = np.arange(math.prod(data_lens), dtype=np.int64).reshape(data_lens)
    return np.take(flat, indices, axis=axis).reshape(-1)


def _simple_ops(data_lens, axis: int, idx: np.ndarray) -> list[Op] | None:
    """slice (+ step | multibroadcast) for indices base + k*i along `axis`, or None."""
    flat = idx.reshape(-1)
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    if step < 0 or not np.array_equal(flat, flat[0] + step * np.arange(flat.size)):
        return None
    base, n = int(flat[0]), int(flat.size)
    span = 1 if step == 0 else step * (n - 1) + 1
    ops = [Op("slice", axes=[axis], starts=[base], ends=[base + span])]
    if step > 1:
        ops.append(Op("step", axes=[axis], steps=[step]))
    elif step == 0 and n > 1:
        lens = list(data_lens)
        lens[axis] = n
        ops.append(Op("multibroadcast", out_lens=lens))
    return ops


class GatherView(Rule):
    """gather(data, constant indices) reading a strided view of data -> view ops."""

    name = "find_gather"

    def pattern(self):
        return name("gather")(none_of(is_constant()), all_static(), arg(1)(is_constant()))

    def check(self, m, r):
        ins = r.root
        data, idx_ins = ins.inputs
        dlens = list(data.shape.lens)
        if not dlens:
            return "the data is a scalar"
        axis = norm_axis(ins.op["axis"], len(dlens), "gather")
        n_axis = dlens[axis]
        idx = np.asarray(eval_instruction(idx_ins)).astype(np.int64)
        if n_axis == 0 or idx.size == 0:
            return "empty data axis or indices"
        idx = np.where(idx < 0, idx + n_axis, idx)
        if idx.min() < 0 or idx.max() >= n_axis:
            return "an index is out of range"
        one_d = len(dlens) == 1 and idx.ndim == 1
        offsets = idx.reshape(-1) if one_d else flat_gather_offsets(dlens, idx, axis)
        view = strided_view(offsets)
        if view is None or math.prod(view[0]) != offsets.size:
            return "the indices do not read a strided view of the data"
        n = math.prod(dlens)
        ops = view_ops(view[0], view[1], n, int(offsets[0]))
        if ops is None:
            return "the strided view has no slice/reshape/transpose form"
        simple = _simple_ops(dlens, axis, idx)
        if simple is not None:  # the same decision, in the short form
            lens = list(dlens)
            lens[axis] = idx.size
            chain = [*simple, auto_reshape_op(lens, ins.shape.lens)]
        else:
            view_lens = _view_lens(ops, n)
            chain = (
                ([] if one_d else [auto_reshape_op(dlens, [n])]) + ops + [auto_reshape_op(view_lens, ins.shape.lens)]
            )
        return lambda: replace_value(m, ins, insert_ops(m, ins, chain, data))


def _view_lens(ops: Sequence[Op], n: int) -> list[int]:
    s = Shape.of("float32", [n])
    for op in ops:
        s = compute_shape(op, [s])
    return list(s.lens)


class GatherScalar(Rule):
    """gather(data, scalar index) -> reshape(gather(data, unsqueeze(index))) (a 1-element index list)."""

    name = "find_gather_scalar"

    def pattern(self):
        scalar = pred(
            "scalar_index",
            lambda i: i.shape.ndim == 1 and i.shape.elements() == 1 and i.shape.scalar_shape(),
            "the index is not a scalar",
        )
        return name("gather")(none_of(is_constant()), all_static(), arg(1)(scalar))

    def check(self, m, r):
        ins = r.root
        data, idx = ins.inputs

        def apply():
            one = m.insert_instruction(ins, Op("unsqueeze", axes=[0]), [idx])
            g = m.insert_instruction(ins, ins.op, [data, one])
            replace_value(m, ins, insert_ops(m, ins, [auto_reshape_op(g.shape.lens, ins.shape.lens)], g))

        return apply
