"""simplify_qdq and rewrite_quantization."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs, check_pass

QDQ = """
    x = @param:x -> float_type, {2, 4}
    s = @literal{0.05} -> float_type, {1}
    z = @literal{3} -> int8_type, {1}
    @3 = multibroadcast[out_lens={2, 4}](s) -> float_type, {2, 4}, {0, 0}
    @4 = multibroadcast[out_lens={2, 4}](z) -> int8_type, {2, 4}, {0, 0}
    @5 = quantizelinear(x, @3, @4) -> int8_type, {2, 4}
    @6 = dequantizelinear(@5, @3, @4) -> float_type, {2, 4}
    @7 = @return(@5, @6)
"""


def test_rewrite_quantization_lowers_to_elementwise_ops():
    check_pass(
        QDQ,
        [make_pass("rewrite_quantization"), make_pass("dead_code_elimination")],
        """
        x = @param:x -> float_type, {2, 4}
        s = @literal{0.05} -> float_type, {1}
        z = @literal{3} -> int8_type, {1}
        lo = @literal{-128} -> float_type, {1}, {0}
        hi = @literal{127} -> float_type, {1}, {0}
        @5 = multibroadcast[out_lens={2, 4}](s) -> float_type, {2, 4}, {0, 0}
        @6 = multibroadcast[out_lens={2, 4}](z) -> int8_type, {2, 4}, {0, 0}
        @7 = div(x, @5) -> float_type, {2, 4}
        @8 = nearbyint(@7) -> float_type, {2, 4}
        @9 = convert[target_type=float32](@6) -> float_type, {2, 4}, {0, 0}
        @10 = add(@8, @9) -> float_type, {2, 4}
        @11 = multibroadcast[out_lens={2, 4}](lo) -> float_type, {2, 4}, {0, 0}
        @12 = multibroadcast[out_lens={2, 4}](hi) -> float_type, {2, 4}, {0, 0}
        @13 = clip(@10, @11, @12) -> float_type, {2, 4}
        @14 = convert[target_type=int8](@13) -> int8_type, {2, 4}
        @15 = convert[target_type=float32](@14) -> float_type, {2, 4}
        @16 = convert[target_type=float32](@6) -> float_type, {2, 4}, {0, 0}
        @17 = sub(@15, @16) -> float_type, {2, 4}
        @18 = mul(@17, @5) -> float_type, {2, 4}
        @19 = @return(@14, @18)
    """,
    )


def test_lowering_saturates_like_quantizelinear():
    p, q = parse(QDQ), parse(QDQ)
    run_passes(q, [make_pass("rewrite_quantization")])
    x = np.array([[-100.0, -6.5, -0.024, 0.0], [0.026, 1.0, 6.3, 100.0]], np.float32)
    for a, b in zip(evaluate(p, {"x": x}), evaluate(q, {"x": x})):
        np.testing.assert_array_equal(a, b)


QDOT = """
    a = @param:a -> float_type, {2, 4}
    w = @literal{1, -2, 3, 4, 5, -6, 7, 8, 9, 10, 11, -12} -> int8_type, {4, 3}
    s = @literal{0.05} -> float_type, {1}
    sw = @literal{0.1} -> float_type, {1}
    @4 = multibroadcast[out_lens={2, 4}](s) -> float_type, {2, 4}, {0, 0}
    @5 = quantizelinear[out_type=int8](a, @4) -> int8_type, {2, 4}
    @6 = dequantizelinear(@5, @4) -> float_type, {2, 4}
    @7 = multibroadcast[out_lens={4, 3}](sw) -> float_type, {4, 3}, {0, 0}
    @8 = dequantizelinear(w, @7) -> float_type, {4, 3}
    @9 = dot(@6, @8) -> float_type, {2, 3}
    @10 = @return(@9)
"""


def test_dequantized_dot_becomes_quant_dot():
    p, q = parse(QDOT), parse(QDOT)
    run_passes(q, [make_pass("simplify_qdq"), make_pass("dead_code_elimination")])
    names = [i.name for i in q.main if not i.is_builtin()]
    # MIGraphX's form: the output scale is the product of the two broadcast input scales
    assert names == [
        "multibroadcast",
        "quantizelinear",
        "quant_dot",
        "multibroadcast",
        "multibroadcast",
        "mul",
        "dequantizelinear",
    ]
    qd = next(i for i in q.main if i.name == "quant_dot")
    assert qd.shape.type == "int32" and [x.shape.type for x in qd.inputs] == ["int8", "int8"]
    assert_same_outputs(p, q, rtol=1e-5, atol=1e-5)


def test_quantized_convolution():
    text = """
        x = @param:x -> int8_type, {1, 2, 4, 4}
        w = @param:w -> int8_type, {3, 2, 3, 3}
        s = @literal{0.5} -> float_type, {1}
        @3 = multibroadcast[out_lens={1, 2, 4, 4}](s) -> float_type, {1, 2, 4, 4}, {0, 0, 0, 0}
        @4 = multibroadcast[out_lens={3, 2, 3, 3}](s) -> float_type, {3, 2, 3, 3}, {0, 0, 0, 0}
        @5 = dequantizelinear(x, @3) -> float_type, {1, 2, 4, 4}
        @6 = dequantizelinear(w, @4) -> float_type, {3, 2, 3, 3}
        @7 = convolution[padding={1, 1},stride={1, 1}](@5, @6) -> float_type, {1, 3, 4, 4}
        @8 = @return(@7)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [make_pass("simplify_qdq")])
    assert "quant_convolution" in [i.name for i in q.main]
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.integers(-128, 127, (1, 2, 4, 4)).astype(np.int8),
        "w": rng.integers(-128, 127, (3, 2, 3, 3)).astype(np.int8),
    }
    assert_same_outputs(p, q, feeds, rtol=1e-6)


