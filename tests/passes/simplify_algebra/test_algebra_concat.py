"""simplify_algebra's broadcast, concat and split finders (compiler/passes/concat_rules.py): one
IR-text test per finder (the finder alone, then DCE), and refusals."""

from __future__ import annotations

from algebra_helpers import CONV, X23, lit, only  # noqa: F401

from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes import simplify_algebra as sa
from migx_explore.compiler.passes.rewrite import sweep
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text


# ---- broadcast / concat / split finders -----------------------------------------------------
def test_inner_broadcast_computes_before_broadcasting():
    check_pass(
        """
        a = @param:a -> float_type, {3}
        b = @param:b -> float_type, {3}
        ab = broadcast[axis=1,out_lens={2, 3, 4}](a) -> float_type, {2, 3, 4}, {0, 1, 0}
        bb = broadcast[axis=1,out_lens={2, 3, 4}](b) -> float_type, {2, 3, 4}, {0, 1, 0}
        y = add(ab,bb) -> float_type, {2, 3, 4}
        r = @return(y)
    """,
        [only(sa.INNER_BROADCAST)],
        """
        a = @param:a -> float_type, {3}
        b = @param:b -> float_type, {3}
        s = add(a,b) -> float_type, {3}
        y = broadcast[axis=1,out_lens={2, 3, 4}](s) -> float_type, {2, 3, 4}, {0, 1, 0}
        r = @return(y)
    """,
    )  # the same broadcast on both: the op runs on the sources (MIGraphX's apply_same_broadcasts)


def test_inner_broadcast_mixed_broadcasts():
    p = parse("""
        a = @param:a -> float_type, {3}
        s = @param:s -> float_type, {1}
        ab = broadcast[axis=1,out_lens={2, 3, 4}](a) -> float_type, {2, 3, 4}, {0, 1, 0}
        sb = multibroadcast[out_lens={2, 3, 4}](s) -> float_type, {2, 3, 4}, {0, 0, 0}
        y = mul(ab,sb) -> float_type, {2, 3, 4}
        r = @return(y)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.INNER_BROADCAST])
    mul = next(i for i in q.main if i.name == "mul")
    assert mul.shape.lens == (3,)  # the broadcast axes squeezed away: rank 1, as MIGraphX
    assert_same_outputs(p, q)


def test_inner_broadcast_refuses_when_an_input_varies_everywhere_it_matters():
    p = parse("""
        a = @param:a -> float_type, {3}
        b = @param:b -> float_type, {4}
        ab = broadcast[axis=0,out_lens={3, 4}](a) -> float_type, {3, 4}, {1, 0}
        bb = broadcast[axis=1,out_lens={3, 4}](b) -> float_type, {3, 4}, {0, 1}
        y = add(ab,bb) -> float_type, {3, 4}
        r = @return(y)
    """)
    (miss,) = [nm for nm in near_misses(p.main, sa.INNER_BROADCAST) if nm.op == "add"]
    assert "no axis is broadcast in every input" in miss.reason


def test_concat_same_input():
    check_pass(
        """
        x = @param:x -> float_type, {2, 1, 3}
        c = concat[axis=1](x,x,x) -> float_type, {2, 3, 3}
        r = @return(c)
    """,
        [only(sa.CONCAT_SAME_INPUT)],
        """
        x = @param:x -> float_type, {2, 1, 3}
        c = multibroadcast[out_lens={2, 3, 3}](x) -> float_type, {2, 3, 3}, {3, 0, 1}
        r = @return(c)
    """,
    )


def test_concat_op_of_pointwise():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 4}
        z = @param:z -> float_type, {2, 1}
        ex = exp(x) -> float_type, {2, 3}
        ey = exp(y) -> float_type, {2, 4}
        c = concat[axis=1](ex,ey,z) -> float_type, {2, 8}
        r = @return(c)
    """,
        [only(sa.CONCAT_OP)],
        """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 4}
        z = @param:z -> float_type, {2, 1}
        xy = concat[axis=1](x,y) -> float_type, {2, 7}
        e = exp(xy) -> float_type, {2, 7}
        c = concat[axis=1](e,z) -> float_type, {2, 8}
        r = @return(c)
    """,
    )


def test_concat_conv_becomes_grouped_conv():
    check_pass(
        f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        y = @param:y -> float_type, {{1, 2, 3, 3}}
        w1 = @literal{lit(range(4))} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{lit(range(4, 8))} -> float_type, {{2, 2, 1, 1}}
        c1 = {CONV}(x,w1) -> float_type, {{1, 2, 3, 3}}
        c2 = {CONV}(y,w2) -> float_type, {{1, 2, 3, 3}}
        c = concat[axis=1](c1,c2) -> float_type, {{1, 4, 3, 3}}
        r = @return(c)
    """,
        [only(sa.CONCAT_CONV)],
        f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        y = @param:y -> float_type, {{1, 2, 3, 3}}
        w1 = @literal{lit(range(4))} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{lit(range(4, 8))} -> float_type, {{2, 2, 1, 1}}
        xy = concat[axis=1](x,y) -> float_type, {{1, 4, 3, 3}}
        w = concat[axis=0](w1,w2) -> float_type, {{4, 2, 1, 1}}
        c = convolution[padding={{0, 0}},stride={{1, 1}},group=2](xy,w) -> float_type, {{1, 4, 3, 3}}
        r = @return(c)
    """,
    )


