"""rewrite_gelu: erf/tanh GELU -> x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3)))."""

from __future__ import annotations

import math

import pytest

from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes.rewrite_gelu import GELU_ERF, RewriteGelu
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import assert_same_outputs, run_on_text


def _consts(t: str, **values: float) -> str:
    lines = []
    for k, v in values.items():
        lines.append(f"{k}l = @literal{{{v!r}}} -> {t}, {{1}}")
        lines.append(f"{k} = multibroadcast[out_lens={{2, 3}}]({k}l) -> {t}, {{2, 3}}, {{0, 0}}")
    return "\n".join(lines)


def erf_gelu(t: str = "half_type", outer_x: str = "x") -> str:
    return f"""
        x = @param:x -> {t}, {{2, 3}}
        z = @param:z -> {t}, {{2, 3}}
        {_consts(t, c=math.sqrt(0.5), h=0.5, o=1.0)}
        m1 = mul(x,c) -> {t}, {{2, 3}}
        e = erf(m1) -> {t}, {{2, 3}}
        a = add(e,o) -> {t}, {{2, 3}}
        m2 = mul({outer_x},h) -> {t}, {{2, 3}}
        y = mul(m2,a) -> {t}, {{2, 3}}
        r = @return(y)
    """


def tanh_gelu(t: str = "float_type", form: str = "v1") -> str:
    consts = _consts(t, three=3.0, c1=0.044715, k=math.sqrt(2 / math.pi), h=0.5, o=1.0, f1=0.797885, f2=0.035677)
    head = f"""
        x = @param:x -> {t}, {{2, 3}}
        {consts}
        p3 = pow(x,three) -> {t}, {{2, 3}}
    """
    if form == "v1":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        body = f"""
        m = mul(p3,c1) -> {t}, {{2, 3}}
        s = add(x,m) -> {t}, {{2, 3}}
        g = mul(k,s) -> {t}, {{2, 3}}
        th = tanh(g) -> {t}, {{2, 3}}
        a = add(o,th) -> {t}, {{2, 3}}
        hx = mul(h,x) -> {t}, {{2, 3}}
        y = mul(a,hx) -> {t}, {{2, 3}}
        """
    else:  # x (0.5 + 0.5 tanh(0.797885 x + 0.035677 x^3))
        body = f"""
        m = mul(f2,p3) -> {t}, {{2, 3}}
        n = mul(x,f1) -> {t}, {{2, 3}}
        g = add(n,m) -> {t}, {{2, 3}}
        th = tanh(g) -> {t}, {{2, 3}}
        ht = mul(th,h) -> {t}, {{2, 3}}
        a = add(h,ht) -> {t}, {{2, 3}}
        y = mul(x,a) -> {t}, {{2, 3}}
        """
    return head + body + "r = @return(y)\n"


def _ops(p):
    """Ops the output depends on (the pass leaves the old chain for DCE)."""
    seen, stack = set(), list(p.main.output_instructions())
    while stack:
        i = stack.pop()
        if i.id not in seen:
            seen.add(i.id)
            stack.extend(i.inputs)
    return {i.name for i in p.main if i.id in seen and not i.is_builtin()}


def test_fast_math_rewrites_fp16_erf_gelu():
    p = run_on_text(erf_gelu(), [RewriteGelu(fast_math=True)])
    out = p.main.output_instructions()[0]
    assert out.name == "div" and out.inputs[0].is_param()
    assert "exp" in _ops(p)
    # the tanh form approximates erf-GELU to ~1e-3; fp16 rounding is of the same order
    assert_same_outputs(parse(erf_gelu()), p, rtol=1e-2, atol=5e-3)


def test_fast_math_leaves_fp32_erf_gelu_with_a_reason():
    text = erf_gelu("float_type")
    p = run_on_text(text, [RewriteGelu(fast_math=True)])
    assert p.main.output_instructions()[0].name == "mul"
    reasons = [nm.reason for nm in near_misses(parse(text).main, GELU_ERF)]
    assert any("fp16 only" in r for r in reasons), reasons


def test_multiplier_must_be_the_erf_input():
    p = run_on_text(erf_gelu(outer_x="z"), [RewriteGelu(fast_math=True)])
    assert p.main.output_instructions()[0].name == "mul"


@pytest.mark.parametrize("form", ["v1", "v0"])
def test_tanh_gelu_is_rearranged_without_fast_math(form):
    text = tanh_gelu(form=form)
    p = run_on_text(text, [RewriteGelu(fast_math=False)])
    assert "tanh" not in _ops(p) and "exp" in _ops(p)
    assert p.main.output_instructions()[0].name == "div"
    assert_same_outputs(parse(text), p, rtol=1e-5, atol=1e-6)


def test_fast_math_rewrites_tanh_gelu_only_in_fp16():
    assert run_on_text(tanh_gelu(), [RewriteGelu(fast_math=True)]).main.output_instructions()[0].name == "mul"
    p = run_on_text(tanh_gelu("half_type"), [RewriteGelu(fast_math=True)])
    assert p.main.output_instructions()[0].name == "div"
    assert_same_outputs(parse(tanh_gelu("half_type")), p, rtol=1e-2, atol=5e-3)


def test_erf_gelu_is_left_without_fast_math():
    text = erf_gelu()
    assert run_on_text(text, [RewriteGelu(fast_math=False)]).main.output_instructions()[0].name == "mul"
