"""The C++-subset reader (scripts/migraphx_cpp*.py): basic_ops.hpp literals and the
"keeps the outputs" EXPECT become transcribable cases."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from transcribe_migraphx_tests import transcribe_case  # noqa: E402

PASSES = [("simplify_reshapes", {})]


def test_get_2x2_literal_and_instruction_count():
    body = """
    migraphx::program p;
    auto* mm = p.get_main_module();
    auto l  = mm->add_literal(get_2x2());
    auto t1 = mm->add_instruction(migraphx::make_op("transpose", {{"permutation", {1, 0}}}), l);
    auto t2 = mm->add_instruction(migraphx::make_op("transpose", {{"permutation", {1, 0}}}), t1);
    mm->add_return({t2});
    run_pass(*mm);
    EXPECT(std::distance(mm->begin(), mm->end()) == 2);
    """
    (case,) = transcribe_case("double_transpose", body, PASSES)
    assert case["count"] == 2
    assert "@literal{1, 2, 3, 4} -> float32, {2, 2}" in case["before"]


def test_output_shapes_kept_becomes_a_same_values_check():
    body = """
    migraphx::module m1;
    {
        auto x = m1.add_parameter("x", {migraphx::shape::float_type, {12}});
        auto r = m1.add_instruction(migraphx::make_op("reshape", {{"dims", {3, 4}}}), x);
        m1.add_return({r});
    }
    auto m2 = m1;
    run_pass(m1);
    EXPECT(m1.get_output_shapes() == m2.get_output_shapes());
    """
    (case,) = transcribe_case("keeps_outputs", body, PASSES)
    assert case["checks"] == ("same_values",)
    assert case["expected"] == ""
