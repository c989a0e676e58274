"""rewrite_resize: nearest / linear resize -> per-axis gathers (and lerps)."""

from __future__ import annotations

import pytest

from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op, registered_ops
from migx_explore.compiler.pass_infra import run_passes
from migx_explore.compiler.passes.dead_code_elimination import DeadCodeElimination
from migx_explore.compiler.passes.rewrite_resize import ResizeToGather, RewriteResize
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.testing import assert_same_outputs

pytestmark = pytest.mark.skipif(not {"resize", "gather"} <= set(registered_ops()), reason="resize not registered")


def resize_program(in_lens, dtype="float32", **attrs) -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of(dtype, in_lens))
    m.add_return([m.add_instruction(Op("resize", **attrs), [x])])
    return p


def rewritten(p: Program, **opts) -> Program:
    q = p.copy()
    run_passes(q, [RewriteResize(**opts), DeadCodeElimination()])
    return q


def names(p: Program) -> list[str]:
    return [i.name for i in p.main if not i.is_builtin()]


@pytest.mark.parametrize(
    "attrs",
    [
        dict(sizes=[1, 1, 4, 6], mode="nearest"),
        dict(sizes=[1, 1, 4, 6], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        dict(sizes=[1, 1, 1, 1], mode="nearest"),
        dict(
            sizes=[1, 1, 6, 9],
            mode="nearest",
            coordinate_transformation_mode="align_corners",
            nearest_mode="round_prefer_ceil",
        ),
    ],
)
def test_nearest_resize_becomes_gathers(attrs):
    p = resize_program((1, 1, 2, 3), **attrs)
    q = rewritten(p)
    assert "resize" not in names(q) and set(names(q)) == {"gather"}
    assert_same_outputs(p, q, rtol=0, atol=0)


@pytest.mark.parametrize(
    "attrs, lens",
    [
        (dict(sizes=[1, 1, 2, 2], mode="linear"), (1, 1, 4, 4)),
        (dict(sizes=[1, 2, 3, 2], mode="linear", coordinate_transformation_mode="align_corners"), (1, 2, 6, 4)),
        (dict(sizes=[2, 5], mode="linear"), (4, 5)),
    ],
)
def test_linear_downsampling_becomes_gathers_and_lerps(attrs, lens):
    p = resize_program(lens, **attrs)
    q = rewritten(p, affine_only=True)
    assert "resize" not in names(q) and {"gather", "mul", "add"} <= set(names(q))
    assert_same_outputs(p, q, rtol=1e-5, atol=1e-6)


def test_affine_only_keeps_linear_upsampling_and_odd_ratios():
    up = resize_program((1, 1, 2, 2), sizes=[1, 1, 4, 4], mode="linear")
    odd = resize_program((1, 1, 3, 3), sizes=[1, 1, 5, 5], mode="nearest")
    for p in (up, odd):
        assert "resize" in names(rewritten(p, affine_only=True))
        (miss,) = [nm for nm in near_misses(p.main, ResizeToGather(True)) if nm.op == "resize"]
        assert "affine" in miss.reason
    for p in (up, odd):
        q = rewritten(p, affine_only=False)
        assert "resize" not in names(q)
        assert_same_outputs(p, q, rtol=1e-5, atol=1e-6)


def test_unit_scales_vanish_and_cubic_stays():
    same = resize_program((1, 1, 3, 3), sizes=[1, 1, 3, 3], mode="linear")
    assert names(rewritten(same)) == []
    cubic = resize_program((1, 1, 4, 4), sizes=[1, 1, 2, 2], mode="cubic")
    assert names(rewritten(cubic)) == ["resize"]


def test_linear_integer_resize_is_kept():
    p = resize_program((1, 1, 4, 4), dtype="int32", sizes=[1, 1, 2, 2], mode="linear")
    assert names(rewritten(p)) == ["resize"]
