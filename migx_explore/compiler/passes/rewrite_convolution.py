"""rewrite_convolution (MIGraphX src/rewrite_convolution.cpp, PR #4928, develop Aug 2026).

MIGraphX turns `convolution_backwards` into stride-1 forward convolutions (a strided one into one
per output phase) so MIOpen's forward kernels run them. Here the stride-1 case: a transposed
convolution with stride 1 is the forward convolution of the same input with the weights' in/out
channels swapped (per group) and their spatial taps reversed, padded by dilation * (kernel - 1)
minus its own padding on each side. Strided ones keep their own kernel (the near-miss says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..matcher import name
from ..op import Op
from ..ops.nn import conv_params
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_with_op
from .rewrite import sweep
from .rule_helpers import all_static


class BackwardsToForward(Rule):
    name = "find_convolution_backwards"

    def pattern(self):
        return name("convolution_backwards")(all_static())

    def check(self, m, r):
        ins = r.root
        x, w = ins.inputs
        nd = x.shape.ndim - 2
        pb, pe, st, dl = conv_params(ins.op, nd)
        if any(s != 1 for s in st):
            return "strided: MIGraphX splits it into one stride-1 convolution per phase; kept whole here"
        k = w.shape.lens[2:]
        full = [d * (n - 1) for d, n in zip(dl, k)]
        if any(b > f or e > f for b, e, f in zip(pb, pe, full)):
            return "padding larger than dilation * (kernel - 1): the forward form would need negative padding"
        g = ins.op["group"]
        c, og = w.shape.lens[0], w.shape.lens[1]

        def apply():
            wt = w
            if g == 1:
                wt = m.insert_instruction(ins, Op("transpose", permutation=[1, 0, *range(2, nd + 2)]), [wt])
            else:  # [g*C/g, O/g, k] -> [g, C/g, O/g, k] -> [g, O/g, C/g, k] -> [O, C/g, k]
                wt = m.insert_instruction(ins, Op("reshape", dims=[g, c // g, og, *k]), [wt])
                wt = m.insert_instruction(ins, Op("transpose", permutation=[0, 2, 1, *range(3, nd + 3)]), [wt])
                wt = m.insert_instruction(ins, Op("contiguous"), [wt])
                wt = m.insert_instruction(ins, Op("reshape", dims=[g * og, c // g, *k]), [wt])
            wt = m.insert_instruction(ins, Op("reverse", axes=list(range(2, nd + 2))), [wt])
            pads = [f - b for f, b in zip(full, pb)] + [f - e for f, e in zip(full, pe)]
            op = Op("convolution", padding=pads, stride=[1] * nd, dilation=list(dl), group=g)
            replace_with_op(m, ins, op, [x, wt])

        return apply


@dataclass(frozen=True)
class RewriteConvolution(Pass):
    name: ClassVar[str] = "rewrite_convolution"

    def apply_module(self, module, ctx) -> bool:
        return sweep(module, [BackwardsToForward()], with_dce=False, rewriter=rewriter_of(ctx))
