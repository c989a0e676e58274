"""eliminate_convert: nested and nop converts (no DCE inside, as in MIGraphX: dead converts stay)."""

from __future__ import annotations

from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes.eliminate_convert import EliminateConvert, NestedConvert
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import check_pass


def test_round_trip_through_fp16_vanishes():
    check_pass(
        """
        x = @param:x -> float_type, {3}
        a = convert[target_type=half](x) -> half_type, {3}
        b = convert[target_type=float](a) -> float_type, {3}
        y = exp(b) -> float_type, {3}
        r = @return(y)
    """,
        [EliminateConvert()],
        """
        x = @param:x -> float_type, {3}
        a = convert[target_type=half](x) -> half_type, {3}
        b = convert[target_type=float](a) -> float_type, {3}
        y = exp(x) -> float_type, {3}
        r = @return(y)
    """,
        rtol=1e-3,
        atol=1e-3,
    )


def test_chain_collapses_to_one_convert():
    check_pass(
        """
        x = @param:x -> half_type, {3}
        a = convert[target_type=float](x) -> float_type, {3}
        b = convert[target_type=double](a) -> double_type, {3}
        r = @return(b)
    """,
        [EliminateConvert()],
        """
        x = @param:x -> half_type, {3}
        a = convert[target_type=float](x) -> float_type, {3}
        b = convert[target_type=double](x) -> double_type, {3}
        r = @return(b)
    """,
    )


def test_nop_convert():
    check_pass(
        """
        x = @param:x -> int32_type, {3}
        a = convert[target_type=int32](x) -> int32_type, {3}
        r = @return(a)
    """,
        [EliminateConvert()],
        """
        x = @param:x -> int32_type, {3}
        a = convert[target_type=int32](x) -> int32_type, {3}
        r = @return(x)
    """,
    )


def test_truncating_chain_is_kept_with_a_reason():
    text = """
        x = @param:x -> float_type, {3}
        a = convert[target_type=int32](x) -> int32_type, {3}
        b = convert[target_type=float](a) -> float_type, {3}
        r = @return(b)
    """
    check_pass(text, [EliminateConvert()], text)
    misses = near_misses(parse(text).main, NestedConvert())
    assert any("converts float32 through int32, which changes values" in nm.reason for nm in misses), misses


def test_narrowing_integer_chain_is_kept():
    text = """
        x = @param:x -> int32_type, {3}
        a = convert[target_type=int8](x) -> int8_type, {3}
        b = convert[target_type=int64](a) -> int64_type, {3}
        r = @return(b)
    """
    check_pass(text, [EliminateConvert()], text)
