"""simplify_algebra: one IR-text test per finder (the finder alone, then DCE), a full-pass test and
refusals. find_conv_conv_1x1 has its own file."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler.matcher import near_misses
from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes import FunctionPass
from migx_explore.compiler.passes import simplify_algebra as sa
from migx_explore.compiler.passes._finder_util import sweep
from migx_explore.compiler.passes.simplify_algebra import SimplifyAlgebra
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text


def only(*rules):
    return FunctionPass(fn=lambda m: sweep(m, rules), label="rules")


def lit(values) -> str:
    return "{" + ", ".join(str(v) for v in np.asarray(values).reshape(-1).tolist()) + "}"


X23 = "x = @param:x -> float_type, {2, 3}"


# ---- table rows ------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, value", [
    ("mul(x,b)", 1), ("mul(b,x)", 1), ("div(x,b)", 1), ("add(b,x)", 0), ("add(x,b)", 0), ("sub(x,b)", 0)])
def test_unit_ops(expr, value):
    check_pass(f"""
        {X23}
        c = @literal{{{value}}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = {expr} -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(*sa.UNIT_OPS)], f"""
        {X23}
        r = @return(x)
    """)


@pytest.mark.parametrize("expr, value", [("mul(x,b)", -1), ("mul(b,x)", -1), ("div(x,b)", -1), ("sub(b,x)", 0)])
def test_neg_unit_ops(expr, value):
    check_pass(f"""
        {X23}
        c = @literal{{{value}}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = {expr} -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(*sa.NEG_UNIT_OPS)], f"""
        {X23}
        y = neg(x) -> float_type, {{2, 3}}
        r = @return(y)
    """)


@pytest.mark.parametrize("expr", ["mul(x,b)", "mul(b,x)", "div(b,x)"])
def test_zero_ops(expr):
    check_pass(f"""
        {X23}
        c = @literal{{0}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = {expr} -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(*sa.ZERO_OPS)], """
        x = @param:x -> float_type, {2, 3}
        c = @literal{0} -> float_type, {1}
        b = multibroadcast[out_lens={2, 3}](c) -> float_type, {2, 3}, {0, 0}
        r = @return(b)
    """)


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
    check_pass(f"""
        {X23}
        c = @literal{{2, 4, 8, 16, 0.5, 0.25}} -> float_type, {{2, 3}}
        y = div(x,c) -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(sa.DIV_CONST)], f"""
        {X23}
        c = @literal{{2, 4, 8, 16, 0.5, 0.25}} -> float_type, {{2, 3}}
        rc = recip(c) -> float_type, {{2, 3}}
        y = mul(x,rc) -> float_type, {{2, 3}}
        r = @return(y)
    """)


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
    check_pass(f"""
        {X23}
        c = @literal{{1, 2, 3, 4, 5, 6}} -> float_type, {{2, 3}}
        y = sub(x,c) -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(sa.SUB_CONST)], f"""
        {X23}
        c = @literal{{1, 2, 3, 4, 5, 6}} -> float_type, {{2, 3}}
        n = neg(c) -> float_type, {{2, 3}}
        y = add(x,n) -> float_type, {{2, 3}}
        r = @return(y)
    """)


def test_rsqrt():
    check_pass(f"""
        {X23}
        a = abs(x) -> float_type, {{2, 3}}
        s = sqrt(a) -> float_type, {{2, 3}}
        y = recip(s) -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(sa.RSQRT)], f"""
        {X23}
        a = abs(x) -> float_type, {{2, 3}}
        y = rsqrt(a) -> float_type, {{2, 3}}
        r = @return(y)
    """)


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
    check_pass(f"""
        {X23}
        e = exp(x) -> float_type, {{2, 3}}
        y = log(e) -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(sa.LOG_EXP)], f"""
        {X23}
        r = @return(x)
    """)


