"""simplify_algebra: one IR-text test per finder (the finder alone, then DCE), a full-pass test and
refusals. find_conv_conv_1x1 has its own file."""

from __future__ import annotations

import numpy as np
import pytest
from algebra_helpers import CONV, X23, lit, only  # noqa: F401

from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes import simplify_algebra as sa
from migx_explore.compiler.passes.simplify_algebra import SimplifyAlgebra
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text


# ---- table rows ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, value",
    [("mul(x,b)", 1), ("mul(b,x)", 1), ("div(x,b)", 1), ("add(b,x)", 0), ("add(x,b)", 0), ("sub(x,b)", 0)],
)
def test_unit_ops(expr, value):
    check_pass(
        f"""
        {X23}
        c = @literal{{{value}}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = {expr} -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(*sa.UNIT_OPS)],
        f"""
        {X23}
        r = @return(x)
    """,
    )


@pytest.mark.parametrize("expr, value", [("mul(x,b)", -1), ("mul(b,x)", -1), ("div(x,b)", -1), ("sub(b,x)", 0)])
def test_neg_unit_ops(expr, value):
    check_pass(
        f"""
        {X23}
        c = @literal{{{value}}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = {expr} -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(*sa.NEG_UNIT_OPS)],
        f"""
        {X23}
        y = neg(x) -> float_type, {{2, 3}}
        r = @return(y)
    """,
    )


@pytest.mark.parametrize("expr", ["mul(x,b)", "mul(b,x)", "div(b,x)"])
def test_zero_ops(expr):
    check_pass(
        f"""
        {X23}
        c = @literal{{0}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = {expr} -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(*sa.ZERO_OPS)],
        """
        x = @param:x -> float_type, {2, 3}
        c = @literal{0} -> float_type, {1}
        b = multibroadcast[out_lens={2, 3}](c) -> float_type, {2, 3}, {0, 0}
        z = reshape[dims={2, 3}](b) -> float_type, {2, 3}
        r = @return(z)
    """,
    )  # a zero with all strides 0 is reshaped to a standard value first, as MIGraphX


def test_zero_ops_keeps_x_divided_by_zero():
    text = f"""
        {X23}
        c = @literal{{0}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = div(x,b) -> float_type, {{2, 3}}
        r = @return(y)
    """
    check_pass(text, [only(*sa.ZERO_OPS)], text, numeric=False)


def test_div_const():
    check_pass(
        f"""
        {X23}
        c = @literal{{2, 4, 8, 16, 0.5, 0.25}} -> float_type, {{2, 3}}
        y = div(x,c) -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(sa.DIV_CONST)],
        f"""
        {X23}
        c = @literal{{2, 4, 8, 16, 0.5, 0.25}} -> float_type, {{2, 3}}
        rc = recip(c) -> float_type, {{2, 3}}
        y = mul(x,rc) -> float_type, {{2, 3}}
        r = @return(y)
    """,
    )


def test_div_const_refuses_integers():
    text = """
        x = @param:x -> int32_type, {3}
        c = @literal{2, 3, 4} -> int32_type, {3}
        y = div(x,c) -> int32_type, {3}
        r = @return(y)
    """
    check_pass(text, [only(sa.DIV_CONST)], text)
    p = parse(text)
    (miss,) = near_misses(p.main, sa.DIV_CONST)
    assert "integer division" in miss.reason


def test_sub_const():
    check_pass(
        f"""
        {X23}
        c = @literal{{1, 2, 3, 4, 5, 6}} -> float_type, {{2, 3}}
        y = sub(x,c) -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(sa.SUB_CONST)],
        f"""
        {X23}
        c = @literal{{1, 2, 3, 4, 5, 6}} -> float_type, {{2, 3}}
        n = neg(c) -> float_type, {{2, 3}}
        y = add(x,n) -> float_type, {{2, 3}}
        r = @return(y)
    """,
    )


def test_rsqrt():
    check_pass(
        f"""
        {X23}
        a = abs(x) -> float_type, {{2, 3}}
        s = sqrt(a) -> float_type, {{2, 3}}
        y = recip(s) -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(sa.RSQRT)],
        f"""
        {X23}
        a = abs(x) -> float_type, {{2, 3}}
        y = rsqrt(a) -> float_type, {{2, 3}}
        r = @return(y)
    """,
    )


def test_rsqrt_needs_sqrt_used_once():
    text = f"""
        {X23}
        a = abs(x) -> float_type, {{2, 3}}
        s = sqrt(a) -> float_type, {{2, 3}}
        y = recip(s) -> float_type, {{2, 3}}
        r = @return(y, s)
    """
    check_pass(text, [only(sa.RSQRT)], text)


