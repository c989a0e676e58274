"""simplify_algebra finders around convolution and dot (see simplify_algebra for the order).
find_conv_conv_1x1 (from an unmerged MIGraphX branch) lives in conv1x1_rules.
"""

from __future__ import annotations

from ...errors import ShapeError
from ...ir import Instruction
from ...matcher import Matcher, any_, args, either_arg, is_constant, name, none_of, pred, used_once
from ...op import Op, compute_shape
from ...pattern_rewriter import Rule, replace_value, replace_with_op
from ..rule_helpers import auto_reshape_op, insert_ops, move_before, slice_op, slice_ranges


def conv_const_weights(w: str = "w") -> Matcher:
    """A convolution used once whose input is not constant and whose weights are."""
    return name("convolution")(used_once(), args(none_of(is_constant()), is_constant().bind(w)))


def _spatial(s) -> range:
    return range(2, s.ndim)


def channel_only(s) -> bool:
    """Does a value of shape `s` vary along axis 1 only (every other axis broadcast or size 1)?"""
    return all(s.lens[i] == 1 or s.strides[i] == 0 for i in range(s.ndim) if i != 1)


def _channel_vector(m, before: Instruction, a: Instruction) -> Instruction:
    """The per-channel values of a channel-only value `a` (N, C, ...) as a (C,) vector."""
    src = a.inputs[0] if a.name in ("broadcast", "multibroadcast") else a
    c = a.shape.lens[1]
    if src.shape.elements() == c and channel_only(a.shape) and a.shape.strides[1] != 0:
        return insert_ops(m, before, [auto_reshape_op(src.shape.lens, (c,))], src)
    first = [i for i in range(a.shape.ndim) if i != 1]
    corner = m.insert_instruction(before, Op("slice", axes=first, starts=[0] * len(first), ends=[1] * len(first)), [a])
    return m.insert_instruction(before, Op("reshape", dims=[c]), [corner])


class ConvBroadcastInput(Rule):
    """conv(broadcast(x), w), x constant over space ->
    unpadded: broadcast(dot(x as (N, C), reduce_sum(w over space) as (C, K)));
    padded (stride 1, dilation 1): the conv of a kernel-sized broadcast, whose border rows and
    columns are kept and whose centre is broadcast over the interior (MIGraphX's small conv)."""

    name = "find_conv_broadcast_input"

    def pattern(self):
        return name("convolution")(
            args(name("broadcast", "multibroadcast")(args(any_().bind("x"))).bind("bcast"), is_constant().bind("w"))
        )

    def check(self, m, r):
        ins, b, w, x = r.root, r["bcast"], r["w"], r["x"]
        if ins.op["group"] != 1 or ins.op["padding_mode"] != 0:
            return "grouped or auto-padded convolution"
        if any(n != 1 for n in x.shape.lens[2:]):
            return "the broadcast input varies over the spatial axes"
        # MIGraphX checks only the source's lens; its spatial axes must be broadcast in b too
        if any(b.shape.lens[i] != 1 and b.shape.strides[i] != 0 for i in _spatial(b.shape)):
            return "the input varies over the spatial axes"
        n, k, c = ins.shape.lens[0], w.shape.lens[0], w.shape.lens[1]
        rows = n  # MIGraphX's case: one value per batch and channel
        if x.shape.elements() != n * c:
            # ours too: one value per channel, shared by the batch (MIGraphX leaves it)
            if x.shape.elements() != c or b.shape.strides[0] != 0:
                return "the broadcast source is not one value per batch and channel, nor per channel"
            rows = 1
        nsp = ins.shape.ndim - 2
        pad = list(ins.op["padding"])
        if not any(pad):
            return lambda: self._dot(m, ins, x, w, rows, k, c)
        if any(v != 1 for v in ins.op["stride"]) or any(v != 1 for v in ins.op["dilation"]):
            return "a padded convolution with stride or dilation"
        if len(pad) == nsp:
            pad = pad + pad
        out = ins.shape.lens
        if any(out[i + 2] <= pad[i] + pad[i + nsp] for i in range(nsp)):
            return "the padding covers the whole output"
        return lambda: self._small_conv(m, ins, b, x, w, pad, nsp)

    @staticmethod
    def _dot(m, ins, x, w, n, k, c) -> None:
        sp = list(_spatial(ins.shape))
        ws = m.insert_instruction(ins, Op("reduce_sum", axes=sp), [w])
        w2 = m.insert_instruction(ins, Op("reshape", dims=[k, c]), [ws])
        wt = m.insert_instruction(ins, Op("transpose", permutation=[1, 0]), [w2])
        if x.shape.ndim == 1 and n == 1:
            x2 = m.insert_instruction(ins, Op("unsqueeze", axes=[0]), [x])
        else:
            x2 = m.insert_instruction(ins, Op("reshape", dims=[n, c]), [x])
        d = m.insert_instruction(ins, Op("dot"), [x2, wt])
        u = m.insert_instruction(ins, Op("unsqueeze", axes=sp), [d])
        replace_with_op(m, ins, Op("multibroadcast", out_lens=ins.shape.lens), [u])

    @staticmethod
    def _small_conv(m, ins, b, x, w, pad, nsp) -> None:
        small = list(b.shape.lens[:2]) + list(w.shape.lens[2:])
        sb = m.insert_instruction(ins, b.op.with_(out_lens=small), [x])
        cur = m.insert_instruction(ins, ins.op, [sb, w])
        out = ins.shape.lens
        for i in range(nsp):
            ps, pe, axis = pad[i], pad[i + nsp], i + 2
            interior = out[axis] - ps - pe
            if interior == 1:
                continue

            def piece(start, end, src=cur, axis=axis):
                return m.insert_instruction(ins, Op("slice", axes=[axis], starts=[start], ends=[end]), [src])

            pieces = [piece(0, ps)] if ps else []
            center = piece(ps, ps + 1)
            lens = list(center.shape.lens)
            lens[axis] = interior
            pieces.append(m.insert_instruction(ins, Op("multibroadcast", out_lens=lens), [center]))
            if pe:
                pieces.append(piece(ps + 1, ps + 1 + pe))
            cur = m.insert_instruction(ins, Op("concat", axis=axis), pieces)
        replace_value(m, ins, cur)


