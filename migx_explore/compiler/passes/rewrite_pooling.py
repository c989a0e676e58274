"""rewrite_pooling (MIGraphX src/rewrite_pooling.cpp, field rewrite_lrn).

* Pooling whose window is the whole spatial extent (stride 1, no padding, no dilation) is a
  reduction: average -> reduce_mean, max -> reduce_max over the spatial axes. (MIGraphX turns
  every non-average mode into reduce_max; lp-norm pooling is left alone here.)
* Dilated pooling becomes gathers of the window elements, laid side by side, and an undilated
  pooling with stride = window (skipped for padded average pooling and inputs over 100000
  elements, as in MIGraphX, whose gather literals grow with the input).
* With rewrite_lrn, a 4-D `lrn` becomes x / (bias + alpha * avgpool_c(x^2))^beta, the
  average pooling running over channels of the NHWC-transposed square (count_include_pad).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..matcher import name
from ..op import Op
from ..ops.nn import pool_params
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_value, replace_with_op
from .eliminate_pad import LOWEST
from .rewrite import sweep
from .rule_helpers import all_static, broadcast_scalar


class PoolingToReduce(Rule):
    name = "find_global_pooling"

    def pattern(self):
        return name("pooling")(all_static())

    def check(self, m, r):
        ins = r.root
        x = ins.inputs[0].shape
        nd = x.ndim - 2
        pb, pe, st, dl = pool_params(ins.op, nd)
        if list(ins.op["lengths"]) != list(x.lens[2:]):
            return "the window is not the whole spatial extent"
        if any(pb + pe) or any(s != 1 for s in st) or any(d != 1 for d in dl):
            return "padded, strided or dilated pooling"
        mode = ins.op["mode"]
        if mode not in ("average", "max"):
            return f"{mode} pooling has no reduce equivalent"
        op = Op("reduce_mean" if mode == "average" else "reduce_max", axes=list(range(2, 2 + nd)))
        return lambda: replace_with_op(m, ins, op, ins.inputs)


class DilatedPooling(Rule):
    name = "find_dilated_pooling"

    def pattern(self):
        return name("pooling")(all_static())

    def check(self, m, r):
        ins = r.root
        x = ins.inputs[0]
        nd = x.shape.ndim - 2
        pb, pe, st, dl = pool_params(ins.op, nd)
        k = list(ins.op["lengths"])
        if all(d == 1 for d in dl):
            return "not dilated"
        if ins.op["ceil_mode"]:
            return "ceil_mode windows are not rewritten"
        if any(pb + pe) and ins.op["mode"] != "max":
            return "padded dilated pooling is rewritten for max pooling only"
        if x.shape.elements() > 100000:
            return "input too large for gather index literals"
        dims = [n + a + b for n, a, b in zip(x.shape.lens[2:], pb, pe)]

        def apply():
            y = x
            if any(pb + pe):
                y = m.insert_instruction(ins, Op("pad", pads=[0, 0, *pb, 0, 0, *pe], value=LOWEST), [y])
            for i in range(nd):
                idx = [s + dl[i] * j for s in range(0, dims[i] - dl[i] * (k[i] - 1), st[i]) for j in range(k[i])]
                lit = m.add_literal(np.asarray(idx, np.int32))
                y = m.insert_instruction(ins, Op("gather", axis=2 + i), [y, lit])
            op = Op(
                "pooling",
                mode=ins.op["mode"],
                padding=[0] * nd,
                stride=k,
                lengths=k,
                dilations=[1] * nd,
                lp_order=ins.op["lp_order"],
            )
            replace_with_op(m, ins, op, [y])

        return apply


class LrnToPooling(Rule):
    name = "find_lrn"

    def pattern(self):
        return name("lrn")(all_static())

    def check(self, m, r):
        ins = r.root
        x = ins.inputs[0]
        size = ins.op["size"]
        if x.shape.ndim != 4 or size > x.shape.lens[1]:
            return "lrn is rewritten for 4-D inputs with size <= channels"
        lo = (size - 1) // 2
        hi = size - 1 - lo

        def apply():
            def op(o, *a):
                return m.insert_instruction(ins, o, list(a))

            sq = op(Op("mul"), x, x)
            t = op(Op("transpose", permutation=[0, 2, 3, 1]), sq)
            avg = op(
                Op(
                    "pooling",
                    mode="average",
                    lengths=[1, size],
                    stride=[1, 1],
                    padding=[0, lo, 0, hi],
                    count_include_pad=True,
                ),
                t,
            )
            back = op(Op("transpose", permutation=[0, 3, 1, 2]), avg)
            alpha = op(Op("mul"), broadcast_scalar(m, ins, ins.op["alpha"], x), back)
            den = op(Op("add"), broadcast_scalar(m, ins, ins.op["bias"], x), alpha)
            powed = op(Op("pow"), den, broadcast_scalar(m, ins, ins.op["beta"], x))
            replace_value(m, ins, op(Op("div"), x, powed))

        return apply


@dataclass(frozen=True)
class RewritePooling(Pass):
    name: ClassVar[str] = "rewrite_pooling"
    rewrite_lrn: bool = False

    def apply_module(self, module, ctx) -> bool:
        rules = [PoolingToReduce(), DilatedPooling()] + ([LrnToPooling()] if self.rewrite_lrn else [])
        return sweep(module, rules, with_dce=False, rewriter=rewriter_of(ctx))