def test_log_exp():
    check_pass(
        f"""
        {X23}
        e = exp(x) -> float_type, {{2, 3}}
        y = log(e) -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(sa.LOG_EXP)],
        f"""
        {X23}
        r = @return(x)
    """,
    )


def test_log_div():
    check_pass(
        f"""
        {X23}
        e = exp(x) -> float_type, {{2, 3}}
        s = reduce_sum[axes={{1}}](e) -> float_type, {{2, 1}}
        b = multibroadcast[out_lens={{2, 3}}](s) -> float_type, {{2, 3}}, {{1, 0}}
        d = div(e,b) -> float_type, {{2, 3}}
        y = log(d) -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(sa.LOG_DIV)],
        f"""
        {X23}
        e = exp(x) -> float_type, {{2, 3}}
        s = reduce_sum[axes={{1}}](e) -> float_type, {{2, 1}}
        b = multibroadcast[out_lens={{2, 3}}](s) -> float_type, {{2, 3}}, {{1, 0}}
        le = log(e) -> float_type, {{2, 3}}
        lb = log(b) -> float_type, {{2, 3}}
        y = sub(le,lb) -> float_type, {{2, 3}}
        r = @return(y)
    """,
    )


def test_pow2():
    check_pass(
        f"""
        {X23}
        c = @literal{{2}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = pow(x,b) -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(sa.POW2)],
        f"""
        {X23}
        y = mul(x,x) -> float_type, {{2, 3}}
        r = @return(y)
    """,
    )


def test_mul_add():
    check_pass(
        """
        x = @param:x -> float_type, {3}
        a = @literal{2, 3, 4} -> float_type, {3}
        b = @literal{1, -1, 0.5} -> float_type, {3}
        s = add(x,b) -> float_type, {3}
        y = mul(a,s) -> float_type, {3}
        r = @return(y)
    """,
        [only(sa.MUL_ADD)],
        """
        x = @param:x -> float_type, {3}
        a = @literal{2, 3, 4} -> float_type, {3}
        b = @literal{1, -1, 0.5} -> float_type, {3}
        ax = mul(a,x) -> float_type, {3}
        ab = mul(a,b) -> float_type, {3}
        y = add(ax,ab) -> float_type, {3}
        r = @return(y)
    """,
    )


def test_mul_add_needs_add_used_once():
    text = """
        x = @param:x -> float_type, {3}
        a = @literal{2, 3, 4} -> float_type, {3}
        b = @literal{1, -1, 0.5} -> float_type, {3}
        s = add(x,b) -> float_type, {3}
        y = mul(a,s) -> float_type, {3}
        r = @return(y, s)
    """
    check_pass(text, [only(sa.MUL_ADD)], text)


def test_add_lit_broadcast():
    check_pass(
        """
        x = @param:x -> float_type, {3}
        a = @literal{1, 2, 3} -> float_type, {3}
        b = @literal{10, 20, 30} -> float_type, {3}
        s = add(x,a) -> float_type, {3}
        y = add(b,s) -> float_type, {3}
        r = @return(y)
    """,
        [only(sa.ADD_LIT_BROADCAST)],
        """
        x = @param:x -> float_type, {3}
        a = @literal{1, 2, 3} -> float_type, {3}
        b = @literal{10, 20, 30} -> float_type, {3}
        ab = add(a,b) -> float_type, {3}
        y = add(x,ab) -> float_type, {3}
        r = @return(y)
    """,
    )


def test_double_add_lit_broadcast_adds_broadcast_sources_first():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        a = @literal{1, 2} -> float_type, {2}
        b = @literal{3, 4} -> float_type, {2}
        ab = broadcast[axis=0,out_lens={2, 3}](a) -> float_type, {2, 3}, {1, 0}
        bb = broadcast[axis=0,out_lens={2, 3}](b) -> float_type, {2, 3}, {1, 0}
        xa = add(x,ab) -> float_type, {2, 3}
        yb = add(yb_in,bb) -> float_type, {2, 3}
        s = add(xa,yb) -> float_type, {2, 3}
        r = @return(s)
    """.replace("yb_in", "y"),
        [only(sa.DOUBLE_ADD_LIT_BROADCAST)],
        """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        a = @literal{1, 2} -> float_type, {2}
        b = @literal{3, 4} -> float_type, {2}
        pre = add(a,b) -> float_type, {2}
        ab = broadcast[axis=0,out_lens={2, 3}](pre) -> float_type, {2, 3}, {1, 0}
        xy = add(x,y) -> float_type, {2, 3}
        s = add(xy,ab) -> float_type, {2, 3}
        r = @return(s)
    """,
    )