class AddConvs(Rule):
    """conv(x1, w1) + conv(x2, w2) -> conv(concat(x1, x2), concat(w1, w2)) over input channels."""

    name = "find_add_convs"

    def pattern(self):
        return name("add")(args(conv_const_weights("wa").bind("a"), conv_const_weights("wb").bind("b")))

    def check(self, m, r):
        ins, a, b = r.root, r["a"], r["b"]
        (xa, wa), (xb, wb) = a.inputs, b.inputs
        sa, sb = wa.shape.lens, wb.shape.lens
        if len(sa) != len(sb) or sa[:1] + sa[2:] != sb[:1] + sb[2:]:
            return "the weights differ off the input-channel axis"
        if a.op["group"] != 1 or b.op["group"] != 1:
            return "grouped convolutions cannot share input channels"
        op = a.op
        if a.op != b.op:
            step = self._stride_fix(a, b)
            if isinstance(step, str):
                return step
            op, which, n = step
            nd = len(sa) - 2
            stepped = Op("step", axes=list(range(2, 2 + nd)), steps=[n] * nd)
        xs = [xa, xb]
        lens = [list(x.shape.lens) for x in xs]
        if a.op != b.op:
            lens[which] = list(compute_shape(stepped, [xs[which].shape]).lens)
        if lens[0][:1] + lens[0][2:] != lens[1][:1] + lens[1][2:] or xa.shape.type != xb.shape.type:
            return "the convolution inputs differ off the channel axis"

        def apply():
            if a.op != b.op:
                xs[which] = m.insert_instruction(ins, stepped, [xs[which]])
            x = m.insert_instruction(ins, Op("concat", axis=1), xs)
            w = m.insert_instruction(ins, Op("concat", axis=1), [wa, wb])
            replace_with_op(m, ins, op, [x, w])

        return apply

    @staticmethod
    def _stride_fix(a, b):
        """1x1 unpadded convs whose strides differ by an integer factor: step the finer one's input."""
        oa, ob = a.op, b.op
        same = ("padding", "dilation", "group", "padding_mode")
        if any(oa[k] != ob[k] for k in same) or any(oa["padding"]):
            return "the convolutions differ (beyond a stride ratio of unpadded 1x1 convs)"
        if any(n != 1 for n in a.inputs[1].shape.lens[2:]):
            return "different convolutions that are not 1x1"
        sa, sb = oa["stride"], ob["stride"]
        if len(set(sa)) != 1 or len(set(sb)) != 1:
            return "asymmetric strides"
        lo, hi = (a, b) if sa[0] < sb[0] else (b, a)
        n, rem = divmod(hi.op["stride"][0], lo.op["stride"][0])
        if rem:
            return "the strides are not multiples of each other"
        return lo.op, (1 if hi is b else 0), n


