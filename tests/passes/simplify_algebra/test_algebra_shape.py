"""simplify_algebra finders that move shape ops: find_dot_broadcast, find_split_reshape,
find_split_transpose, and find_splits over pointwise modules / dependent groups. IR-text cases
checked numerically against the program before (check_pass)."""

from __future__ import annotations

from algebra_helpers import only

from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes import simplify_algebra as sa
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import check_pass, run_on_text


def test_dot_broadcast_drops_batch_axes_broadcast_in_both_inputs():
    check_pass(
        """
        x = @param:x -> float_type, {1, 3, 4}
        y = @param:y -> float_type, {4, 5}
        a = multibroadcast[out_lens={2, 3, 4}](x) -> float_type, {2, 3, 4}, {0, 4, 1}
        b = multibroadcast[out_lens={2, 4, 5}](y) -> float_type, {2, 4, 5}, {0, 5, 1}
        d = dot(a, b) -> float_type, {2, 3, 5}
        r = @return(d)
    """,
        [only(sa.DOT_BROADCAST)],
        """
        x = @param:x -> float_type, {1, 3, 4}
        y = @param:y -> float_type, {4, 5}
        s = squeeze[axes={0}](x) -> float_type, {3, 4}
        m = multibroadcast[out_lens={3, 4}](s) -> float_type, {3, 4}
        d = dot(m, y) -> float_type, {3, 5}
        b = multibroadcast[out_lens={2, 3, 5}](d) -> float_type, {2, 3, 5}, {0, 5, 1}
        r = @return(b)
    """,
    )


def test_dot_broadcast_refuses_a_batch_axis_that_varies():
    text = """
        x = @param:x -> float_type, {2, 3, 4}
        y = @param:y -> float_type, {4, 5}
        a = multibroadcast[out_lens={2, 3, 4}](x) -> float_type, {2, 3, 4}
        b = multibroadcast[out_lens={2, 4, 5}](y) -> float_type, {2, 4, 5}, {0, 5, 1}
        d = dot(a, b) -> float_type, {2, 3, 5}
        r = @return(d)
    """
    assert any("not broadcast in both" in n.reason for n in near_misses(parse(text).main, sa.DOT_BROADCAST))


def test_splits_fuse_identical_pointwise_modules_of_different_names():
    check_pass(
        """
        x = @param:x -> float_type, {3, 2, 4}
        s0 = slice[axes={1},starts={0},ends={1}](x) -> float_type, {3, 1, 4}, {8, 4, 1}
        s1 = slice[axes={1},starts={1},ends={2}](x) -> float_type, {3, 1, 4}, {8, 4, 1}
        p0 = pointwise(s0), [pw0] -> float_type, {3, 1, 4}
        p1 = pointwise(s1), [pw1] -> float_type, {3, 1, 4}
        r = @return(p0, p1)
        module: "pw0"
        a = @param:x0 -> float_type, {1}, {0}
        b = exp(a) -> float_type, {1}, {0}
        c = @return(b)
        module: "pw1"
        a = @param:x0 -> float_type, {1}, {0}
        b = exp(a) -> float_type, {1}, {0}
        c = @return(b)
    """,
        [only(sa.SPLITS)],
        """
        x = @param:x -> float_type, {3, 2, 4}
        p = pointwise(x), [pw0] -> float_type, {3, 2, 4}
        s0 = slice[axes={1},starts={0},ends={1}](p) -> float_type, {3, 1, 4}, {8, 4, 1}
        s1 = slice[axes={1},starts={1},ends={2}](p) -> float_type, {3, 1, 4}, {8, 4, 1}
        r = @return(s0, s1)
        module: "pw0"
        a = @param:x0 -> float_type, {1}, {0}
        b = exp(a) -> float_type, {1}, {0}
        c = @return(b)
        module: "pw1"
        a = @param:x0 -> float_type, {1}, {0}
        b = exp(a) -> float_type, {1}, {0}
        c = @return(b)
    """,
    )


