"""find_slice_shape_transforms (MIGraphX src/simplify_reshapes.cpp), the case exporters emit for
fused QKV projections and head splits:

    reshape(contiguous(slice(x, axis a, [s, e))))  ->  slice(reshape(x), axis a, [s/k, e/k))

when the reshape only splits the sliced axis (into f1 x k) and both slice bounds are multiples
of k. The result is a view of x, so the copy the importer put in front of the reshape (reshape
needs standard input) disappears, and kernels read the head straight out of the projection.
"""

from __future__ import annotations

import math

from ...matcher import arg, name, skip
from ...op import Op
from ...pattern_rewriter import Rule, replace_with_op
from ..rule_helpers import all_static, slice_ranges


class SliceShapeTransforms(Rule):
    """reshape(slice(x)) splitting only the sliced axis -> slice(reshape(x)), a view of x."""

    name = "find_slice_shape_transforms"

    def pattern(self):
        return name("reshape")(all_static(), arg(0)(skip("contiguous")(name("slice").bind("slice"))))

    def check(self, m, r):
        sl, out = r["slice"], r.root
        x = sl.inputs[0]
        if not x.shape.standard():
            return "the sliced value is not standard (reshaping it would need a copy)"
        ranges = slice_ranges(sl)
        if len(ranges) != 1:
            return f"the slice cuts {len(ranges)} axes"
        ((a, (s, e)),) = ranges.items()
        lens, dims = list(sl.shape.lens), list(out.shape.lens)
        tail = len(lens) - a - 1
        split = dims[a : len(dims) - tail] if tail else dims[a:]
        if dims[:a] != lens[:a] or (tail and dims[len(dims) - tail :] != lens[a + 1 :]) or len(split) < 2:
            return "the reshape does more than split the sliced axis"
        inner = math.prod(split[1:])
        if s % inner or e % inner or x.shape.lens[a] % inner:
            return f"the slice bounds {s}:{e} are not multiples of the inner factor {inner}"
        new_dims = list(x.shape.lens[:a]) + [x.shape.lens[a] // inner] + split[1:] + list(x.shape.lens[a + 1 :])

        def apply():
            y = m.insert_instruction(out, Op("reshape", dims=new_dims), [x])
            replace_with_op(m, out, Op("slice", axes=[a], starts=[s // inner], ends=[e // inner]), [y])

        return apply