def _horiz_users(ins: Instruction) -> list[Instruction]:
    return [
        u
        for u in ins.outputs
        if u.name in ("dot", "quant_dot", "convolution")
        and len(u.inputs) == 2
        and u.inputs[0] is ins
        and u.inputs[1] is not ins
        and u.inputs[1].can_eval()
    ]


class ConvDotHorizFusion(Rule):
    """Sibling dots/quant_dots/convs of one input with constant weights -> one op on concatenated weights,
    then slices of its output."""

    name = "find_conv_dot_horiz_fusion"

    def pattern(self):
        return pred(
            "horiz_conv_dot",
            lambda i: len(_horiz_users(i)) >= 2,
            "fewer than two dot/quant_dot/convolution users with constant weights",
        )

    @staticmethod
    def _axis(u: Instruction) -> int:
        return u.inputs[1].shape.ndim - 1 if u.name in ("dot", "quant_dot") else 0

    def check(self, m, r):
        groups: list[list[Instruction]] = []
        for u in _horiz_users(r.root):
            if u.name == "convolution" and u.op["group"] != 1:
                continue
            for g in groups:
                if self._fits(g[0], u):
                    g.append(u)
                    break
            else:
                groups.append([u])
        groups = [g for g in groups if len(g) >= 2]
        if not groups:
            return "the users differ in op or weight shape"

        def apply():
            order = m.index_of()
            for g in groups:
                g.sort(key=lambda u: order[u.id])
                self._fuse(m, r.root, g)

        return apply

    def _fits(self, u: Instruction, v: Instruction) -> bool:
        if u.op != v.op:
            return False
        x, y = u.inputs[1].shape.lens, v.inputs[1].shape.lens
        ax = self._axis(u)
        return len(x) == len(y) and x[:ax] + x[ax + 1 :] == y[:ax] + y[ax + 1 :]

    def _fuse(self, m, x: Instruction, group: list[Instruction]) -> None:
        first = group[0]
        weights = [u.inputs[1] for u in group]
        move_before(m, weights, first)
        w = m.insert_instruction(first, Op("concat", axis=self._axis(first)), weights)
        fused = m.insert_instruction(first, first.op, [x, w])
        out_axis = fused.shape.ndim - 1 if first.name in ("dot", "quant_dot") else 1
        off = 0
        for u in group:
            n = u.shape.lens[out_axis]
            replace_with_op(m, u, Op("slice", axes=[out_axis], starts=[off], ends=[off + n]), [fused])
            off += n


class MulConv(Rule):
    """conv(x, w) * a, a per output channel -> conv(x, w * a)."""

    name = "find_mul_conv"

    def pattern(self):
        return name("mul")(
            either_arg(0, 1)(conv_const_weights().bind("conv"), name("broadcast", "multibroadcast").bind("a"))
        )

    def check(self, m, r):
        conv, a, w = r["conv"], r["a"], r["w"]
        src = a.inputs[0]
        # As MIGraphX: the broadcast source is one vector (a literal already broadcast to more
        # axes, e.g. {256, 14, 14} with strides {1, 0, 0}, is skipped), laid along the channels
        # with stride 1, and batch and spatial axes are broadcast.
        if sum(n != 1 for n in src.shape.lens) > 1:
            return "the broadcast source has more than one axis longer than 1"
        s = a.shape
        if s.ndim < 2 or s.strides[1] != 1:
            return "the multiplier is not laid along the channel axis"
        if not channel_only(s):
            return "the multiplier varies along more than the channel axis"

        def apply():
            vec = src if src.shape.ndim == 1 else m.insert_instruction(r.root, Op("squeeze"), [src])
            wa = m.insert_instruction(r.root, Op("broadcast", axis=0, out_lens=w.shape.lens), [vec])
            nw = m.insert_instruction(r.root, Op("mul"), [wa, w])
            replace_with_op(m, r.root, conv.op, [conv.inputs[0], nw])

        return apply


