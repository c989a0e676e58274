"""Printer / parser round trip and the reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from ir_samples import FUSED

from migx_explore.compiler import Op, Program, Shape, evaluate, parse, print_program, random_inputs
from migx_explore.compiler.errors import EvalError, ParseError


def test_fused_submodule_parses_prints_and_evaluates():
    p = parse(FUSED)
    assert p.modules["main:pointwise0"].bypass
    assert parse(print_program(p)) == p
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = evaluate(p, {"x": x, "y": x})[0]
    np.testing.assert_array_equal(out, (x + x) * 2)


def test_printer_matches_migraphx_style():
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", (1, 3, 8, 8)))
    w = m.add_literal(np.zeros((4, 3, 3, 3), np.float32))
    c = m.add_instruction(Op("convolution", padding=(1, 1)), [x, w])
    m.add_return([c])
    lines = str(p).splitlines()
    assert lines[0] == 'module: "main"'
    assert lines[1] == "x = @param:x -> float32, {1, 3, 8, 8}, {192, 64, 8, 1}"
    assert lines[2] == "@1 = @literal{ ... } -> float32, {4, 3, 3, 3}, {27, 9, 3, 1}"
    assert lines[3] == (
        "@2 = convolution[padding={1, 1},stride={1, 1}](x,@1) -> float32, {1, 4, 8, 8}, {256, 64, 8, 1}"
    )
    assert lines[4] == "@3 = @return(@2)"


def test_types_print_as_the_api_names_them_and_parse_in_both_spellings():
    # MIGraphX prints float_type / half_type; we print the API's float32 / float16 (one spelling
    # from Shape.of("float32") to convert[target_type=float16] to the printed line) and read both.
    migraphx_text = """
x = @param:x -> float_type, {4}, {1}
@1 = convert[target_type=half_type](x) -> half_type, {4}, {1}
@2 = @return(@1)
"""
    p = parse(migraphx_text)
    text = print_program(p)
    assert "@1 = convert[target_type=float16](x) -> float16, {4}, {1}" in text and "float_type" not in text
    assert parse(text) == p


def test_full_print_round_trips_float_values_exactly():
    p = Program()
    vals = np.array([0.1, -1e-30, 3.4e38, np.inf, -np.inf, 1 / 3], np.float32)
    lit = p.main.add_literal(vals)
    p.main.add_return([lit])
    q = parse(print_program(p, full=True))
    assert q == p
    np.testing.assert_array_equal(q.main.first.literal.data, vals)


def test_parse_errors_name_the_line():
    bad = "x = @param:x -> float_type, {2}, {1}\n@1 = relu(y) -> float_type, {2}, {1}\n"
    with pytest.raises(ParseError, match=r"line 2: .*unknown name 'y'"):
        parse(bad)
    wrong_shape = "x = @param:x -> float_type, {2}, {1}\n@1 = relu(x) -> float_type, {3}, {1}\n"
    with pytest.raises(ParseError, match="printed shape .* differs from computed"):
        parse(wrong_shape)
    with pytest.raises(ParseError, match="elided"):
        parse("@0 = @literal{ ... } -> float_type, {20}, {1}\n")


def test_evaluator_errors_are_clear():
    p = parse("x = @param:x -> float_type, {2, 2}, {2, 1}\n@1 = relu(x) -> float_type, {2, 2}, {2, 1}\n")
    with pytest.raises(EvalError, match=r"missing input\(s\) .*x: float32, \{2, 2\}"):
        evaluate(p, {})
    with pytest.raises(EvalError, match=r"input 'x' has shape \(3, 2\)"):
        evaluate(p, {"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(EvalError, match="unknown input"):
        evaluate(p, {"x": np.zeros((2, 2), np.float32), "z": 1})


def test_conv_pool_dot_reference_against_direct_loops():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    p = Program()
    m = p.main
    xi = m.add_parameter("x", Shape.of("float32", x.shape))
    wi = m.add_literal(w)
    c = m.add_instruction(Op("convolution", padding=(1, 0, 1, 1), stride=(2, 1), group=2), [xi, wi])
    m.add_return([c])
    got = evaluate(p, {"x": x})[0]
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (0, 1)])
    want = np.zeros(got.shape, np.float64)
    for k in range(6):
        g = k // 3
        for i in range(got.shape[2]):
            for j in range(got.shape[3]):
                patch = xp[0, 2 * g : 2 * g + 2, 2 * i : 2 * i + 3, j : j + 3]
                want[0, k, i, j] = (patch * w[k]).sum()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_random_inputs_are_deterministic():
    p = parse("x = @param:x -> float_type, {3}, {1}\n@1 = relu(x) -> float_type, {3}, {1}\n")
    np.testing.assert_array_equal(random_inputs(p, 3)["x"], random_inputs(p, 3)["x"])
