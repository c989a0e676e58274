"""Helpers the simplify_algebra test files share (test_simplify_algebra, test_algebra_conv,
test_algebra_concat)."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler.pass_infra import FunctionPass
from migx_explore.compiler.passes.rewrite import sweep

CONV = "convolution[padding={0, 0},stride={1, 1}]"
X23 = "x = @param:x -> float_type, {2, 3}"


def only(*rules):
    """A pass that sweeps just `rules` (then DCE): one finder tested alone."""
    return FunctionPass(fn=lambda m: sweep(m, rules), label="rules")


def lit(values) -> str:
    return "{" + ", ".join(str(v) for v in np.asarray(values).reshape(-1).tolist()) + "}"