class MulSliceConv(Rule):
    """slice(conv(x, w)) * a, a per channel of the slice -> the slice of conv(x, w') where w' scales
    that slice's output channels of w by a (the other slices of the conv read the new conv too)."""

    name = "find_mul_slice_conv"

    def pattern(self):
        conv = name("convolution")(
            pred(
                "slices_only",
                lambda i: bool(i.outputs) and all(u.name == "slice" for u in i.outputs),
                "the convolution has a user that is not a slice",
            ),
            args(any_(), is_constant().bind("w")),
        )
        return name("mul")(
            either_arg(0, 1)(
                name("slice")(used_once(), args(conv.bind("conv"))).bind("slice"),
                name("broadcast")(is_constant()).bind("a"),
            )
        )

    def check(self, m, r):
        ins, sl, conv, a, w = r.root, r["slice"], r["conv"], r["a"], r["w"]
        if a.op["axis"] != 1 or a.inputs[0].shape.ndim != 1:
            return "the multiplier is not a vector broadcast along the channels"
        if list(sl.op["axes"]) != [1]:
            return "the slice is not along the channels alone"
        start, end = slice_ranges(sl)[1]
        order = m.index_of()
        others = [u for u in conv.outputs if u is not sl]
        for u in others:
            if order[u.id] < order[sl.id]:
                return "another slice of the convolution comes before this one"
            if list(u.op["axes"]) != [1]:
                return "another slice of the convolution is along other axes"
            b, e = slice_ranges(u)[1]
            if max(b, start) < min(e, end):
                return "another slice of the convolution overlaps this one"
        k = w.shape.lens[0]

        def apply():
            pos = min([ins, *others], key=lambda i: order[i.id])
            move_before(m, [a.inputs[0]], pos)
            part = m.insert_instruction(pos, Op("slice", axes=[0], starts=[start], ends=[end]), [w])
            scale = m.insert_instruction(pos, Op("broadcast", axis=0, out_lens=list(part.shape.lens)), [a.inputs[0]])
            pieces = [m.insert_instruction(pos, Op("mul"), [scale, part])]
            if start:
                pieces.insert(0, m.insert_instruction(pos, Op("slice", axes=[0], starts=[0], ends=[start]), [w]))
            if end != k:
                pieces.append(m.insert_instruction(pos, Op("slice", axes=[0], starts=[end], ends=[k]), [w]))
            nw = m.insert_instruction(pos, Op("concat", axis=0), pieces)
            new_conv = m.insert_instruction(pos, conv.op, [conv.inputs[0], nw])
            replace_with_op(m, ins, sl.op, [new_conv])
            for u in others:
                m.replace_instruction(u, None, [new_conv])

        return apply


class MulDot(Rule):
    """dot(a, b) * c, c scaling columns (b constant) or rows (a constant) -> dot with c folded in."""

    name = "find_mul_dot"

    def pattern(self):
        dot = name("dot")(
            used_once(),
            pred("const_operand", lambda i: any(x.can_eval() for x in i.inputs), "neither dot operand is constant"),
        )
        return name("mul")(either_arg(0, 1)(dot.bind("dot"), name("broadcast", "multibroadcast").bind("c")))

    def check(self, m, r):
        d, c = r["dot"], r["c"]
        a, b = d.inputs
        s = c.shape
        varying = [i for i in range(s.ndim) if s.lens[i] != 1 and s.strides[i] != 0]
        if not varying:
            k = 0 if a.can_eval() else 1
        elif varying == [s.ndim - 1]:
            k = 1
        elif varying == [s.ndim - 2]:
            k = 0
        else:
            return "the multiplier varies along more than one axis (or a batch axis)"
        target = d.inputs[k]
        if not target.can_eval():
            return f"the {'columns' if k else 'rows'} are scaled but dot input {k} is not constant"
        op = c.op.with_(out_lens=target.shape.lens)
        try:
            compute_shape(op, [c.inputs[0].shape])
        except ShapeError as e:
            return f"cannot rebroadcast the multiplier: {e}"

        def apply():
            cb = m.insert_instruction(r.root, op, [c.inputs[0]])
            scaled = m.insert_instruction(r.root, Op("mul"), [target, cb])
            ins = [a, b]
            ins[k] = scaled
            replace_with_op(m, r.root, d.op, ins)

        return apply