def test_log_div():
    check_pass(f"""
        {X23}
        e = exp(x) -> float_type, {{2, 3}}
        s = reduce_sum[axes={{1}}](e) -> float_type, {{2, 1}}
        b = multibroadcast[out_lens={{2, 3}}](s) -> float_type, {{2, 3}}, {{1, 0}}
        d = div(e,b) -> float_type, {{2, 3}}
        y = log(d) -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(sa.LOG_DIV)], f"""
        {X23}
        e = exp(x) -> float_type, {{2, 3}}
        s = reduce_sum[axes={{1}}](e) -> float_type, {{2, 1}}
        b = multibroadcast[out_lens={{2, 3}}](s) -> float_type, {{2, 3}}, {{1, 0}}
        le = log(e) -> float_type, {{2, 3}}
        lb = log(b) -> float_type, {{2, 3}}
        y = sub(le,lb) -> float_type, {{2, 3}}
        r = @return(y)
    """)


def test_pow2():
    check_pass(f"""
        {X23}
        c = @literal{{2}} -> float_type, {{1}}
        b = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 0}}
        y = pow(x,b) -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(sa.POW2)], f"""
        {X23}
        y = mul(x,x) -> float_type, {{2, 3}}
        r = @return(y)
    """)


def test_mul_add():
    check_pass("""
        x = @param:x -> float_type, {3}
        a = @literal{2, 3, 4} -> float_type, {3}
        b = @literal{1, -1, 0.5} -> float_type, {3}
        s = add(x,b) -> float_type, {3}
        y = mul(a,s) -> float_type, {3}
        r = @return(y)
    """, [only(sa.MUL_ADD)], """
        x = @param:x -> float_type, {3}
        a = @literal{2, 3, 4} -> float_type, {3}
        b = @literal{1, -1, 0.5} -> float_type, {3}
        ax = mul(a,x) -> float_type, {3}
        ab = mul(a,b) -> float_type, {3}
        y = add(ax,ab) -> float_type, {3}
        r = @return(y)
    """)


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
    check_pass("""
        x = @param:x -> float_type, {3}
        a = @literal{1, 2, 3} -> float_type, {3}
        b = @literal{10, 20, 30} -> float_type, {3}
        s = add(x,a) -> float_type, {3}
        y = add(b,s) -> float_type, {3}
        r = @return(y)
    """, [only(sa.ADD_LIT_BROADCAST)], """
        x = @param:x -> float_type, {3}
        a = @literal{1, 2, 3} -> float_type, {3}
        b = @literal{10, 20, 30} -> float_type, {3}
        ab = add(a,b) -> float_type, {3}
        y = add(x,ab) -> float_type, {3}
        r = @return(y)
    """)


def test_double_add_lit_broadcast_adds_broadcast_sources_first():
    check_pass("""
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
    """.replace("yb_in", "y"), [only(sa.DOUBLE_ADD_LIT_BROADCAST)], """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        a = @literal{1, 2} -> float_type, {2}
        b = @literal{3, 4} -> float_type, {2}
        pre = add(a,b) -> float_type, {2}
        ab = broadcast[axis=0,out_lens={2, 3}](pre) -> float_type, {2, 3}, {1, 0}
        xy = add(x,y) -> float_type, {2, 3}
        s = add(xy,ab) -> float_type, {2, 3}
        r = @return(s)
    """)


def test_dot_add_keeps_operand_order():
    check_pass(f"""
        x = @param:x -> float_type, {{2, 2}}
        a = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2}}
        b = @literal{lit([1, 0, 0, 1])} -> float_type, {{2, 2}}
        s = add(x,b) -> float_type, {{2, 2}}
        y = dot(a,s) -> float_type, {{2, 2}}
        r = @return(y)
    """, [only(sa.DOT_ADD)], f"""
        x = @param:x -> float_type, {{2, 2}}
        a = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2}}
        b = @literal{lit([1, 0, 0, 1])} -> float_type, {{2, 2}}
        ax = dot(a,x) -> float_type, {{2, 2}}
        ab = dot(a,b) -> float_type, {{2, 2}}
        y = add(ax,ab) -> float_type, {{2, 2}}
        r = @return(y)
    """)


# ---- convolution and dot finders -------------------------------------------------------------
CONV = "convolution[padding={0, 0},stride={1, 1}]"


def test_mul_conv_folds_channel_scale_into_weights():
    check_pass(f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        a = @literal{{2, 3}} -> float_type, {{2}}
        c = {CONV}(x,w) -> float_type, {{1, 2, 3, 3}}
        ab = broadcast[axis=1,out_lens={{1, 2, 3, 3}}](a) -> float_type, {{1, 2, 3, 3}}, {{0, 1, 0, 0}}
        y = mul(c,ab) -> float_type, {{1, 2, 3, 3}}
        r = @return(y)
    """, [only(sa.MUL_CONV)], f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        a = @literal{{2, 3}} -> float_type, {{2}}
        aw = broadcast[axis=0,out_lens={{2, 2, 1, 1}}](a) -> float_type, {{2, 2, 1, 1}}, {{1, 0, 0, 0}}
        nw = mul(aw,w) -> float_type, {{2, 2, 1, 1}}
        y = {CONV}(x,nw) -> float_type, {{1, 2, 3, 3}}
        r = @return(y)
    """)


