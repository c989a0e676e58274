"""simplify_reshapes finders on concat and slice: a slice of a concat, a concat of transposes,
multibroadcasts or concats, nested slices, and runs of adjacent slices concatenated back."""

from __future__ import annotations

from ...matcher import any_arg, arg, name, pred, used_once
from ...op import Op
from ...ops.common import norm_axis
from ...pattern_rewriter import Rule, replace_value, replace_with_op
from ..rule_helpers import all_static, slice_op, slice_ranges
from .shape_chains import BROADCASTS


def _concat_axis(ins) -> int:
    return norm_axis(ins.op["axis"], ins.shape.ndim, "concat")


class ConcatSlice(Rule):
    """slice(concat(a, b, c)) on the concat axis covering exactly one input -> that input."""

    name = "find_concat_slice"

    def pattern(self):
        return name("concat")(
            all_static(), pred("slice_user", lambda i: any(u.name == "slice" for u in i.outputs), "no user is a slice")
        )

    def check(self, m, r):
        concat = r.root
        axis = _concat_axis(concat)
        starts, off = {}, 0
        for x in concat.inputs:
            starts[off] = x
            off += x.shape.lens[axis]
        hits = []
        for s in concat.outputs:
            if s.name != "slice" or len(s.op["axes"]) != 1:
                continue
            ranges = slice_ranges(s)
            if list(ranges) != [axis]:
                continue
            start, end = ranges[axis]
            x = starts.get(start)
            if x is not None and x.shape.lens[axis] == end - start:
                hits.append((s, x))
        if not hits:
            return "no slice on the concat axis covers exactly one input"

        def apply():
            for s, x in hits:
                replace_value(m, s, x)

        return apply


class ConcatTranspose(Rule):
    """concat(transpose_p(a), transpose_p(b)) -> transpose_p(concat(a, b)) on the permuted axis."""

    name = "find_concat_transpose"

    def pattern(self):
        return name("concat")(
            all_static(),
            pred(
                "all_transposes",
                lambda i: all(x.name == "transpose" for x in i.inputs),
                "not every input is a transpose",
            ),
        )

    def check(self, m, r):
        ins = r.root
        perm = ins.inputs[0].op
        if any(x.op != perm for x in ins.inputs):
            return "the transposes use different permutations"
        new_axis = perm["permutation"][_concat_axis(ins)]

        def apply():
            cat = m.insert_instruction(ins, Op("concat", axis=new_axis), [x.inputs[0] for x in ins.inputs])
            replace_with_op(m, ins, perm, [cat])

        return apply


class ConcatMultibroadcasts(Rule):
    """concat(broadcast(a), broadcast(b)) along a real axis -> broadcast(concat(a, b))."""

    name = "find_concat_multibroadcasts"

    def pattern(self):
        return name("concat")(
            all_static(),
            pred(
                "all_broadcasts",
                lambda i: all(x.name in BROADCASTS for x in i.inputs),
                "not every input is a broadcast",
            ),
        )

    def check(self, m, r):
        ins = r.root
        axis = _concat_axis(ins)
        bc = ins.inputs
        first = bc[0]
        if any(x.shape.strides[axis] == 0 for x in bc):
            return "an input is broadcast along the concat axis"
        if any(x.name != first.name or (x.name == "broadcast" and x.op["axis"] != first.op["axis"]) for x in bc):
            return "the inputs are broadcast differently"
        srcs = [x.inputs[0] for x in bc]
        nd = srcs[0].shape.ndim
        if any(s.shape.ndim != nd for s in srcs):
            return "the broadcast sources differ in rank"
        in_axis = axis - (first.op["axis"] if first.name == "broadcast" else ins.shape.ndim - nd)
        if not 0 <= in_axis < nd:
            return "the concat axis is not an axis of the broadcast sources"
        lens0 = srcs[0].shape.lens
        if any(
            s.shape.lens[:in_axis] + s.shape.lens[in_axis + 1 :] != lens0[:in_axis] + lens0[in_axis + 1 :] for s in srcs
        ):
            return "the broadcast sources differ off the concat axis"

        def apply():
            cat = m.insert_instruction(ins, Op("concat", axis=in_axis), srcs)
            replace_with_op(m, ins, first.op.with_(out_lens=ins.shape.lens), [cat])

        return apply


class NestedSlice(Rule):
    """slice(slice(x)) -> one slice of x (ranges on a shared axis compose)."""

    name = "find_nested_slice"

    def pattern(self):
        return name("slice")(all_static(), arg(0)(name("slice")))

    def check(self, m, r):
        inner = r.root.inputs[0]
        outer_r, inner_r = slice_ranges(r.root), slice_ranges(inner)
        merged = dict(inner_r)
        for a, (s, e) in outer_r.items():
            base = inner_r.get(a, (0, 0))[0]
            merged[a] = (base + s, base + e)
        return lambda: replace_with_op(m, r.root, slice_op(merged), [inner.inputs[0]])


class NestedConcat(Rule):
    """concat(concat(a, b), c) on one axis, inner used once -> concat(a, b, c)."""

    name = "find_nested_concat"

    def pattern(self):
        return name("concat")(any_arg()(name("concat")(used_once())))

    def check(self, m, r):
        ins = r.root
        axis = _concat_axis(ins)

        def flat(xs):
            for x in xs:
                if x.name == "concat" and len(x.outputs) == 1 and _concat_axis(x) == axis:
                    yield from flat(x.inputs)
                else:
                    yield x

        args = list(flat(ins.inputs))
        if len(args) == len(ins.inputs):
            return "no nested concat on the same axis"
        return lambda: replace_with_op(m, ins, Op("concat", axis=axis), args)


class ConcatOfSlices(Rule):
    """concat(slice[a:b](x), slice[b:c](x)) -> slice[a:c](x) (x itself when it covers everything)."""

    name = "find_concat_of_slices"

    def pattern(self):
        return name("concat")(all_static(), any_arg()(name("slice")))

    def check(self, m, r):
        ins = r.root
        axis = _concat_axis(ins)
        groups: list[list] = []
        for x in ins.inputs:
            rng = slice_ranges(x) if x.name == "slice" else None
            if rng is not None and axis not in rng:
                rng = None
            if groups and rng is not None and groups[-1][0] is not None and _adjacent(groups[-1], x, rng, axis):
                groups[-1][1] = rng[axis][1]
                groups[-1][3] += 1
            else:
                groups.append([rng, rng[axis][1] if rng else None, x, 1])
        if all(g[3] == 1 for g in groups):
            return "no adjacent slices of one value along the concat axis"

        def merged(g):
            rng, end, x, n = g
            if n == 1:
                return x
            src = x.inputs[0]
            new = dict(rng)
            new[axis] = (rng[axis][0], end)
            new = {a: v for a, v in new.items() if v != (0, src.shape.lens[a])}
            return m.insert_instruction(ins, slice_op(new), [src]) if new else src

        def apply():
            args = [merged(g) for g in groups]
            if len(args) == 1:
                replace_value(m, ins, args[0])
            else:
                replace_with_op(m, ins, ins.op, args)

        return apply


def _adjacent(group, x, rng, axis) -> bool:
    prev_rng, end, prev, _ = group
    if x.inputs[0] is not prev.inputs[0] or rng[axis][0] != end:
        return False
    return {a: v for a, v in rng.items() if a != axis} == {a: v for a, v in prev_rng.items() if a != axis}
