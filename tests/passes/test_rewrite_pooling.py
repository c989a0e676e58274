"""rewrite_pooling: global pooling -> reduce, dilated pooling -> gathers, lrn -> pooling."""

from __future__ import annotations

import pytest

from migx_explore.compiler.op import registered_ops
from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes.rewrite_pooling import RewritePooling
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text

X = "x = @param:x -> float_type, {1, 2, 3, 3}"


def live_names(p) -> list[str]:
    """Ops the outputs depend on (rewrite passes leave the old instruction for DCE)."""
    seen, stack = set(), list(p.main.output_instructions())
    while stack:
        i = stack.pop()
        if i.id not in seen:
            seen.add(i.id)
            stack.extend(i.inputs)
    return [i.name for i in p.main if i.id in seen and not i.is_builtin()]


@pytest.mark.parametrize("mode, reduce", [("average", "reduce_mean"), ("max", "reduce_max")])
def test_global_pooling_becomes_reduce(mode, reduce):
    check_pass(
        f"""
        {X}
        y = pooling[mode={mode},padding={{0, 0}},stride={{1, 1}},lengths={{3, 3}}](x) -> float_type, {{1, 2, 1, 1}}
        r = @return(y)
    """,
        [RewritePooling()],
        f"""
        {X}
        y = {reduce}[axes={{2, 3}}](x) -> float_type, {{1, 2, 1, 1}}
        r = @return(y)
    """,
    )


@pytest.mark.parametrize(
    "pool",
    [
        "pooling[mode=lpnorm,padding={0, 0},stride={1, 1},lengths={3, 3}](x) -> float_type, {1, 2, 1, 1}",
        "pooling[mode=max,padding={0, 0},stride={1, 1},lengths={2, 2}](x) -> float_type, {1, 2, 2, 2}",
        "pooling[mode=average,padding={1, 1},stride={1, 1},lengths={3, 3}](x) -> float_type, {1, 2, 3, 3}",
    ],
)
def test_other_pooling_is_kept(pool):
    text = f"""
        {X}
        y = {pool}
        r = @return(y)
    """
    check_pass(text, [RewritePooling()], text)


needs_gather = pytest.mark.skipif(not {"gather", "pad"} <= set(registered_ops()), reason="gather/pad not registered")


@needs_gather
@pytest.mark.parametrize(
    "mode, padding, out",
    [
        ("max", "{0, 0}", "{1, 2, 3, 1}"),
        ("average", "{0, 0}", "{1, 2, 3, 1}"),
        ("max", "{1, 1}", "{1, 2, 5, 2}"),
    ],
)
def test_dilated_pooling_becomes_gathers(mode, padding, out):
    pool = f"pooling[mode={mode},padding={padding},stride={{1, 2}},lengths={{3, 2}},dilations={{2, 3}}](x)"
    text = f"""
        x = @param:x -> float_type, {{1, 2, 7, 5}}
        y = {pool} -> float_type, {out}
        r = @return(y)
    """
    p = run_on_text(text, [RewritePooling()])
    pool = p.main.output_instructions()[0]
    assert pool.name == "pooling" and pool.op["dilations"] == (1, 1) and pool.op["stride"] == (3, 2)
    assert pool.inputs[0].name == "gather"
    assert_same_outputs(parse(text), p)


def test_lrn_becomes_pooling_formula_only_when_asked():
    text = """
        x = @param:x -> float_type, {1, 5, 2, 3}
        y = lrn[alpha=0.001,beta=0.75,bias=2,size=3](x) -> float_type, {1, 5, 2, 3}
        r = @return(y)
    """
    check_pass(text, [RewritePooling()], text)
    p = run_on_text(text, [RewritePooling(rewrite_lrn=True)])
    names = live_names(p)
    assert "lrn" not in names and "pooling" in names
    pool = next(i for i in p.main if i.name == "pooling")
    assert pool.op["count_include_pad"] and pool.op["lengths"] == (1, 3)
    assert_same_outputs(parse(text), p)
