"""rewrite_topk: a topk over a long axis splits into per-group topks and a final topk."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op, registered_ops
from migx_explore.compiler.pass_infra import run_passes
from migx_explore.compiler.passes.dead_code_elimination import DeadCodeElimination
from migx_explore.compiler.passes.rewrite_topk import LargeTopk, RewriteTopk, split_dim
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.testing import assert_same_outputs

pytestmark = pytest.mark.skipif(not {"topk", "gathernd"} <= set(registered_ops()), reason="topk not registered")


def topk_program(lens, k, axis, largest=True, dtype="float32") -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of(dtype, lens))
    t = m.add_instruction(Op("topk", k=k, axis=axis, largest=largest), [x])
    m.add_return([m.add_instruction(Op("get_tuple_elem", index=i), [t]) for i in (0, 1)])
    return p


def test_split_dim_matches_migraphx():
    assert split_dim(48, 12) == (4, 12)
    assert split_dim(8192 * 3, 4096) == (8, 3072)  # divides while the rest is above min_size
    assert split_dim(13 * 4, 2) == (4, 13)  # 13 has no small factor: stop


@pytest.mark.parametrize(
    "lens, k, axis, largest",
    [
        ((2, 48), 3, 1, True),
        ((2, 48), 3, -1, False),
        ((40, 3), 2, 0, True),
        ((2, 30, 2), 4, 1, True),
    ],
)
def test_large_topk_splits_and_agrees(lens, k, axis, largest):
    p = topk_program(lens, k, axis, largest)
    q = p.copy()
    run_passes(q, [RewriteTopk(split_threshold=16), DeadCodeElimination()])
    live = [i for i in q.main if i.name == "topk"]
    assert len(live) == 2 and any(i.name == "gathernd" for i in q.main)
    assert_same_outputs(p, q, rtol=0, atol=0)


def test_ties_keep_the_lowest_index():
    p = topk_program((1, 48), 5, 1)
    q = p.copy()
    run_passes(q, [RewriteTopk(split_threshold=16)])
    x = np.zeros((1, 48), np.float32)
    x[0, [3, 17, 30, 45]] = 1.0  # four ones, then zeros tie for the fifth place
    assert_same_outputs(p, q, inputs={"x": x}, rtol=0, atol=0)


def test_short_axis_is_left_alone_with_a_reason():
    p = topk_program((2, 48), 3, 1)
    (miss,) = [nm for nm in near_misses(p.main, LargeTopk(8192)) if nm.op == "topk"]
    assert "below split_threshold 8192" in miss.reason
    assert not run_passes(p, [RewriteTopk()]).records[0].changed