def test_mul_conv_refuses_spatially_varying_multiplier():
    p = parse(f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        a = @literal{lit(range(9))} -> float_type, {{3, 3}}
        c = {CONV}(x,w) -> float_type, {{1, 2, 3, 3}}
        ab = multibroadcast[out_lens={{1, 2, 3, 3}}](a) -> float_type, {{1, 2, 3, 3}}, {{0, 0, 3, 1}}
        y = mul(c,ab) -> float_type, {{1, 2, 3, 3}}
        r = @return(y)
    """)
    (miss,) = [nm for nm in near_misses(p.main, sa.MUL_CONV) if nm.op == "mul"]
    assert "more than the channel axis" in miss.reason


def test_add_convs_concatenates_inputs_and_weights():
    check_pass(f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        y = @param:y -> float_type, {{1, 1, 3, 3}}
        w1 = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{{5, 6}} -> float_type, {{2, 1, 1, 1}}
        c1 = {CONV}(x,w1) -> float_type, {{1, 2, 3, 3}}
        c2 = {CONV}(y,w2) -> float_type, {{1, 2, 3, 3}}
        s = add(c1,c2) -> float_type, {{1, 2, 3, 3}}
        r = @return(s)
    """, [only(sa.ADD_CONVS)], f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        y = @param:y -> float_type, {{1, 1, 3, 3}}
        w1 = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{{5, 6}} -> float_type, {{2, 1, 1, 1}}
        xy = concat[axis=1](x,y) -> float_type, {{1, 3, 3, 3}}
        w = concat[axis=1](w1,w2) -> float_type, {{2, 3, 1, 1}}
        s = {CONV}(xy,w) -> float_type, {{1, 2, 3, 3}}
        r = @return(s)
    """)


def test_add_convs_steps_the_finer_strided_1x1():
    p = parse(f"""
        x = @param:x -> float_type, {{1, 2, 4, 4}}
        y = @param:y -> float_type, {{1, 1, 8, 8}}
        w1 = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{{5, 6}} -> float_type, {{2, 1, 1, 1}}
        c1 = {CONV}(x,w1) -> float_type, {{1, 2, 4, 4}}
        c2 = convolution[padding={{0, 0}},stride={{2, 2}}](y,w2) -> float_type, {{1, 2, 4, 4}}
        s = add(c1,c2) -> float_type, {{1, 2, 4, 4}}
        r = @return(s)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.ADD_CONVS])
    names = [i.name for i in q.main if not i.is_builtin()]
    assert names == ["step", "concat", "concat", "convolution"]
    assert_same_outputs(p, q)


def test_conv_dot_horiz_fusion_of_dots():
    check_pass(f"""
        x = @param:x -> float_type, {{2, 4}}
        a = @literal{lit(range(12))} -> float_type, {{4, 3}}
        b = @literal{lit(range(20))} -> float_type, {{4, 5}}
        d1 = dot(x,a) -> float_type, {{2, 3}}
        d2 = dot(x,b) -> float_type, {{2, 5}}
        r = @return(d1,d2)
    """, [only(sa.CONV_DOT_HORIZ_FUSION)], f"""
        x = @param:x -> float_type, {{2, 4}}
        a = @literal{lit(range(12))} -> float_type, {{4, 3}}
        b = @literal{lit(range(20))} -> float_type, {{4, 5}}
        ab = concat[axis=1](a,b) -> float_type, {{4, 8}}
        d = dot(x,ab) -> float_type, {{2, 8}}
        d1 = slice[axes={{1}},starts={{0}},ends={{3}}](d) -> float_type, {{2, 3}}, {{8, 1}}
        d2 = slice[axes={{1}},starts={{3}},ends={{8}}](d) -> float_type, {{2, 5}}, {{8, 1}}
        r = @return(d1,d2)
    """)


