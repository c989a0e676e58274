"""auto_contiguous."""

from __future__ import annotations

from migx_explore.compiler import parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import check_pass

AC = make_pass("auto_contiguous")


def test_contiguous_before_require_std_shape_inputs_and_after_strided_results():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        @1 = transpose[permutation={1, 0}](x) -> float_type, {3, 2}, {1, 3}
        @2 = reshape[dims={6}](@1) -> float_type, {6}
        @3 = transpose[permutation={1, 0}](x) -> float_type, {3, 2}, {1, 3}
        @4 = @return(@2, @3)
    """,
        [AC],
        """
        x = @param:x -> float_type, {2, 3}
        @1 = transpose[permutation={1, 0}](x) -> float_type, {3, 2}, {1, 3}
        @2 = contiguous(@1) -> float_type, {3, 2}
        @3 = reshape[dims={6}](@2) -> float_type, {6}
        @4 = transpose[permutation={1, 0}](x) -> float_type, {3, 2}, {1, 3}
        @5 = contiguous(@4) -> float_type, {3, 2}
        @6 = @return(@3, @5)
    """,
    )


def test_standard_programs_and_layouts_are_left_alone():
    text = """
        x = @param:x -> float_type, {1, 2, 2, 2}
        @1 = layout[permutation={0, 2, 3, 1}](x) -> float_type, {1, 2, 2, 2}, {8, 1, 4, 2}
        @2 = relu(x) -> float_type, {1, 2, 2, 2}
        @3 = reshape[dims={8}](@2) -> float_type, {8}
        @4 = @return(@3, @1)
    """
    assert not run_passes(parse(text), [AC]).records[0].changed


def test_broadcast_feeding_an_op_is_made_contiguous():
    q = parse("""
        x = @param:x -> float_type, {3}
        y = @param:y -> float_type, {2, 3}
        @2 = multibroadcast[out_lens={2, 3}](x) -> float_type, {2, 3}, {0, 1}
        @3 = add(@2, y) -> float_type, {2, 3}
        @4 = @return(@3)
    """)
    run_passes(q, [AC])
    assert [i.name for i in q.main if not i.is_builtin()] == ["multibroadcast", "contiguous", "add"]
    assert run_passes(q, [AC]).records[0].noop  # a second run changes nothing