def test_split_concat():
    check_pass(
        """
        x = @param:x -> float_type, {2, 6}
        a = slice[axes={1},starts={0},ends={2}](x) -> float_type, {2, 2}, {6, 1}
        b = slice[axes={1},starts={2},ends={6}](x) -> float_type, {2, 4}, {6, 1}
        c = concat[axis=1](a,b) -> float_type, {2, 6}
        r = @return(c)
    """,
        [only(sa.SPLIT_CONCAT)],
        """
        x = @param:x -> float_type, {2, 6}
        r = @return(x)
    """,
    )


def test_splits_unary():
    check_pass(
        """
        x = @param:x -> float_type, {2, 6}
        a = slice[axes={1},starts={0},ends={2}](x) -> float_type, {2, 2}, {6, 1}
        b = slice[axes={1},starts={2},ends={6}](x) -> float_type, {2, 4}, {6, 1}
        ea = exp(a) -> float_type, {2, 2}
        eb = exp(b) -> float_type, {2, 4}
        r = @return(ea,eb)
    """,
        [only(sa.SPLITS)],
        """
        x = @param:x -> float_type, {2, 6}
        e = exp(x) -> float_type, {2, 6}
        ea = slice[axes={1},starts={0},ends={2}](e) -> float_type, {2, 2}, {6, 1}
        eb = slice[axes={1},starts={2},ends={6}](e) -> float_type, {2, 4}, {6, 1}
        r = @return(ea,eb)
    """,
    )


def test_splits_binary_with_constants():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        c1 = @literal{1, 2} -> float_type, {2, 1}
        c2 = @literal{3, 4, 5, 6} -> float_type, {2, 2}
        a = slice[axes={1},starts={0},ends={1}](x) -> float_type, {2, 1}, {3, 1}
        b = slice[axes={1},starts={1},ends={3}](x) -> float_type, {2, 2}, {3, 1}
        ma = mul(a,c1) -> float_type, {2, 1}
        mb = mul(c2,b) -> float_type, {2, 2}
        r = @return(ma,mb)
    """,
        [only(sa.SPLITS)],
        """
        x = @param:x -> float_type, {2, 3}
        c1 = @literal{1, 2} -> float_type, {2, 1}
        c2 = @literal{3, 4, 5, 6} -> float_type, {2, 2}
        c = concat[axis=1](c1,c2) -> float_type, {2, 3}
        m = mul(x,c) -> float_type, {2, 3}
        ma = slice[axes={1},starts={0},ends={1}](m) -> float_type, {2, 1}, {3, 1}
        mb = slice[axes={1},starts={1},ends={3}](m) -> float_type, {2, 2}, {3, 1}
        r = @return(ma,mb)
    """,
    )


def test_splits_two_groups_sharing_a_slice_consumer_keep_shapes():
    # Both slices feed two muls: planning pairs the second slice's first mul with each of the first
    # slice's muls; fusing the first group turns that mul into a slice, so the second group must be
    # re-planned rather than fused with it (it used to build a mul of mismatched lens).
    text = """
        x = @param:x -> float_type, {2, 4}
        c0 = @literal{1, 2, 3, 4} -> float_type, {2, 2}
        c1 = @literal{5, 6, 7, 8} -> float_type, {2, 2}
        a = slice[axes={1},starts={0},ends={2}](x) -> float_type, {2, 2}, {4, 1}
        b = slice[axes={1},starts={2},ends={4}](x) -> float_type, {2, 2}, {4, 1}
        ma = mul(c0,a) -> float_type, {2, 2}
        mb = mul(c1,b) -> float_type, {2, 2}
        na = mul(c1,a) -> float_type, {2, 2}
        nb = mul(c0,b) -> float_type, {2, 2}
        s = sub(ma,mb) -> float_type, {2, 2}
        t = add(na,nb) -> float_type, {2, 2}
        r = @return(s,t)
    """
    before = parse(text)
    after = run_on_text(text, [only(sa.SPLITS)])
    assert_same_outputs(before, after)


def test_splits_reduce_off_the_slice_axis():
    p = parse("""
        x = @param:x -> float_type, {4, 5}
        a = slice[axes={0},starts={0},ends={1}](x) -> float_type, {1, 5}, {5, 1}
        b = slice[axes={0},starts={1},ends={4}](x) -> float_type, {3, 5}, {5, 1}
        ra = reduce_sum[axes={1}](a) -> float_type, {1, 1}
        rb = reduce_sum[axes={1}](b) -> float_type, {3, 1}
        r = @return(ra,rb)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.SPLITS])
    assert sum(1 for i in q.main if i.name == "reduce_sum") == 1
    assert_same_outputs(p, q)