def test_splits_refuse_when_one_group_feeds_another():
    text = """
        x = @param:x -> float_type, {3, 2, 4}
        s0 = slice[axes={1},starts={0},ends={1}](x) -> float_type, {3, 1, 4}, {8, 4, 1}
        s1 = slice[axes={1},starts={1},ends={2}](x) -> float_type, {3, 1, 4}, {8, 4, 1}
        e0 = relu(s0) -> float_type, {3, 1, 4}
        a0 = add(e0, s0) -> float_type, {3, 1, 4}
        e1 = relu(s1) -> float_type, {3, 1, 4}
        a1 = add(s1, e1) -> float_type, {3, 1, 4}
        r = @return(a0, a1)
    """
    p = run_on_text(text, [only(sa.SPLITS)])
    assert [i.name for i in p.main].count("relu") == 2
    assert any("depends on another" in n.reason for n in near_misses(parse(text).main, sa.SPLITS))


def test_split_reshape_reshapes_once_then_slices():
    check_pass(
        """
        x = @param:x -> float_type, {4, 6}
        s0 = slice[axes={1},starts={0},ends={2}](x) -> float_type, {4, 2}, {6, 1}
        s1 = slice[axes={1},starts={2},ends={4}](x) -> float_type, {4, 2}, {6, 1}
        s2 = slice[axes={1},starts={4},ends={6}](x) -> float_type, {4, 2}, {6, 1}
        c0 = contiguous(s0) -> float_type, {4, 2}
        c1 = contiguous(s1) -> float_type, {4, 2}
        c2 = contiguous(s2) -> float_type, {4, 2}
        r0 = reshape[dims={2, 2, 2}](c0) -> float_type, {2, 2, 2}
        r1 = reshape[dims={2, 2, 2}](c1) -> float_type, {2, 2, 2}
        r2 = reshape[dims={2, 2, 2}](c2) -> float_type, {2, 2, 2}
        a = add(r0, r1) -> float_type, {2, 2, 2}
        m = mul(a, r2) -> float_type, {2, 2, 2}
        r = @return(m)
    """,
        [only(sa.SPLIT_RESHAPE)],
        """
        x = @param:x -> float_type, {4, 6}
        w = reshape[dims={2, 2, 6}](x) -> float_type, {2, 2, 6}
        r0 = slice[axes={2},starts={0},ends={2}](w) -> float_type, {2, 2, 2}, {12, 6, 1}
        r1 = slice[axes={2},starts={2},ends={4}](w) -> float_type, {2, 2, 2}, {12, 6, 1}
        r2 = slice[axes={2},starts={4},ends={6}](w) -> float_type, {2, 2, 2}, {12, 6, 1}
        a = add(r0, r1) -> float_type, {2, 2, 2}
        m = mul(a, r2) -> float_type, {2, 2, 2}
        r = @return(m)
    """,
    )


def test_split_reshape_refuses_a_block_that_is_not_whole_axes():
    # MIGraphX's reorder_reshape_slice_len_1 rewrites this into slices of the wrong elements
    text = """
        x = @param:x -> float_type, {1, 4, 3}
        s0 = slice[axes={2},starts={0},ends={1}](x) -> float_type, {1, 4, 1}, {12, 3, 1}
        s1 = slice[axes={2},starts={1},ends={2}](x) -> float_type, {1, 4, 1}, {12, 3, 1}
        s2 = slice[axes={2},starts={2},ends={3}](x) -> float_type, {1, 4, 1}, {12, 3, 1}
        c0 = contiguous(s0) -> float_type, {1, 4, 1}
        c1 = contiguous(s1) -> float_type, {1, 4, 1}
        c2 = contiguous(s2) -> float_type, {1, 4, 1}
        r0 = reshape[dims={1, 4}](c0) -> float_type, {1, 4}
        r1 = reshape[dims={1, 4}](c1) -> float_type, {1, 4}
        r2 = reshape[dims={1, 4}](c2) -> float_type, {1, 4}
        a = add(r0, r1) -> float_type, {1, 4}
        m = mul(a, r2) -> float_type, {1, 4}
        r = @return(m)
    """
    assert [i.name for i in run_on_text(text, [only(sa.SPLIT_RESHAPE)]).main].count("reshape") == 3
    assert any("starts where the sliced axis" in n.reason for n in near_misses(parse(text).main, sa.SPLIT_RESHAPE))


