"""rewrite_low_precision: x^2 / n -> (x / n) * x in fp16."""

from __future__ import annotations

import numpy as np
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


@pytest.mark.parametrize(
    "values, dtype, beyond",
    [
        ([1.0, -2.0, 65504.0], "float32", False),  # half's max itself fits
        ([1.0, -65505.0], "float32", True),
        ([np.inf, -np.inf, np.nan, 3.0], "float32", False),  # only finite elements count
        ([np.nan, -1e6], "float32", True),
        ([-3.4e38, 0.0], "float32", True),  # an HF mask constant
        ([0.5, -60000.0], "float16", False),
        ([], "float32", False),
    ],
)
def test_truncate_float_finds_constants_beyond_the_low_type(values, dtype, beyond):
    from migx_explore.compiler.passes.truncate_float import _beyond

    data = np.array(values, dtype=dtype)
    assert _beyond(data, 65504.0) == beyond
    ref = np.asarray(data, np.float64)
    assert _beyond(data, 65504.0) == bool(data.size and np.any(np.abs(ref[np.isfinite(ref)]) > 65504.0))
