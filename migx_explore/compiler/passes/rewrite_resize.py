"""rewrite_resize (MIGraphX src/rewrite_resize.cpp, field affine_only): a static nearest or linear
`resize` becomes gathers.

Resize is separable, so each resized axis is its own (out x in) interpolation matrix R. We get R
from the resize op itself (resizing an identity matrix along that axis with the same attributes),
so every coordinate transformation and rounding mode is handled exactly as the op computes it.
Each row of R has one non-zero (nearest) or at most two (linear): the axis becomes
gather(x, lo) (nearest) or gather(x, lo) * w_lo + gather(x, hi) * w_hi (linear).
MIGraphX instead flattens the input and gathers all 2^axes neighbours at once; the values are the
same, our literals are per axis and much smaller.

affine_only (the GPU setting) keeps MIGraphX's is_affine_resize: every in/out length pair must
divide one another, and linear resize only downsamples. All-1 scales make the resize vanish.
Cubic resize, non-zero extrapolation values and linear resize of integers are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import dtypes
from ..matcher import name
from ..op import Op
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_value
from ..shape import Shape
from .rewrite import sweep
from .rule_helpers import all_static


def axis_matrix(op: Op, n_in: int, n_out: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
    """The (n_out, n_in) matrix one axis of `op` applies (float64)."""
    one = op.with_(sizes=[n_out, n_in], scales=[scale, 1.0], roi=[roi[0], 0.0, roi[1], 1.0] if op["roi"] else [])
    eye = np.eye(n_in, dtype=np.float64)
    return np.asarray(one.spec.compute(one, [eye], Shape.of("float64", (n_out, n_in)), None), np.float64)


def _affine(op: Op, in_lens, out_lens) -> bool:
    if any(max(a, b) % max(min(a, b), 1) for a, b in zip(in_lens, out_lens)):
        return False
    return op["mode"] == "nearest" or all(a >= b for a, b in zip(in_lens, out_lens))


class ResizeToGather(Rule):
    name = "find_resize"

    def __init__(self, affine_only: bool):
        self.affine_only = affine_only

    def pattern(self):
        return name("resize")(all_static())

    def check(self, m, r):
        ins = r.root
        x = ins.inputs[0]
        op = ins.op
        in_lens, out_lens = x.shape.lens, ins.shape.lens
        if op["mode"] not in ("nearest", "linear"):
            return f"{op['mode']} resize is not rewritten"
        if self.affine_only and not _affine(op, in_lens, out_lens):
            return "not an affine resize (affine_only)"
        if op["mode"] == "linear" and not dtypes.dtype(x.shape.type).is_float:
            return "linear resize of an integer type rounds; kept as resize"
        if op["extrapolation_value"] != 0.0 and op["coordinate_transformation_mode"] == "tf_crop_and_resize":
            return "non-zero extrapolation value"
        nd = len(in_lens)
        scales = list(op["scales"]) or [o / i for o, i in zip(out_lens, in_lens)]
        roi = list(op["roi"]) or [0.0] * nd + [1.0] * nd
        axes = [
            a
            for a in range(nd)
            if not (np.isclose(scales[a], 1.0) and in_lens[a] == out_lens[a] and (roi[a], roi[a + nd]) == (0.0, 1.0))
        ]
        mats = {a: axis_matrix(op, in_lens[a], out_lens[a], scales[a], (roi[a], roi[a + nd])) for a in axes}
        taps = 1 if op["mode"] == "nearest" else 2
        if any(np.count_nonzero(mat, axis=1).max(initial=0) > taps for mat in mats.values()):
            return f"an output depends on more than {taps} inputs (antialias?)"
        if any((np.abs(mat).sum(axis=1) == 0).any() for mat in mats.values()):
            return "an output lies outside the input (extrapolated)"
        return lambda: self._rewrite(m, ins, x, mats, taps)

    @staticmethod
    def _rewrite(m, ins, x, mats, taps) -> None:
        # A half / bf16 linear resize interpolates in float32 and rounds once at the end, as the
        # resize op computes: rounding each weighted term to half would change the values.
        low = taps > 1 and x.shape.type in ("float16", "bfloat16")
        y = m.insert_instruction(ins, Op("convert", target_type="float32"), [x]) if low else x
        npt = dtypes.np_dtype(y.shape.type)
        for a, mat in mats.items():
            order = np.argsort(-np.abs(mat), axis=1, kind="stable")[:, :taps]
            idx = np.sort(order, axis=1)
            parts = []
            for t in range(taps):
                lit = m.add_literal(idx[:, t].astype(np.int32))
                g = m.insert_instruction(ins, Op("gather", axis=a), [y, lit])
                if taps > 1:
                    w = m.add_literal(np.take_along_axis(mat, idx[:, t : t + 1], axis=1)[:, 0].astype(npt))
                    wb = m.insert_instruction(ins, Op("broadcast", axis=a, out_lens=g.shape.lens), [w])
                    g = m.insert_instruction(ins, Op("mul"), [g, wb])
                parts.append(g)
            y = parts[0]
            for p in parts[1:]:
                y = m.insert_instruction(ins, Op("add"), [y, p])
        if low:
            y = m.insert_instruction(ins, Op("convert", target_type=x.shape.type), [y])
        replace_value(m, ins, y)


@dataclass(frozen=True)
class RewriteResize(Pass):
    name: ClassVar[str] = "rewrite_resize"
    affine_only: bool = False

    def apply_module(self, module, ctx) -> bool:
        return sweep(module, [ResizeToGather(self.affine_only)], with_dce=False, rewriter=rewriter_of(ctx))
