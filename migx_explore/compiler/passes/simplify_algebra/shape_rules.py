"""simplify_algebra finders that move shape ops (broadcasts, reshapes) across a dot or a split."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...ir import Instruction
from ...matcher import arg, name, on_root_ops, pred
from ...op import Op, compute_shape
from ...ops.common import norm_axis
from ...pattern_rewriter import Rule, replace_with_op
from ..rule_helpers import all_static, slice_ranges
from .concat_rules import BCASTS, get_splits, is_pointwise_op, pointwise_op


class DotBroadcast(Rule):
    """dot(broadcast(a), broadcast(b)) whose leading batch axes are broadcast in both inputs ->
    multibroadcast(dot(a', b')): the product is computed once, without those batch axes."""

    name = "find_dot_broadcast"

    def pattern(self):
        return name("dot")(
            all_static(),
            pred(
                "broadcast_inputs",
                lambda i: len(i.inputs) == 2 and all(x.name in BCASTS for x in i.inputs),
                "an input is not a broadcast",
            ),
        )

    def check(self, m, r):
        ins = r.root
        out = ins.shape.lens
        if len(out) < 3:
            return "no batch axes"
        a, b = ins.inputs
        naxes = 0
        while naxes < len(out) - 2 and a.shape.strides[naxes] == 0 and b.shape.strides[naxes] == 0:
            naxes += 1
        if naxes == 0:
            return "the leading batch axis is not broadcast in both inputs"

        def rebroadcast(x):
            src, lens = x.inputs[0], list(x.shape.lens[naxes:])
            if list(src.shape.lens) == lens:
                return src
            extra = src.shape.ndim - len(lens)
            if extra > 0:  # leading size-1 axes of the source go with the dropped batch axes
                src = m.insert_instruction(ins, Op("squeeze", axes=list(range(extra))), [src])
            if x.name == "multibroadcast":
                return m.insert_instruction(ins, Op("multibroadcast", out_lens=lens), [src])
            return m.insert_instruction(ins, Op("broadcast", axis=x.op["axis"] - naxes, out_lens=lens), [src])

        for x in (a, b):
            src = x.inputs[0]
            extra = src.shape.ndim - (len(out) - naxes)
            if extra > 0 and any(n != 1 for n in src.shape.lens[:extra]):
                return "a broadcast source has more axes than the dot without its batch axes"
            if x.name == "broadcast" and x.op["axis"] < naxes:
                return "a broadcast places its source on a dropped batch axis"

        def apply():
            dot = m.insert_instruction(ins, ins.op, [rebroadcast(a), rebroadcast(b)])
            replace_with_op(m, ins, Op("multibroadcast", out_lens=list(out)), [dot])

        return apply


DOT_BROADCAST = DotBroadcast()


def _single_axis_splits(x) -> list:
    splits = get_splits(x)
    return splits if splits and len(splits[0].op["axes"]) == 1 else []


class SplitReshape(Rule):
    """reshape(contiguous(slice_i(x))) with the same reshape after several slices tiling x along
    one axis -> slice_i(reshape(x)): one reshape of x, sliced, instead of a copy per slice."""

    name = "find_split_reshape"

    def pattern(self):
        return name("reshape")(all_static(), arg(0)(name("contiguous")(arg(0)(name("slice").bind("slice")))))

    def check(self, m, r):
        rsp, slc = r.root, r["slice"]
        x = slc.inputs[0]
        splits = _single_axis_splits(x)
        if not splits:
            return "the slices of the input do not tile it along one axis"
        group = [u for s in splits for c in s.outputs if c.name == "contiguous" for u in c.outputs if u.op == rsp.op]
        if len(group) < 2:
            return "only one slice -> contiguous -> reshape of this form"
        axis = norm_axis(splits[0].op["axes"][0], x.shape.ndim, "slice")
        in_lens, out_lens = x.shape.lens, list(rsp.shape.lens)
        block = math.prod(slc.shape.lens[axis:])  # one slice's elements per outer index
        rsp_axis = next((k for k in range(len(out_lens)) if math.prod(out_lens[k:]) == block), None)
        if rsp_axis is None:
            return "no reshape axis starts where the sliced axis starts"
        # MIGraphX also accepts a one-element block matched against the last axis, which slices the
        # wrong elements (its test reorder_reshape_slice_len_1); the block must be whole axes here.
        inner, rsp_inner = math.prod(in_lens[axis + 1 :]), math.prod(out_lens[rsp_axis + 1 :])
        fixed = math.prod(out_lens[:rsp_axis]) * rsp_inner
        if x.shape.elements() % fixed:
            return "the input cannot be reshaped to slice along the reshape axis"
        bounds = []
        for u in group:
            s = u.inputs[0].inputs[0]
            start, end = (v * inner for v in slice_ranges(s)[axis])
            if start % rsp_inner or end % rsp_inner:
                return "a slice boundary falls inside the reshape's inner block"
            bounds.append((start // rsp_inner, end // rsp_inner))
        new_lens = list(out_lens)
        new_lens[rsp_axis] = x.shape.elements() // fixed

        def apply():
            whole = m.insert_after(x, Op("reshape", dims=new_lens), [x])
            for u, (b, e) in zip(group, bounds):
                replace_with_op(m, u, Op("slice", axes=[rsp_axis], starts=[b], ends=[e]), [whole])

        return apply


class SplitTranspose(Rule):
    """transpose(slice_i(x)), the same transpose after every slice tiling x -> slice_i(transpose(x))."""

    name = "find_split_transpose"

    def pattern(self):
        return name("transpose")(all_static(), arg(0)(name("slice").bind("slice")))

    def check(self, m, r):
        trans, slc = r.root, r["slice"]
        x = slc.inputs[0]
        splits = _single_axis_splits(x)
        if not splits:
            return "the slices of the input do not tile it along one axis"
        if any(len(s.outputs) != 1 for s in splits):
            return "a slice has more than one user"
        group = [s.outputs[0] for s in splits]
        if any(u.op != trans.op for u in group):
            return "the slices are not all followed by this transpose"
        perm = list(trans.op["permutation"])
        axis = norm_axis(splits[0].op["axes"][0], x.shape.ndim, "slice")
        new_axis = perm.index(axis)

        def apply():
            whole = m.insert_after(x, trans.op, [x])
            for u, s in zip(group, splits):
                b, e = slice_ranges(s)[axis]
                replace_with_op(m, u, Op("slice", axes=[new_axis], starts=[b], ends=[e]), [whole])

        return apply


SPLIT_RESHAPE = SplitReshape()
SPLIT_TRANSPOSE = SplitTranspose()


def _source(x: Instruction) -> Instruction:
    """Below a chain of broadcasts (MIGraphX's get_non_broadcast_input)."""
    while len(x.inputs) == 1 and "broadcast" in x.name:
        x = x.inputs[0]
    return x


class _Shaped:
    """A value that is only planned: its shape, for a dry run of a rewrite."""

    def __init__(self, shape):
        self.shape = shape


def _dry_emit(before, op: Op, inputs, mods=()) -> _Shaped:
    return _Shaped(compute_shape(op, [x.shape for x in inputs], list(mods)))


def _common_args(emit, before: Instruction, xs: list) -> list:
    """MIGraphX's insert_common_args: multibroadcast every input to the inputs' common lens."""
    common = list(np.broadcast_shapes(*(tuple(x.shape.lens) for x in xs)))
    return [x if list(x.shape.lens) == common else emit(before, Op("multibroadcast", out_lens=common), [x]) for x in xs]


class InnerBroadcast(Rule):
    """op(broadcast(a), broadcast(b)) -> broadcast(op(a', b')): compute on the axes some input
    really varies along, then broadcast the result. As MIGraphX: with equal broadcasts the op runs
    on their sources and the same broadcast follows; otherwise the axes broadcast in every input are
    squeezed away (rank reduction) and the result is broadcast back."""

    name = "find_inner_broadcast"

    def pattern(self):
        root = pred(
            "pointwise_of_broadcasts",
            lambda i: is_pointwise_op(i) and bool(i.inputs) and all(x.name in BCASTS for x in i.inputs),
            "not a pointwise op whose inputs are all broadcasts",
        )
        return on_root_ops(root, pointwise_op)(all_static())  # find_matches tries it on pointwise roots only

    def check(self, m, r):
        ins = r.root
        bcasts = list(ins.inputs)
        if len({x.shape.type for x in bcasts}) > 1:
            return "inputs of different types"
        if any(x.inputs[0].shape.elements() >= ins.shape.elements() for x in bcasts):
            return "a broadcast source is as large as the result"
        first = next((x for x in bcasts if not x.shape.scalar_shape()), None)
        same = first is None or all(
            x.op == first.op
            and (_source(x).shape.elements() == 1 or _source(x).shape.lens == _source(first).shape.lens)
            for x in bcasts[bcasts.index(first) :]
        )
        if same:
            build = lambda emit: self._same_broadcasts(emit, ins, first or bcasts[0])  # noqa: E731
        elif any(x.inputs[0].shape.broadcasted() for x in bcasts):
            return "a broadcast source is itself broadcast"
        else:
            axes = [
                a for a in range(ins.shape.ndim) if all(x.shape.lens[a] == 1 or x.shape.strides[a] == 0 for x in bcasts)
            ]
            if not axes:
                return "no axis is broadcast in every input"
            build = lambda emit: self._diff_broadcasts(emit, ins, axes)  # noqa: E731
        try:  # a dry run: where MIGraphX's construction gives no valid program here, refuse
            op, y = build(_dry_emit)
            got = compute_shape(op, [y.shape])
        except (ShapeError, ValueError) as e:
            return f"the broadcasts cannot be moved after the op here ({e})"
        if got.lens != ins.shape.lens:
            return "the broadcasts cannot be moved after the op here"

        def apply():
            op, y = build(m.insert_instruction)
            replace_with_op(m, ins, op, [y])

        return apply

    @staticmethod
    def _same_broadcasts(emit, ins, first):
        ndim = ins.shape.ndim
        srcs = []
        for x in ins.inputs:
            src = _source(x)
            if src.shape.elements() == 1 and src.shape.ndim > 1 and src.shape.ndim != ndim:
                src = emit(x, Op("squeeze"), [src])
            srcs.append(src)
        return first.op, emit(ins, ins.op, _common_args(emit, ins, srcs), ins.module_inputs)

    @staticmethod
    def _diff_broadcasts(emit, ins, axes: list[int]):
        ndim, out = ins.shape.ndim, ins.shape.lens
        iaxes = [a for a in range(ndim) if a not in axes]
        idims = [out[a] for a in iaxes]
        args = []
        for x in ins.inputs:
            src = x.inputs[0]
            s = src.shape
            if s.elements() == 1:
                args.append(emit(x, Op("squeeze"), [src]) if s.ndim > 1 else src)
                continue
            shift = x.op["axis"] if x.name == "broadcast" else ndim - s.ndim
            sq = [a - shift for a in axes if 0 <= a - shift < s.ndim]
            y = emit(x, Op("squeeze", axes=sq), [src]) if sq else src
            if y.shape.ndim < len(iaxes):
                start = next((k for k, a in enumerate(iaxes) if a >= shift), len(iaxes))
                y = emit(x, Op("broadcast", axis=start, out_lens=idims), [y])
            args.append(y)
        y = emit(ins, ins.op, _common_args(emit, ins, args), ins.module_inputs)
        if len(iaxes) == 1:
            return Op("broadcast", axis=iaxes[0], out_lens=list(out)), y
        if _unsqueeze_needed(y.shape, ins.shape):
            y = emit(ins, Op("unsqueeze", axes=axes), [y])
        return Op("multibroadcast", out_lens=list(out)), y


def _unsqueeze_needed(inner, out) -> bool:
    """Does multibroadcast need the broadcast axes put back first (inner's lens are not out's
    trailing lens after 1s)?"""
    if inner.elements() == 1:
        return False
    shift = out.ndim - inner.ndim
    if shift == 0:
        return False
    if tuple(out.lens[shift:]) == tuple(inner.lens):
        return all(n == 1 for n in out.lens[:shift])
    return True


INNER_BROADCAST = InnerBroadcast()
