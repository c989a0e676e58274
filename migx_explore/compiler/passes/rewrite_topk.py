"""rewrite_topk (MIGraphX src/rewrite_topk.cpp, field split_threshold): find_large_topk splits a topk
over a long axis (n >= split_threshold) into a topk per group of the axis and a final topk over
the group winners.

MIGraphX feeds the original indices into the second topk through topk's optional indices input.
Our topk takes only values, so the stage-1 indices are made global (+ group * group size) and
the final indices gather them (gathernd with one batch dim, the topk axis moved last). Ties keep
the lowest original index, as in one big topk: stage 1 keeps ties in index order within a group,
and the winners are laid out group by group.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..matcher import name, pred
from ..op import Op
from ..ops.common import norm_axis
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_value, replace_with_op
from .rewrite import sweep
from .rule_helpers import static


def split_dim(r: int, min_size: int) -> tuple[int, int]:
    """MIGraphX's split_dim: (groups, remaining size), dividing by 2, 3, 5, 7, 11 while > min_size."""
    n = 1
    while r > min_size:
        d = next((f for f in (2, 3, 5, 7, 11) if r % f == 0), None)
        if d is None:
            break
        r //= d
        n *= d
    return n, r


class LargeTopk(Rule):
    name = "find_large_topk"

    def __init__(self, threshold: int, keep_whole: Callable[[int, int, str], bool] | None = None):
        self.threshold = threshold
        self.keep_whole = keep_whole

    def pattern(self):
        return name("topk")(pred("static_input", lambda i: static(i.inputs[0]), "dynamic input"))

    def check(self, m, r):
        ins = r.root
        x = ins.inputs[0]
        axis = norm_axis(ins.op["axis"], x.shape.ndim, "topk")
        k, n = ins.op["k"], x.shape.lens[axis]
        if n < self.threshold:
            return f"axis length {n} is below split_threshold {self.threshold}"
        if self.keep_whole is not None and self.keep_whole(n, k, x.shape.type):
            return f"the target takes k={k} of {n} in one launch (keep_whole)"
        groups, per = split_dim(n, max(self.threshold // 2, k * 4))
        if groups < 2 or per < k:
            return f"axis length {n} does not split into groups of at least k={k}"
        if not ins.outputs or any(u.name != "get_tuple_elem" for u in ins.outputs):
            return "the topk result is used other than through get_tuple_elem"
        return lambda: self._split(m, ins, x, axis, k, groups, per)

    @staticmethod
    def _split(m, ins, x, axis, k, groups, per) -> None:
        def op(o, *a):
            return m.insert_instruction(ins, o, list(a))

        dims = list(x.shape.lens)
        gdims = dims[:axis] + [groups, per] + dims[axis + 1 :]
        fdims = dims[:axis] + [groups * k] + dims[axis + 1 :]
        t1 = op(ins.op.with_(axis=axis + 1), op(Op("reshape", dims=gdims), x))
        v1 = op(Op("reshape", dims=fdims), op(Op("get_tuple_elem", index=0), t1))
        i1 = op(Op("get_tuple_elem", index=1), t1)
        base = m.add_literal(np.arange(groups, dtype=np.int64) * per)
        i1 = op(Op("add"), i1, op(Op("broadcast", axis=axis, out_lens=i1.shape.lens), base))
        gidx = op(Op("reshape", dims=fdims), i1)
        t2 = op(ins.op.with_(axis=axis), v1)
        i2 = op(Op("get_tuple_elem", index=1), t2)
        idx = _take_along_axis(op, gidx, i2, axis)
        # Rewire the users of the old tuple to the new values and indices.
        for u in list(ins.outputs):
            if u.op["index"] == 0:
                replace_with_op(m, u, Op("get_tuple_elem", index=0), [t2])
            else:
                replace_value(m, u, idx)


def _take_along_axis(op, data, idx, axis: int):
    """numpy.take_along_axis(data, idx, axis) via gathernd(batch_dims=1) on the axis moved last."""
    nd = data.shape.ndim
    perm = [i for i in range(nd) if i != axis] + [axis]
    inv = [perm.index(i) for i in range(nd)]
    d = op(Op("transpose", permutation=perm), data)
    i = op(Op("transpose", permutation=perm), idx)
    batch = math.prod(d.shape.lens[:-1])
    d2 = op(Op("reshape", dims=[batch, d.shape.lens[-1]]), d)
    i3 = op(Op("reshape", dims=[batch, i.shape.lens[-1], 1]), i)
    g = op(Op("gathernd", batch_dims=1), d2, i3)
    back = op(Op("reshape", dims=i.shape.lens), g)
    return op(Op("transpose", permutation=inv), back)


@dataclass(frozen=True)
class RewriteTopk(Pass):
    name: ClassVar[str] = "rewrite_topk"
    split_threshold: int = 8192
    # (n, k, type) -> True where the target's kernel takes the whole axis in one launch anyway (the GPU
    # pipeline's radix top-k spread over several blocks); None: split_threshold alone decides.
    keep_whole: Callable[[int, int, str], bool] | None = None

    def apply_module(self, module, ctx) -> bool:
        rule = LargeTopk(self.split_threshold, self.keep_whole)
        return sweep(module, [rule], with_dce=False, rewriter=rewriter_of(ctx))
