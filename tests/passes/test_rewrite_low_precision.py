"""rewrite_low_precision: x^2 / n -> (x / n) * x in fp16."""

from __future__ import annotations

import pytest

from migx_explore.compiler.passes.rewrite_low_precision import RewriteLowPrecision
from migx_explore.compiler.testing import check_pass


@pytest.mark.parametrize("square", ["pow(x,two)", "mul(x,x)"])
def test_fp16_square_over_constant(square):
    check_pass(
        f"""
        x = @param:x -> half_type, {{3}}
        two = @literal{{2, 2, 2}} -> half_type, {{3}}
        n = @literal{{4, 8, 16}} -> half_type, {{3}}
        p = {square} -> half_type, {{3}}
        y = div(p,n) -> half_type, {{3}}
        r = @return(y)
    """,
        [RewriteLowPrecision()],
        f"""
        x = @param:x -> half_type, {{3}}
        two = @literal{{2, 2, 2}} -> half_type, {{3}}
        n = @literal{{4, 8, 16}} -> half_type, {{3}}
        p = {square} -> half_type, {{3}}
        d = div(x,n) -> half_type, {{3}}
        y = mul(d,x) -> half_type, {{3}}
        r = @return(y)
    """,
        rtol=2e-3,
        atol=1e-3,
    )


def test_fp32_is_left_alone():
    text = """
        x = @param:x -> float_type, {3}
        n = @literal{4, 8, 16} -> float_type, {3}
        p = mul(x,x) -> float_type, {3}
        y = div(p,n) -> float_type, {3}
        r = @return(y)
    """
    check_pass(text, [RewriteLowPrecision()], text)
