"""find_reshape_dot moves a reshape past a dot only when it touches batch axes (the left operand's
M axis may absorb them); a reshape that changes a GEMM axis stays (issue 24: a 3-input Einsum
crashed simplify_reshapes with "reshape: [2, 2, 1] cannot become [1, 4, 2]")."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate
from migx_explore.compiler.parser import parse
from migx_explore.compiler.pass_infra import make_pass, run_passes

BOTH_RESHAPED = """
module: "main"
a = @param:a -> float32, {2, 2, 2}, {4, 2, 1}
b = @param:b -> float32, {2, 2, 1}, {2, 1, 1}
@2 = reshape[dims={1, 4, 2}](a) -> float32, {1, 4, 2}, {8, 2, 1}
@3 = reshape[dims={1, 2, 2}](b) -> float32, {1, 2, 2}, {4, 2, 1}
@4 = dot(@2,@3) -> float32, {1, 4, 2}, {8, 2, 1}
@5 = @return(@4)
"""

BATCH_ONLY = """
module: "main"
a = @param:a -> float32, {2, 3, 4, 5}, {60, 20, 5, 1}
b = @param:b -> float32, {2, 3, 5, 2}, {30, 10, 2, 1}
@2 = reshape[dims={6, 4, 5}](a) -> float32, {6, 4, 5}, {20, 5, 1}
@3 = reshape[dims={6, 5, 2}](b) -> float32, {6, 5, 2}, {10, 2, 1}
@4 = dot(@2,@3) -> float32, {6, 4, 2}, {8, 2, 1}
@5 = @return(@4)
"""


def _run(text: str) -> tuple[list[str], bool]:
    p = parse(text)
    rng = np.random.default_rng(0)
    feed = {q.param_name: rng.normal(size=q.shape.lens).astype(np.float32) for q in p.main.params()}
    before = evaluate(p, feed)
    run_passes(p, [make_pass("simplify_reshapes")])
    after = evaluate(p, feed)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-6)
    dot = next(i for i in p.main if i.name == "dot")
    return [i.name for i in dot.inputs], True


def test_a_reshape_that_changes_the_right_operands_n_axis_stays():
    names, _ = _run(BOTH_RESHAPED)
    assert names == ["reshape", "reshape"]


def test_reshapes_of_batch_axes_only_still_move_past_the_dot():
    names, _ = _run(BATCH_ONLY)
    assert names == ["@param", "@param"]
