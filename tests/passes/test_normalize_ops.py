"""normalize_ops: negative axes and slice bounds become canonical."""

from __future__ import annotations

from migx_explore.compiler.passes.normalize_ops import NormalizeOps
from migx_explore.compiler.testing import check_pass


def test_normalizes_axes_and_slices():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3, 4}
        a = reduce_sum[axes={-1, 0}](x) -> float_type, {1, 3, 1}
        b = softmax[axis=-2](x) -> float_type, {2, 3, 4}
        c = slice[axes={-1},starts={-3},ends={100}](b) -> float_type, {2, 3, 3}, {12, 4, 1}
        d = concat[axis=-1](c,c) -> float_type, {2, 3, 6}
        r = @return(a,d)
    """,
        [NormalizeOps()],
        """
        x = @param:x -> float_type, {2, 3, 4}
        a = reduce_sum[axes={0, 2}](x) -> float_type, {1, 3, 1}
        b = softmax[axis=1](x) -> float_type, {2, 3, 4}
        c = slice[axes={2},starts={1},ends={4}](b) -> float_type, {2, 3, 3}, {12, 4, 1}
        d = concat[axis=2](c,c) -> float_type, {2, 3, 6}
        r = @return(a,d)
    """,
    )


def test_already_normal_is_unchanged():
    text = """
        x = @param:x -> float_type, {2, 3}
        a = softmax[axis=1](x) -> float_type, {2, 3}
        r = @return(a)
    """
    check_pass(text, [NormalizeOps()], text)