def test_dot_add_keeps_operand_order():
    check_pass(
        f"""
        x = @param:x -> float_type, {{2, 2}}
        a = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2}}
        b = @literal{lit([1, 0, 0, 1])} -> float_type, {{2, 2}}
        s = add(x,b) -> float_type, {{2, 2}}
        y = dot(a,s) -> float_type, {{2, 2}}
        r = @return(y)
    """,
        [only(sa.DOT_ADD)],
        f"""
        x = @param:x -> float_type, {{2, 2}}
        a = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2}}
        b = @literal{lit([1, 0, 0, 1])} -> float_type, {{2, 2}}
        ax = dot(a,x) -> float_type, {{2, 2}}
        ab = dot(a,b) -> float_type, {{2, 2}}
        y = add(ax,ab) -> float_type, {{2, 2}}
        r = @return(y)
    """,
    )


# ---- the whole pass --------------------------------------------------------------------------
def test_simplify_algebra_runs_to_a_fixpoint():
    p = run_on_text(
        """
        x = @param:x -> float_type, {2, 3}
        one = @literal{1} -> float_type, {1}
        two = @literal{2} -> float_type, {1}
        b1 = multibroadcast[out_lens={2, 3}](one) -> float_type, {2, 3}, {0, 0}
        b2 = multibroadcast[out_lens={2, 3}](two) -> float_type, {2, 3}, {0, 0}
        m = mul(x,b1) -> float_type, {2, 3}
        p = pow(m,b2) -> float_type, {2, 3}
        e = exp(p) -> float_type, {2, 3}
        l = log(e) -> float_type, {2, 3}
        r = @return(l)
    """,
        [SimplifyAlgebra()],
    )
    assert [i.name for i in p.main if not i.is_builtin()] == ["mul"]
    mul = next(i for i in p.main if i.name == "mul")
    assert mul.inputs[0] is mul.inputs[1] and mul.inputs[0].is_param()


def test_simplify_algebra_keeps_numerics_on_a_mixed_graph():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).round(2)
    s = rng.uniform(0.5, 2, 4).round(2)
    text = f"""
        x = @param:x -> float_type, {{1, 3, 6, 6}}
        w = @literal{lit(w)} -> float_type, {{4, 3, 3, 3}}
        s = @literal{lit(s)} -> float_type, {{4}}
        two = @literal{{2}} -> float_type, {{1}}
        c = convolution[padding={{1, 1}},stride={{1, 1}}](x,w) -> float_type, {{1, 4, 6, 6}}
        sb = broadcast[axis=1,out_lens={{1, 4, 6, 6}}](s) -> float_type, {{1, 4, 6, 6}}, {{0, 1, 0, 0}}
        m = mul(c,sb) -> float_type, {{1, 4, 6, 6}}
        tb = multibroadcast[out_lens={{1, 4, 6, 6}}](two) -> float_type, {{1, 4, 6, 6}}, {{0, 0, 0, 0}}
        d = div(m,tb) -> float_type, {{1, 4, 6, 6}}
        q = sub(d,tb) -> float_type, {{1, 4, 6, 6}}
        r = @return(q)
    """
    before = parse(text)
    after = run_on_text(text, [SimplifyAlgebra()])
    assert not any(i.name in ("div", "sub") for i in after.main)
    assert_same_outputs(before, after, rtol=1e-5, atol=1e-5)


def test_dot_slice_slices_the_operands():
    check_pass(
        """
        a = @param:a -> float_type, {2, 4, 3}
        b = @param:b -> float_type, {2, 3, 5}
        d = dot(a,b) -> float_type, {2, 4, 5}
        s = slice[axes={0, 1, 2},starts={1, 1, 0},ends={2, 3, 2}](d) -> float_type, {1, 2, 2}, {20, 5, 1}
        r = @return(s)
    """,
        [only(sa.DOT_SLICE)],
        """
        a = @param:a -> float_type, {2, 4, 3}
        b = @param:b -> float_type, {2, 3, 5}
        sa = slice[axes={0, 1},starts={1, 1},ends={2, 3}](a) -> float_type, {1, 2, 3}, {12, 3, 1}
        sb = slice[axes={0, 2},starts={1, 0},ends={2, 2}](b) -> float_type, {1, 3, 2}, {15, 5, 1}
        s = dot(sa,sb) -> float_type, {1, 2, 2}
        r = @return(s)
    """,
    )


def test_eliminate_zero_point():
    check_pass(
        """
        x = @param:x -> float_type, {4}
        s = @literal{0.5, 0.25, 1, 2} -> float_type, {4}
        z = @literal{0, 0, 0, 0} -> int8_type, {4}
        q = quantizelinear(x,s,z) -> int8_type, {4}
        d = dequantizelinear(q,s,z) -> float_type, {4}
        r = @return(d)
    """,
        [only(sa.ZERO_POINT)],
        """
        x = @param:x -> float_type, {4}
        s = @literal{0.5, 0.25, 1, 2} -> float_type, {4}
        q = quantizelinear[out_type=int8](x,s) -> int8_type, {4}
        d = dequantizelinear(q,s) -> float_type, {4}
        r = @return(d)
    """,
    )