def test_fake_quantization_pair_is_removed():
    text = """
        a = @param:a -> float_type, {2, 4}
        s = @literal{0.05} -> float_type, {1}
        @2 = multibroadcast[out_lens={2, 4}](s) -> float_type, {2, 4}, {0, 0}
        @3 = quantizelinear[out_type=int8](a, @2) -> int8_type, {2, 4}
        @4 = dequantizelinear(@3, @2) -> float_type, {2, 4}
        @5 = relu(@4) -> float_type, {2, 4}
        @6 = @return(@5)
    """
    check_pass(
        text,
        [make_pass("simplify_qdq", remove_qdq_only=True)],
        """
        a = @param:a -> float_type, {2, 4}
        @1 = relu(a) -> float_type, {2, 4}
        @2 = @return(@1)
    """,
        atol=0.026,
    )  # the rounding to a multiple of the scale is gone


def test_remove_qdq_only_skips_quant_ops():
    q = parse(QDOT)
    run_passes(q, [make_pass("simplify_qdq", remove_qdq_only=True)])
    assert "quant_dot" not in [i.name for i in q.main]


def _int8_feeds(text: str, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.param_name: rng.integers(-128, 127, i.shape.lens).astype(np.int8) for i in parse(text).main.params()}


ASYMMETRIC_DOT = """
    a = @param:a -> int8_type, {3, 5}
    b = @param:b -> int8_type, {5, 4}
    sa = @literal{0.5} -> float_type, {1}, {0}
    za = @literal{3} -> int8_type, {1}, {0}
    sb = @literal{0.25, 0.5, 1, 2} -> float_type, {4}
    zb = @literal{-2, 0, 1, 4} -> int8_type, {4}
    @6 = multibroadcast[out_lens={3, 5}](sa) -> float_type, {3, 5}, {0, 0}
    @7 = multibroadcast[out_lens={3, 5}](za) -> int8_type, {3, 5}, {0, 0}
    @8 = dequantizelinear(a, @6, @7) -> float_type, {3, 5}
    @9 = broadcast[axis=1,out_lens={5, 4}](sb) -> float_type, {5, 4}, {0, 1}
    @10 = broadcast[axis=1,out_lens={5, 4}](zb) -> int8_type, {5, 4}, {0, 1}
    @11 = dequantizelinear(b, @9, @10) -> float_type, {5, 4}
    @12 = dot(@8, @11) -> float_type, {3, 4}
    @13 = @return(@12)
"""


def test_asymmetric_per_column_dot_keeps_its_values():
    # per-tensor zero point on the first input, per-column scales and zero points on the second:
    # the zero-point cross terms (quant_dot(za, b) + quant_dot(a, zb) - quant_dot(za, zb)) are exact
    p, q = parse(ASYMMETRIC_DOT), parse(ASYMMETRIC_DOT)
    run_passes(q, [make_pass("simplify_qdq"), make_pass("dead_code_elimination")])
    names = [i.name for i in q.main]
    assert names.count("quant_dot") == 4 and "dot" not in names
    assert_same_outputs(p, q, _int8_feeds(ASYMMETRIC_DOT), rtol=1e-6)


