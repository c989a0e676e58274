"""simplify_algebra finders that move shape ops (broadcasts, reshapes) across a dot or a split."""

from __future__ import annotations

from ..matcher import name, pred
from ..op import Op
from ..rewrite import Rule, replace_with_op
from ._rewrite_util import all_static

BCASTS = ("broadcast", "multibroadcast")


class DotBroadcast(Rule):
    """dot(broadcast(a), broadcast(b)) whose leading batch axes are broadcast in both inputs ->
    multibroadcast(dot(a', b')): the product is computed once, without those batch axes."""

    name = "find_dot_broadcast"

    def pattern(self):
        return name("dot")(all_static(), pred("broadcast_inputs", lambda i: len(i.inputs) == 2 and all(
            x.name in BCASTS for x in i.inputs), "an input is not a broadcast"))

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