def test_conv_dot_horiz_fusion_of_convs_moves_late_weights():
    p = parse(f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        w1 = @literal{lit(range(4))} -> float_type, {{2, 2, 1, 1}}
        c1 = {CONV}(x,w1) -> float_type, {{1, 2, 3, 3}}
        w2 = @literal{lit(range(6))} -> float_type, {{3, 2, 1, 1}}
        w2n = neg(w2) -> float_type, {{3, 2, 1, 1}}
        c2 = {CONV}(x,w2n) -> float_type, {{1, 3, 3, 3}}
        r = @return(c1,c2)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.CONV_DOT_HORIZ_FUSION])
    q.validate()
    assert sum(1 for i in q.main if i.name == "convolution") == 1
    assert [i.name for i in q.main if i.name == "slice"] == ["slice", "slice"]
    assert_same_outputs(p, q)


def test_mul_dot_scales_constant_columns():
    check_pass(f"""
        x = @param:x -> float_type, {{2, 2}}
        b = @literal{lit([1, 2, 3, 4, 5, 6])} -> float_type, {{2, 3}}
        c = @literal{{2, 3, 4}} -> float_type, {{3}}
        d = dot(x,b) -> float_type, {{2, 3}}
        cb = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 1}}
        y = mul(d,cb) -> float_type, {{2, 3}}
        r = @return(y)
    """, [only(sa.MUL_DOT)], f"""
        x = @param:x -> float_type, {{2, 2}}
        b = @literal{lit([1, 2, 3, 4, 5, 6])} -> float_type, {{2, 3}}
        c = @literal{{2, 3, 4}} -> float_type, {{3}}
        cb = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 1}}
        bc = mul(b,cb) -> float_type, {{2, 3}}
        y = dot(x,bc) -> float_type, {{2, 3}}
        r = @return(y)
    """)


def test_mul_dot_refuses_rows_of_a_parameter():
    p = parse("""
        x = @param:x -> float_type, {2, 2}
        b = @literal{1, 2, 3, 4} -> float_type, {2, 2}
        c = @literal{2, 3} -> float_type, {2, 1}
        d = dot(x,b) -> float_type, {2, 2}
        cb = multibroadcast[out_lens={2, 2}](c) -> float_type, {2, 2}, {1, 0}
        y = mul(d,cb) -> float_type, {2, 2}
        r = @return(y)
    """)
    (miss,) = [nm for nm in near_misses(p.main, sa.MUL_DOT) if nm.op == "mul"]
    assert "rows are scaled but dot input 0 is not constant" in miss.reason


def test_conv_add_splits_constant_addend():
    check_pass(f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        a = @literal{lit(range(18))} -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        s = add(x,a) -> float_type, {{1, 2, 3, 3}}
        c = {CONV}(s,w) -> float_type, {{1, 2, 3, 3}}
        r = @return(c)
    """, [only(sa.CONV_ADD)], f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        a = @literal{lit(range(18))} -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        ca = {CONV}(a,w) -> float_type, {{1, 2, 3, 3}}
        cx = {CONV}(x,w) -> float_type, {{1, 2, 3, 3}}
        c = add(ca,cx) -> float_type, {{1, 2, 3, 3}}
        r = @return(c)
    """)


