"""The `if` op and inline_module."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.errors import ShapeError
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import check_pass

IF = """
    module: "main"
    x = @param:x -> float_type, {3}
    c = @literal{COND} -> bool_type, {1}
    @2 = if(c, x), [then_0, else_0] -> float_type, {3}
    @3 = @return(@2)
    module: "then_0"
    a = @param:a -> float_type, {3}
    @1 = exp(a) -> float_type, {3}
    @2 = @return(@1)
    module: "else_0"
    a = @param:a -> float_type, {3}
    @1 = neg(a) -> float_type, {3}
    @2 = @return(@1)
"""


@pytest.mark.parametrize("cond,op", [("true", "exp"), ("false", "neg")])
def test_constant_condition_inlines_the_chosen_branch(cond, op):
    check_pass(
        IF.replace("COND", cond),
        [make_pass("inline_module"), make_pass("dead_code_elimination")],
        f"""
        x = @param:x -> float_type, {{3}}
        @1 = {op}(x) -> float_type, {{3}}
        @2 = @return(@1)
    """,
    )


def test_if_evaluates_the_branch_its_condition_picks():
    text = IF.replace("c = @literal{COND} -> bool_type, {1}", "c = @param:c -> bool_type, {1}")
    p = parse(text)
    x = np.array([0.0, 1.0, 2.0], np.float32)
    np.testing.assert_allclose(evaluate(p, {"x": x, "c": np.array([True])})[0], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(evaluate(p, {"x": x, "c": np.array([False])})[0], -x)
    assert not run_passes(p, [make_pass("inline_module")]).records[0].changed  # not constant


def test_tuple_valued_if_is_inlined_through_get_tuple_elem():
    text = """
        module: "main"
        x = @param:x -> float_type, {2}
        c = @literal{1} -> bool_type, {1}
        @2 = if(c, x), [t, e] -> tuple_type, {(float_type, {2}), (float_type, {2})}
        @3 = get_tuple_elem[index=1](@2) -> float_type, {2}
        @4 = @return(@3)
        module: "t"
        a = @param:a -> float_type, {2}
        @1 = exp(a) -> float_type, {2}
        @2 = neg(a) -> float_type, {2}
        @3 = @return(@1, @2)
        module: "e"
        a = @param:a -> float_type, {2}
        @1 = @return(a, a)
    """
    check_pass(
        text,
        [make_pass("inline_module"), make_pass("dead_code_elimination")],
        """
        x = @param:x -> float_type, {2}
        @1 = neg(x) -> float_type, {2}
        @2 = @return(@1)
    """,
    )


def test_branches_must_agree():
    bad = IF.replace("COND", "true").replace(
        "@1 = neg(a) -> float_type, {3}\n    @2 = @return(@1)", "@1 = @return(a, a)"
    )
    with pytest.raises(Exception, match="different shapes"):
        parse(bad)
    assert issubclass(ShapeError, Exception)