class DotMul(Rule):
    """dot(z * d, c) / dot(c, z * d), d a constant broadcast along the reduction axis (or a scalar),
    c constant -> dot(z, c * d') / dot(c * d', z): the scale moves onto the constant operand, where
    constant folding absorbs it."""

    name = "find_dot_mul"

    def pattern(self):
        mul = name("mul")(
            used_once(),
            either_arg(0, 1)(
                name("broadcast", "multibroadcast")(is_constant()).bind("d"), none_of(is_constant()).bind("z")
            ),
        )
        return name("dot")(either_arg(0, 1)(mul.bind("mul"), is_constant().bind("c")))

    def check(self, m, r):
        ins, d, c, z = r.root, r["d"], r["c"], r["z"]
        a, b = ins.inputs
        strides = d.shape.strides
        if sum(st != 0 for st in strides) > 1:
            return "the scale varies along more than one axis"
        if not d.shape.scalar_shape():
            if strides[-1] == 1 and not b.can_eval():
                return "the scale varies along the output columns of the second operand"
            if strides[-2] == 1 and not a.can_eval():
                return "the scale varies along the output rows of the first operand"
        perm = list(range(c.shape.ndim))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        swapped = [c.shape.lens[k] for k in perm]
        op = d.op.with_(out_lens=swapped)
        try:  # MIGraphX's rebroadcast of d to c's lens (last two swapped) must be a valid shape
            compute_shape(op, [x.shape for x in d.inputs])
        except ShapeError as e:
            return f"the scale cannot be broadcast to the constant operand ({e})"

        def apply():
            db = m.insert_instruction(ins, op, list(d.inputs))
            dt = m.insert_instruction(ins, Op("transpose", permutation=perm), [db])
            cd = m.insert_instruction(ins, Op("mul"), [c, dt])
            replace_with_op(m, ins, Op("dot"), [z, cd] if c is b else [cd, z])

        return apply


class DotSlice(Rule):
    """slice(dot(a, b)) -> dot(slice(a), slice(b)): compute only the rows/columns that are kept."""

    name = "find_dot_slice"

    def pattern(self):
        return name("slice")(args(name("dot")(used_once()).bind("dot")))

    def check(self, m, r):
        d = r["dot"]
        if d.shape.dyn_dims is not None:
            return "dynamic shape"
        nb = d.shape.ndim - 2
        ranges = slice_ranges(r.root)
        ra = {ax: v for ax, v in ranges.items() if ax <= nb}  # batch axes and the rows
        rb = {ax: v for ax, v in ranges.items() if ax < nb or ax == nb + 1}  # batch axes and the columns

        def apply():
            a, b = d.inputs
            a = m.insert_instruction(r.root, slice_op(ra), [a]) if ra else a
            b = m.insert_instruction(r.root, slice_op(rb), [b]) if rb else b
            replace_with_op(m, r.root, d.op, [a, b])

        return apply


class ConvAdd(Rule):
    """conv(x + a, w), a and w constant -> conv(a, w) + conv(x, w) (convolution is linear, and zero
    padding of a sum is the sum of zero paddings)."""

    name = "find_conv_add"

    def pattern(self):
        add = name("add")(either_arg(0, 1)(any_().bind("x"), is_constant().bind("a")), used_once())
        return name("convolution")(used_once(), args(add, is_constant().bind("w")))

    def check(self, m, r):
        ins = r.root

        def apply():
            c1 = m.insert_instruction(ins, ins.op, [r["a"], r["w"]])
            c2 = m.insert_instruction(ins, ins.op, [r["x"], r["w"]])
            replace_with_op(m, ins, Op("add"), [c1, c2])

        return apply


class ConcatConv(Rule):
    """concat(conv(x1, w1), conv(x2, w2)) on channels, same ops -> one grouped conv."""

    name = "find_concat_conv"

    def pattern(self):
        return name("concat")(
            pred(
                "all_convs",
                lambda i: bool(i.inputs) and all(x.name == "convolution" and len(x.outputs) == 1 for x in i.inputs),
                "not every input is a conv used once",
            )
        )

    def check(self, m, r):
        ins = r.root
        convs = ins.inputs
        if ins.op["axis"] not in (1, 1 - ins.shape.ndim):
            return "not a concat over channels"
        c0 = convs[0]
        if any(c.op != c0.op for c in convs):
            return "the convolutions differ"
        if any(c.inputs[0].shape != c0.inputs[0].shape or c.inputs[1].shape != c0.inputs[1].shape for c in convs):
            return "the convolution inputs or weights differ in shape"
        op = c0.op.with_(group=c0.op["group"] * len(convs))

        def apply():
            x = m.insert_instruction(ins, Op("concat", axis=1), [c.inputs[0] for c in convs])
            w = m.insert_instruction(ins, Op("concat", axis=0), [c.inputs[1] for c in convs])
            replace_with_op(m, ins, op, [x, w])

        return apply


CONV_BROADCAST_INPUT = ConvBroadcastInput()
ADD_CONVS = AddConvs()
CONV_DOT_HORIZ_FUSION = ConvDotHorizFusion()
MUL_CONV = MulConv()
MUL_SLICE_CONV = MulSliceConv()
MUL_DOT = MulDot()
DOT_SLICE = DotSlice()
DOT_MUL = DotMul()
CONV_ADD = ConvAdd()
CONCAT_CONV = ConcatConv()