def test_split_transpose_transposes_once_then_slices():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3, 6}
        s0 = slice[axes={2},starts={0},ends={2}](x) -> float_type, {2, 3, 2}, {18, 6, 1}
        s1 = slice[axes={2},starts={2},ends={6}](x) -> float_type, {2, 3, 4}, {18, 6, 1}
        t0 = transpose[permutation={2, 0, 1}](s0) -> float_type, {2, 2, 3}, {1, 18, 6}
        t1 = transpose[permutation={2, 0, 1}](s1) -> float_type, {4, 2, 3}, {1, 18, 6}
        r = @return(t0, t1)
    """,
        [only(sa.SPLIT_TRANSPOSE)],
        """
        x = @param:x -> float_type, {2, 3, 6}
        t = transpose[permutation={2, 0, 1}](x) -> float_type, {6, 2, 3}, {1, 18, 6}
        t0 = slice[axes={0},starts={0},ends={2}](t) -> float_type, {2, 2, 3}, {1, 18, 6}
        t1 = slice[axes={0},starts={2},ends={6}](t) -> float_type, {4, 2, 3}, {1, 18, 6}
        r = @return(t0, t1)
    """,
    )


def test_inner_broadcast_of_different_ranks_reduces_rank():
    # MIGraphX's simplify_inner_broadcast_different_dims: {384, 768} + {768}, both broadcast to
    # {2, 384, 768}: the add runs at rank 2, then one multibroadcast
    check_pass(
        """
        x = @param:x -> float_type, {4, 5}
        y = @param:y -> float_type, {5}
        xb = multibroadcast[out_lens={2, 4, 5}](x) -> float_type, {2, 4, 5}, {0, 5, 1}
        yb = multibroadcast[out_lens={2, 4, 5}](y) -> float_type, {2, 4, 5}, {0, 0, 1}
        s = add(xb, yb) -> float_type, {2, 4, 5}
        r = @return(s)
    """,
        [only(sa.INNER_BROADCAST)],
        """
        x = @param:x -> float_type, {4, 5}
        y = @param:y -> float_type, {5}
        yb = broadcast[axis=1,out_lens={4, 5}](y) -> float_type, {4, 5}, {0, 1}
        s = add(x, yb) -> float_type, {4, 5}
        b = multibroadcast[out_lens={2, 4, 5}](s) -> float_type, {2, 4, 5}, {0, 5, 1}
        r = @return(b)
    """,
    )


def test_inner_broadcast_unsqueezes_when_the_inner_axes_are_not_trailing():
    check_pass(
        """
        a = @param:a -> float_type, {3}
        b = @param:b -> float_type, {3, 4, 1}
        ab = broadcast[axis=0,out_lens={3, 4, 2}](a) -> float_type, {3, 4, 2}, {1, 0, 0}
        bb = multibroadcast[out_lens={3, 4, 2}](b) -> float_type, {3, 4, 2}, {4, 1, 0}
        s = mul(ab, bb) -> float_type, {3, 4, 2}
        r = @return(s)
    """,
        [only(sa.INNER_BROADCAST)],
        """
        a = @param:a -> float_type, {3}
        b = @param:b -> float_type, {3, 4, 1}
        ab = broadcast[axis=0,out_lens={3, 4}](a) -> float_type, {3, 4}, {1, 0}
        sb = squeeze[axes={2}](b) -> float_type, {3, 4}
        s = mul(ab, sb) -> float_type, {3, 4}
        u = unsqueeze[axes={2}](s) -> float_type, {3, 4, 1}
        y = multibroadcast[out_lens={3, 4, 2}](u) -> float_type, {3, 4, 2}, {4, 1, 0}
        r = @return(y)
    """,
    )