def test_asymmetric_per_channel_convolution_keeps_its_values():
    text = """
        x = @param:x -> int8_type, {1, 2, 5, 5}
        w = @param:w -> int8_type, {3, 2, 3, 3}
        sx = @literal{0.5} -> float_type, {1}, {0}
        zx = @literal{-7} -> int8_type, {1}, {0}
        sw = @literal{0.25, 0.5, 2} -> float_type, {3}
        zw = @literal{1, 0, -3} -> int8_type, {3}
        @6 = multibroadcast[out_lens={1, 2, 5, 5}](sx) -> float_type, {1, 2, 5, 5}, {0, 0, 0, 0}
        @7 = multibroadcast[out_lens={1, 2, 5, 5}](zx) -> int8_type, {1, 2, 5, 5}, {0, 0, 0, 0}
        @8 = dequantizelinear(x, @6, @7) -> float_type, {1, 2, 5, 5}
        @9 = broadcast[axis=0,out_lens={3, 2, 3, 3}](sw) -> float_type, {3, 2, 3, 3}, {1, 0, 0, 0}
        @10 = broadcast[axis=0,out_lens={3, 2, 3, 3}](zw) -> int8_type, {3, 2, 3, 3}, {1, 0, 0, 0}
        @11 = dequantizelinear(w, @9, @10) -> float_type, {3, 2, 3, 3}
        @12 = convolution[padding={1, 1},stride={2, 2}](@8, @11) -> float_type, {1, 3, 3, 3}
        @13 = @return(@12)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [make_pass("simplify_qdq"), make_pass("dead_code_elimination")])
    names = [i.name for i in q.main]
    assert names.count("quant_convolution") == 4 and "convolution" not in names
    assert_same_outputs(p, q, _int8_feeds(text), rtol=1e-6)


def test_dot_quantized_along_the_reduction_axis_is_left_alone():
    # per-row scales of the second input are along the reduction axis: they cannot be pulled out
    text = ASYMMETRIC_DOT.replace(
        "sb = @literal{0.25, 0.5, 1, 2} -> float_type, {4}", "sb = @literal{0.25, 0.5, 1, 2, 4} -> float_type, {5}"
    )
    text = text.replace(
        "broadcast[axis=1,out_lens={5, 4}](sb) -> float_type, {5, 4}, {0, 1}",
        "broadcast[axis=0,out_lens={5, 4}](sb) -> float_type, {5, 4}, {1, 0}",
    )
    assert "axis=0" in text
    q = parse(text)
    run_passes(q, [make_pass("simplify_qdq")])
    assert "quant_dot" not in [i.name for i in q.main]


def test_pairs_with_different_scales_stay():
    text = """
        a = @param:a -> float_type, {2, 4}
        s = @literal{0.05} -> float_type, {1}, {0}
        t = @literal{0.04} -> float_type, {1}, {0}
        @3 = multibroadcast[out_lens={2, 4}](s) -> float_type, {2, 4}, {0, 0}
        @4 = multibroadcast[out_lens={2, 4}](t) -> float_type, {2, 4}, {0, 0}
        @5 = quantizelinear[out_type=int8](a, @3) -> int8_type, {2, 4}
        @6 = dequantizelinear(@5, @4) -> float_type, {2, 4}
        @7 = @return(@6)
    """
    q = parse(text)
    run_passes(q, [make_pass("simplify_qdq")])
    assert [i.name for i in q.main].count("dequantizelinear") == 1  # rescaling, not fake quantization


def test_zero_scale_dequantize_becomes_zeros():
    text = """
        a = @param:a -> int8_type, {2, 3}
        s = @literal{0} -> float_type, {1}, {0}
        @2 = multibroadcast[out_lens={2, 3}](s) -> float_type, {2, 3}, {0, 0}
        @3 = dequantizelinear(a, @2) -> float_type, {2, 3}
        @4 = @return(@3)
    """
    check_pass(
        text,
        [make_pass("simplify_qdq"), make_pass("dead_code_elimination")],
        """
        a = @param:a -> int8_type, {2, 3}
        z = @literal{0} -> float_type, {1}, {0}
        @2 = multibroadcast[out_lens={2, 3}](z) -> float_type, {2, 3}, {0, 0}
        @3 = @return(@2)
    """,
    )


def test_reused_quantizelinear_input_feeds_the_pointwise_user_the_dequantized_value():
    # MIGraphX's match_qlinear_reused: x -> quantizelinear and x -> add after it; the add reads
    # dq(q(x)) so quantize and dequantize can fuse into one kernel later
    text = """
        x = @param:x -> float_type, {2, 3}
        s = @literal{0.5} -> float_type, {1}, {0}
        @2 = multibroadcast[out_lens={2, 3}](s) -> float_type, {2, 3}, {0, 0}
        @3 = quantizelinear[out_type=int8](x, @2) -> int8_type, {2, 3}
        @4 = add(x, x) -> float_type, {2, 3}
        @5 = @return(@3, @4)
    """
    check_pass(
        text,
        [make_pass("simplify_qdq"), make_pass("dead_code_elimination")],
        """
        x = @param:x -> float_type, {2, 3}
        s = @literal{0.5} -> float_type, {1}, {0}
        @2 = multibroadcast[out_lens={2, 3}](s) -> float_type, {2, 3}, {0, 0}
        @3 = quantizelinear[out_type=int8](x, @2) -> int8_type, {2, 3}
        @4 = dequantizelinear(@3, @2) -> float_type, {2, 3}
        @5 = add(@4, @4) -> float_type, {2, 3}
        @6 = @return(@3, @5)
    """,
        numeric=False,
    )  # the add now sees the rounded value
