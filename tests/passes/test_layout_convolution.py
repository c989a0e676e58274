"""layout_convolution: NHWC convolutions with channels_last, nested steps, output layout kept."""

from __future__ import annotations

from migx_explore.compiler import parse
from migx_explore.compiler.pass_infra import PassManager, make_numeric_config, make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs, check_pass

CONV2 = """
    x = @param:x -> float_type, {1, 3, 8, 8}
    w1 = @param:w1 -> float_type, {4, 3, 3, 3}
    w2 = @param:w2 -> float_type, {5, 4, 1, 1}
    @3 = convolution[padding={1, 1},stride={1, 1}](x, w1) -> float_type, {1, 4, 8, 8}
    @4 = relu(@3) -> float_type, {1, 4, 8, 8}
    @5 = convolution[padding={0, 0},stride={1, 1}](@4, w2) -> float_type, {1, 5, 8, 8}
    @6 = @return(@5)
"""

NHWC = """
    x = @param:x -> float_type, {1, 3, 8, 8}
    w1 = @param:w1 -> float_type, {4, 3, 3, 3}
    w2 = @param:w2 -> float_type, {5, 4, 1, 1}
    @3 = layout[permutation={0, 2, 3, 1}](x) -> float_type, {1, 3, 8, 8}, {192, 1, 24, 3}
    @4 = layout[permutation={0, 2, 3, 1}](w1) -> float_type, {4, 3, 3, 3}, {27, 1, 9, 3}
    @5 = convolution[padding={1, 1},stride={1, 1}](@3, @4) -> float_type, {1, 4, 8, 8}, {256, 1, 32, 4}
    @6 = relu(@5) -> float_type, {1, 4, 8, 8}, {256, 1, 32, 4}
    @7 = layout[permutation={0, 2, 3, 1}](w2) -> float_type, {5, 4, 1, 1}, {4, 1, 4, 4}
    @8 = convolution[padding={0, 0},stride={1, 1}](@6, @7) -> float_type, {1, 5, 8, 8}, {320, 1, 40, 5}
    @9 = layout[permutation={0, 1, 2, 3}](@8) -> float_type, {1, 5, 8, 8}
    @10 = @return(@9)
"""


def test_channels_last_gives_nhwc_convolutions_and_keeps_the_output_layout():
    check_pass(CONV2, [make_pass("layout_convolution", channels_last=True)], NHWC, rtol=1e-4, atol=1e-5)


def test_channels_last_off_leaves_the_program_unchanged():
    check_pass(CONV2, [make_pass("layout_convolution")], CONV2)


def test_nested_steps_are_children_and_numerics_hold():
    p = parse(CONV2)
    trace = PassManager(numeric=make_numeric_config(p, rtol=1e-4, atol=1e-5)).run(
        p, [make_pass("layout_convolution", channels_last=True)]
    )
    top = trace.records[0]
    assert top.numeric.ok
    assert [trace.records[i].name for i in top.children] == [
        "preserve_output_layout",
        "transform_convolutions",
        "dead_code_elimination",
        "eliminate_contiguous",
        "dead_code_elimination",
        "remove_layout",
        "dead_code_elimination",
    ]


def test_convolution_keeps_its_id_and_group_convolutions_keep_the_default_layout():
    text = """
        x = @param:x -> float_type, {1, 4, 6, 6}
        w = @param:w -> float_type, {4, 1, 3, 3}
        @2 = convolution[padding={1, 1},stride={1, 1},group=4](x, w) -> float_type, {1, 4, 6, 6}
        @3 = @return(@2)
    """
    q = parse(text)
    assert not run_passes(q, [make_pass("layout_convolution", channels_last=True)]).records[0].changed
    q = parse(CONV2)
    ids = [i.id for i in q.main if i.name == "convolution"]
    run_passes(q, [make_pass("layout_convolution", channels_last=True)])
    assert [i.id for i in q.main if i.name == "convolution"] == ids


def test_convolution_feeding_a_reshape_keeps_its_contiguous():
    text = """
        x = @param:x -> float_type, {1, 3, 4, 4}
        w = @param:w -> float_type, {2, 3, 1, 1}
        @2 = convolution[padding={0, 0},stride={1, 1}](x, w) -> float_type, {1, 2, 4, 4}
        @3 = reshape[dims={2, 16}](@2) -> float_type, {2, 16}
        @4 = @return(@3)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [make_pass("layout_convolution", channels_last=True)])
    r = next(i for i in q.main if i.name == "reshape")
    assert r.inputs[0].name == "contiguous"
    assert_same_outputs(p, q, rtol=1e-5, atol=1e-6)
