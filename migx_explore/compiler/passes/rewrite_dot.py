"""rewrite_dot (MIGraphX src/rewrite_dot.cpp; opt-in on the GPU target): find_1x1_convolution turns a
1x1, group-1, stride-1, unpadded, undilated convolution with constant weights into a dot.

Standard (NCHW) output: dot(broadcast(W as K x C), x as N x C x HW), reshaped back.
Channels-last output (the conv follows an NHWC layout): dot(x as N..HW x C, W^T), transposed back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Instruction
from ..matcher import arg, is_constant, name
from ..op import Op
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_with_op
from .rewrite import sweep
from .rule_helpers import all_static


def is_conv_1x1(ins: Instruction) -> str | None:
    """None for a plain 1x1 convolution, else why not."""
    op, w = ins.op, ins.inputs[1].shape
    if any(n != 1 for n in w.lens[2:]):
        return "the kernel is not 1x1"
    if op["group"] != 1:
        return "grouped convolution"
    if any(s != 1 for s in op["stride"]) or any(d != 1 for d in op["dilation"]) or any(op["padding"]):
        return "strided, dilated or padded convolution"
    return None


class Conv1x1ToDot(Rule):
    name = "find_1x1_convolution"

    def pattern(self):
        return name("convolution")(all_static(), arg(1)(is_constant()))

    def check(self, m, r):
        ins = r.root
        reason = is_conv_1x1(ins)
        if reason:
            return reason
        x, w = ins.inputs
        nd = ins.shape.ndim
        n, k, c = ins.shape.lens[0], w.shape.lens[0], w.shape.lens[1]

        def op(o, *a):
            return m.insert_instruction(ins, o, list(a))

        def apply():
            wk = op(Op("squeeze", axes=list(range(2, nd))), w)
            if ins.shape.transposed():
                perm = [0, *range(2, nd), 1]
                a = op(Op("transpose", permutation=perm), x)
                b = op(
                    Op("multibroadcast", out_lens=[*a.shape.lens[:-2], c, k]),
                    op(Op("transpose", permutation=[1, 0]), wk),
                )
                inv = [perm.index(i) for i in range(nd)]
                replace_with_op(m, ins, Op("transpose", permutation=inv), [op(Op("dot"), a, b)])
            else:
                hw = x.shape.elements() // (n * c)
                a = op(Op("multibroadcast", out_lens=[n, k, c]), wk)
                b = op(Op("reshape", dims=[n, c, hw]), x)
                replace_with_op(m, ins, Op("reshape", dims=ins.shape.lens), [op(Op("dot"), a, b)])

        return apply


@dataclass(frozen=True)
class RewriteDot(Pass):
    name: ClassVar[str] = "rewrite_dot"

    def apply_module(self, module, ctx) -> bool:
        return sweep(module, [Conv1x1ToDot()], with_dce=False, rewriter=rewriter_of(ctx))