def test_conv_broadcast_input_becomes_dot():
    p = parse(f"""
        x = @param:x -> float_type, {{2, 3}}
        w = @literal{lit(range(2 * 3 * 2 * 2))} -> float_type, {{2, 3, 2, 2}}
        u = unsqueeze[axes={{2, 3}}](x) -> float_type, {{2, 3, 1, 1}}
        b = multibroadcast[out_lens={{2, 3, 4, 4}}](u) -> float_type, {{2, 3, 4, 4}}, {{3, 1, 0, 0}}
        c = convolution[padding={{0, 0}},stride={{2, 2}}](b,w) -> float_type, {{2, 2, 2, 2}}
        r = @return(c)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.CONV_BROADCAST_INPUT])
    assert not any(i.name == "convolution" for i in q.main)
    assert any(i.name == "dot" for i in q.main)
    assert_same_outputs(p, q)


def test_conv_broadcast_input_refuses_padding():
    p = parse(f"""
        x = @param:x -> float_type, {{1, 3, 1, 1}}
        w = @literal{lit(range(2 * 3 * 3 * 3))} -> float_type, {{2, 3, 3, 3}}
        b = multibroadcast[out_lens={{1, 3, 4, 4}}](x) -> float_type, {{1, 3, 4, 4}}, {{0, 1, 0, 0}}
        c = convolution[padding={{1, 1}},stride={{1, 1}}](b,w) -> float_type, {{1, 2, 4, 4}}
        r = @return(c)
    """)
    (miss,) = near_misses(p.main, sa.CONV_BROADCAST_INPUT)
    assert "padded" in miss.reason


# ---- broadcast / concat / split finders -----------------------------------------------------
def test_inner_broadcast_computes_before_broadcasting():
    check_pass("""
        a = @param:a -> float_type, {3}
        b = @param:b -> float_type, {3}
        ab = broadcast[axis=1,out_lens={2, 3, 4}](a) -> float_type, {2, 3, 4}, {0, 1, 0}
        bb = broadcast[axis=1,out_lens={2, 3, 4}](b) -> float_type, {2, 3, 4}, {0, 1, 0}
        y = add(ab,bb) -> float_type, {2, 3, 4}
        r = @return(y)
    """, [only(sa.INNER_BROADCAST)], """
        a = @param:a -> float_type, {3}
        b = @param:b -> float_type, {3}
        ua = unsqueeze[axes={0, 2}](a) -> float_type, {1, 3, 1}
        ub = unsqueeze[axes={0, 2}](b) -> float_type, {1, 3, 1}
        s = add(ua,ub) -> float_type, {1, 3, 1}
        y = multibroadcast[out_lens={2, 3, 4}](s) -> float_type, {2, 3, 4}, {0, 1, 0}
        r = @return(y)
    """)


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
    assert mul.shape.lens == (1, 3, 1)
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
    check_pass("""
        x = @param:x -> float_type, {2, 1, 3}
        c = concat[axis=1](x,x,x) -> float_type, {2, 3, 3}
        r = @return(c)
    """, [only(sa.CONCAT_SAME_INPUT)], """
        x = @param:x -> float_type, {2, 1, 3}
        c = multibroadcast[out_lens={2, 3, 3}](x) -> float_type, {2, 3, 3}, {3, 0, 1}
        r = @return(c)
    """)


def test_concat_op_of_pointwise():
    check_pass("""
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 4}
        z = @param:z -> float_type, {2, 1}
        ex = exp(x) -> float_type, {2, 3}
        ey = exp(y) -> float_type, {2, 4}
        c = concat[axis=1](ex,ey,z) -> float_type, {2, 8}
        r = @return(c)
    """, [only(sa.CONCAT_OP)], """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 4}
        z = @param:z -> float_type, {2, 1}
        xy = concat[axis=1](x,y) -> float_type, {2, 7}
        e = exp(xy) -> float_type, {2, 7}
        c = concat[axis=1](e,z) -> float_type, {2, 8}
        r = @return(c)
    """)


def test_concat_conv_becomes_grouped_conv():
    check_pass(f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        y = @param:y -> float_type, {{1, 2, 3, 3}}
        w1 = @literal{lit(range(4))} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{lit(range(4, 8))} -> float_type, {{2, 2, 1, 1}}
        c1 = {CONV}(x,w1) -> float_type, {{1, 2, 3, 3}}
        c2 = {CONV}(y,w2) -> float_type, {{1, 2, 3, 3}}
        c = concat[axis=1](c1,c2) -> float_type, {{1, 4, 3, 3}}
        r = @return(c)
    """, [only(sa.CONCAT_CONV)], f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        y = @param:y -> float_type, {{1, 2, 3, 3}}
        w1 = @literal{lit(range(4))} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{lit(range(4, 8))} -> float_type, {{2, 2, 1, 1}}
        xy = concat[axis=1](x,y) -> float_type, {{1, 4, 3, 3}}
        w = concat[axis=0](w1,w2) -> float_type, {{4, 2, 1, 1}}
        c = convolution[padding={{0, 0}},stride={{1, 1}},group=2](xy,w) -> float_type, {{1, 4, 3, 3}}
        r = @return(c)
    """)


def test_split_concat():
    check_pass("""
        x = @param:x -> float_type, {2, 6}
        a = slice[axes={1},starts={0},ends={2}](x) -> float_type, {2, 2}, {6, 1}
        b = slice[axes={1},starts={2},ends={6}](x) -> float_type, {2, 4}, {6, 1}
        c = concat[axis=1](a,b) -> float_type, {2, 6}
        r = @return(c)
    """, [only(sa.SPLIT_CONCAT)], """
        x = @param:x -> float_type, {2, 6}
        r = @return(x)
    """)


def test_splits_unary():
    check_pass("""
        x = @param:x -> float_type, {2, 6}
        a = slice[axes={1},starts={0},ends={2}](x) -> float_type, {2, 2}, {6, 1}
        b = slice[axes={1},starts={2},ends={6}](x) -> float_type, {2, 4}, {6, 1}
        ea = exp(a) -> float_type, {2, 2}
        eb = exp(b) -> float_type, {2, 4}
        r = @return(ea,eb)
    """, [only(sa.SPLITS)], """
        x = @param:x -> float_type, {2, 6}
        e = exp(x) -> float_type, {2, 6}
        ea = slice[axes={1},starts={0},ends={2}](e) -> float_type, {2, 2}, {6, 1}
        eb = slice[axes={1},starts={2},ends={6}](e) -> float_type, {2, 4}, {6, 1}
        r = @return(ea,eb)
    """)


def test_splits_binary_with_constants():
    check_pass("""
        x = @param:x -> float_type, {2, 3}
        c1 = @literal{1, 2} -> float_type, {2, 1}
        c2 = @literal{3, 4, 5, 6} -> float_type, {2, 2}
        a = slice[axes={1},starts={0},ends={1}](x) -> float_type, {2, 1}, {3, 1}
        b = slice[axes={1},starts={1},ends={3}](x) -> float_type, {2, 2}, {3, 1}
        ma = mul(a,c1) -> float_type, {2, 1}
        mb = mul(c2,b) -> float_type, {2, 2}
        r = @return(ma,mb)
    """, [only(sa.SPLITS)], """
        x = @param:x -> float_type, {2, 3}
        c1 = @literal{1, 2} -> float_type, {2, 1}
        c2 = @literal{3, 4, 5, 6} -> float_type, {2, 2}
        c = concat[axis=1](c1,c2) -> float_type, {2, 3}
        m = mul(x,c) -> float_type, {2, 3}
        ma = slice[axes={1},starts={0},ends={1}](m) -> float_type, {2, 1}, {3, 1}
        mb = slice[axes={1},starts={1},ends={3}](m) -> float_type, {2, 2}, {3, 1}
        r = @return(ma,mb)
    """)


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


# ---- the whole pass --------------------------------------------------------------------------
def test_simplify_algebra_runs_to_a_fixpoint():
    p = run_on_text("""
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
    """, [SimplifyAlgebra()])
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
    check_pass("""
        a = @param:a -> float_type, {2, 4, 3}
        b = @param:b -> float_type, {2, 3, 5}
        d = dot(a,b) -> float_type, {2, 4, 5}
        s = slice[axes={0, 1, 2},starts={1, 1, 0},ends={2, 3, 2}](d) -> float_type, {1, 2, 2}, {20, 5, 1}
        r = @return(s)
    """, [only(sa.DOT_SLICE)], """
        a = @param:a -> float_type, {2, 4, 3}
        b = @param:b -> float_type, {2, 3, 5}
        sa = slice[axes={0, 1},starts={1, 1},ends={2, 3}](a) -> float_type, {1, 2, 3}, {12, 3, 1}
        sb = slice[axes={0, 2},starts={1, 0},ends={2, 2}](b) -> float_type, {1, 3, 2}, {15, 5, 1}
        s = dot(sa,sb) -> float_type, {1, 2, 2}
        r = @return(s)
    """)


def test_eliminate_zero_point():
    check_pass("""
        x = @param:x -> float_type, {4}
        s = @literal{0.5, 0.25, 1, 2} -> float_type, {4}
        z = @literal{0, 0, 0, 0} -> int8_type, {4}
        q = quantizelinear(x,s,z) -> int8_type, {4}
        d = dequantizelinear(q,s,z) -> float_type, {4}
        r = @return(d)
    """, [only(sa.ZERO_POINT)], """
        x = @param:x -> float_type, {4}
        s = @literal{0.5, 0.25, 1, 2} -> float_type, {4}
        q = quantizelinear[out_type=int8](x,s) -> int8_type, {4}
        d = dequantizelinear(q,s) -> float_type, {4}
        r = @return(d)
    """)
