"""simplify_qdq keeps values (issue 24): a q -> dq pair is a clamp and a rounding, so with
keep_qdq_pairs (the GPU pipelines' setting) only exact pairs go; uint8 data reaches the quant ops
as int8 (x - 128 with zero point - 128), with every value unchanged."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs, check_pass

# ORT's pattern: Conv -> (ReLU removed) QuantizeLinear uint8, zero point 0 -> DequantizeLinear -> Add
RELU_BY_CLAMP = """
    x = @param:x -> float_type, {2, 4}
    y = @param:y -> float_type, {2, 4}
    s = @literal{0.05} -> float_type, {1}
    z = @literal{0} -> uint8_type, {1}
    @4 = multibroadcast[out_lens={2, 4}](s) -> float_type, {2, 4}, {0, 0}
    @5 = multibroadcast[out_lens={2, 4}](z) -> uint8_type, {2, 4}, {0, 0}
    @6 = quantizelinear(x, @4, @5) -> uint8_type, {2, 4}
    @7 = dequantizelinear(@6, @4, @5) -> float_type, {2, 4}
    @8 = add(@7, y) -> float_type, {2, 4}
    @9 = @return(@8)
"""


def _qdq(**opts):
    return [make_pass("simplify_qdq", **opts), make_pass("dead_code_elimination")]


def test_migraphx_default_drops_the_pair_and_with_it_the_relu():
    p = parse(RELU_BY_CLAMP)
    run_passes(p, _qdq())
    assert "quantizelinear" not in {i.name for i in p.main}
    x = np.full((2, 4), -1.0, np.float32)
    y = np.zeros((2, 4), np.float32)
    # the clamp at zero point 0 was the ReLU: before 0, after the pair is gone -1
    assert evaluate(parse(RELU_BY_CLAMP), {"x": x, "y": y})[0].max() == 0
    assert evaluate(p, {"x": x, "y": y})[0].max() == -1


def test_keep_qdq_pairs_keeps_the_clamp_and_rounding():
    # the pair stays; only the all-zero zero point of the dequantizelinear goes (remove_zero_point)
    after = RELU_BY_CLAMP.replace("dequantizelinear(@6, @4, @5)", "dequantizelinear(@6, @4)")
    check_pass(RELU_BY_CLAMP, _qdq(keep_qdq_pairs=True), after, rtol=0, atol=0)


def test_keep_qdq_pairs_still_removes_an_exact_pair():
    # quantizelinear(dequantizelinear(y)) with the same parameters gives y back: that pair can go
    before = """
        y = @param:y -> int8_type, {2, 4}
        s = @literal{0.05} -> float_type, {1}
        z = @literal{3} -> int8_type, {1}
        @3 = multibroadcast[out_lens={2, 4}](s) -> float_type, {2, 4}, {0, 0}
        @4 = multibroadcast[out_lens={2, 4}](z) -> int8_type, {2, 4}, {0, 0}
        @5 = dequantizelinear(y, @3, @4) -> float_type, {2, 4}
        @6 = quantizelinear(@5, @3, @4) -> int8_type, {2, 4}
        @7 = dequantizelinear(@6, @3, @4) -> float_type, {2, 4}
        @8 = @return(@7)
    """
    check_pass(
        before,
        _qdq(keep_qdq_pairs=True),
        """
        y = @param:y -> int8_type, {2, 4}
        s = @literal{0.05} -> float_type, {1}
        z = @literal{3} -> int8_type, {1}
        @3 = multibroadcast[out_lens={2, 4}](s) -> float_type, {2, 4}, {0, 0}
        @4 = multibroadcast[out_lens={2, 4}](z) -> int8_type, {2, 4}, {0, 0}
        @5 = dequantizelinear(y, @3, @4) -> float_type, {2, 4}
        @8 = @return(@5)
    """,
        rtol=0,
        atol=0,
    )


UINT8_CONV = """
    x = @param:x -> float_type, {1, 2, 5, 5}
    xs = @literal{0.04} -> float_type, {1}
    xz = @literal{37} -> uint8_type, {1}
    w = @literal{#w} -> int8_type, {3, 2, 3, 3}
    ws = @literal{0.01, 0.02, 0.03} -> float_type, {3}
    @5 = multibroadcast[out_lens={1, 2, 5, 5}](xs) -> float_type, {1, 2, 5, 5}, {0, 0, 0, 0}
    @6 = multibroadcast[out_lens={1, 2, 5, 5}](xz) -> uint8_type, {1, 2, 5, 5}, {0, 0, 0, 0}
    @7 = quantizelinear(x, @5, @6) -> uint8_type, {1, 2, 5, 5}
    @8 = dequantizelinear(@7, @5, @6) -> float_type, {1, 2, 5, 5}
    @9 = broadcast[axis=0, out_lens={3, 2, 3, 3}](ws) -> float_type, {3, 2, 3, 3}, {1, 0, 0, 0}
    @10 = dequantizelinear(w, @9) -> float_type, {3, 2, 3, 3}
    @11 = convolution[padding={1, 1, 1, 1}](@8, @10) -> float_type, {1, 3, 5, 5}
    @12 = @return(@11)
"""


def test_uint8_activation_becomes_int8_quant_convolution_with_the_same_values():
    text = UINT8_CONV.replace(
        "@literal{#w}", "@literal{" + ", ".join(str(v) for v in np.random.default_rng(3).integers(-127, 128, 54)) + "}"
    )
    p, orig = parse(text), parse(text)
    run_passes(p, _qdq(keep_qdq_pairs=True))
    names = [i.name for i in p.main]
    assert "quant_convolution" in names and "convolution" not in names
    q = next(i for i in p.main if i.name == "quantizelinear")
    assert q.shape.type == "int8"  # the uint8 quantizelinear re-made: zero point 37 - 128
    for i in p.main:
        if i.name == "quant_convolution":
            assert [a.shape.type for a in i.inputs] == ["int8", "int8"]
    # the zero-point terms are exact in int32, the rescale in float32: the same values, and the
    # border (padding reads zero point 37, not 0) too
    x = np.random.default_rng(4).uniform(-1.5, 9, (1, 2, 5, 5)).astype(np.float32)
    assert_same_outputs(orig, p, {"x": x}, rtol=1e-5, atol=1e-5)
