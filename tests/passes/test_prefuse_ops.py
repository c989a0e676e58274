"""prefuse_ops: layernorm and add + layernorm recognised as fused ops."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs, check_pass

PREFUSE = make_pass("prefuse_ops")

# The importer's LayerNormalization: sqdiff variance, rsqrt, then scale.
IMPORTED = """
    x = @param:x -> float_type, {3, 8}
    g = @param:g -> float_type, {8}
    eps = @literal{1e-5} -> float_type, {1}
    @3 = reduce_mean[axes={1}](x) -> float_type, {3, 1}
    @4 = multibroadcast[out_lens={3, 8}](@3) -> float_type, {3, 8}, {1, 0}
    @5 = sqdiff(x, @4) -> float_type, {3, 8}
    @6 = reduce_mean[axes={1}](@5) -> float_type, {3, 1}
    @7 = multibroadcast[out_lens={3, 1}](eps) -> float_type, {3, 1}, {0, 0}
    @8 = add(@6, @7) -> float_type, {3, 1}
    @9 = rsqrt(@8) -> float_type, {3, 1}
    @10 = sub(x, @4) -> float_type, {3, 8}
    @11 = multibroadcast[out_lens={3, 8}](@9) -> float_type, {3, 8}, {1, 0}
    @12 = mul(@10, @11) -> float_type, {3, 8}
    @13 = multibroadcast[out_lens={3, 8}](g) -> float_type, {3, 8}, {0, 1}
    @14 = mul(@12, @13) -> float_type, {3, 8}
    @15 = @return(@14)
"""


def test_imported_layernorm_becomes_layernorm_op():
    check_pass(
        IMPORTED,
        [PREFUSE],
        """
        x = @param:x -> float_type, {3, 8}
        g = @param:g -> float_type, {8}
        @2 = layernorm[epsilon=9.999999747378752e-06](x) -> float_type, {3, 8}
        @3 = multibroadcast[out_lens={3, 8}](g) -> float_type, {3, 8}, {0, 1}
        @4 = mul(@2, @3) -> float_type, {3, 8}
        @5 = @return(@4)
    """,
    )


def test_pow_and_sqrt_div_form():
    text = """
        x = @param:x -> float_type, {2, 4, 6}
        two = @literal{2.0} -> float_type, {1}
        eps = @literal{1e-3} -> float_type, {1}
        @3 = reduce_mean[axes={-1}](x) -> float_type, {2, 4, 1}
        @4 = multibroadcast[out_lens={2, 4, 6}](@3) -> float_type, {2, 4, 6}, {4, 1, 0}
        @5 = sub(x, @4) -> float_type, {2, 4, 6}
        @6 = multibroadcast[out_lens={2, 4, 6}](two) -> float_type, {2, 4, 6}, {0, 0, 0}
        @7 = pow(@5, @6) -> float_type, {2, 4, 6}
        @8 = reduce_mean[axes={2}](@7) -> float_type, {2, 4, 1}
        @9 = multibroadcast[out_lens={2, 4, 1}](eps) -> float_type, {2, 4, 1}, {0, 0, 0}
        @10 = add(@8, @9) -> float_type, {2, 4, 1}
        @11 = sqrt(@10) -> float_type, {2, 4, 1}
        @12 = multibroadcast[out_lens={2, 4, 6}](@11) -> float_type, {2, 4, 6}, {4, 1, 0}
        @13 = div(@5, @12) -> float_type, {2, 4, 6}
        @14 = @return(@13)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [PREFUSE])
    assert [i.name for i in q.main if not i.is_builtin()] == ["layernorm"]
    assert_same_outputs(p, q, rtol=1e-5, atol=1e-5)


def test_add_then_layernorm_becomes_add_layernorm():
    text = IMPORTED.replace(
        "x = @param:x -> float_type, {3, 8}",
        """a = @param:a -> float_type, {3, 8}
        b = @param:b -> float_type, {3, 8}
        x = add(a, b) -> float_type, {3, 8}""",
    )
    p, q = parse(text), parse(text)
    run_passes(q, [PREFUSE])
    names = [i.name for i in q.main if not i.is_builtin()]
    assert names == ["add_layernorm", "multibroadcast", "mul"]
    assert_same_outputs(p, q, rtol=1e-5, atol=1e-5)


def test_layernorm_over_a_middle_axis_is_not_matched():
    text = IMPORTED.replace("axes={1}", "axes={0}").replace("{3, 1}", "{1, 8}").replace("{1, 0}", "{0, 1}")
    q = parse(text)
    assert not run_passes(q, [PREFUSE]).records[0].changed


def test_switch_off_matches_migraphx_default():
    q = parse(IMPORTED)
    assert not run_passes(q, [make_pass("prefuse_ops", enable_layernorm_fusion=False)]).records[0].changed


def test_layernorm_op_reference():
    x = np.random.default_rng(1).normal(size=(3, 8)).astype(np.float32)
    q = parse(IMPORTED)
    run_passes(q, [PREFUSE])
    g = np.linspace(0.5, 1.5, 8, dtype=np.float32)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * g
    np.testing.assert_allclose(evaluate(q, {"x": x, "g": g})[0], want, rtol=1e-5, atol=1e-6)


# ---- few long rows: statistics from chunks (FindSplitLayernorm) -----------------------------------
def _long_rows(rows: int, n: int, dt: str = "float") -> str:
    return (
        IMPORTED.replace("{3, 8}", f"{{{rows}, {n}}}")
        .replace("{3, 1}", f"{{{rows}, 1}}")
        .replace("{8}", f"{{{n}}}")
        .replace("float_type", dt)
    )


def test_few_long_rows_are_normalized_from_chunk_statistics():
    text = _long_rows(2, 32768)
    p, q = parse(text), parse(text)
    run_passes(q, [PREFUSE])
    ops = [i for i in q.main if not i.is_builtin()]
    assert "layernorm" not in {i.name for i in ops}
    chunked = [i for i in ops if i.name == "reshape" and i.shape.lens == (2, 8, 4096)]
    assert len(chunked) == 1  # 8 chunks of 4096 per row
    reductions = [i for i in ops if i.name.startswith("reduce_")]
    assert sorted(i.inputs[0].shape.lens for i in reductions) == [(2, 8, 1)] * 3 + [(2, 8, 4096)] * 2
    assert_same_outputs(p, q, rtol=1e-5, atol=1e-5)


def test_split_statistics_hold_for_a_large_mean_and_half_inputs():
    """Chan's combination keeps the variance where one pass of sums would cancel: values around
    1000 with unit spread, and half inputs computed in float."""
    for dt, tol in (("float", 1e-4), ("half", 2e-2)):
        text = _long_rows(3, 16384, dt)
        p, q = parse(text), parse(text)
        run_passes(q, [PREFUSE])
        assert "layernorm" not in {i.name for i in q.main}
        rng = np.random.default_rng(3)
        np_t = np.float32 if dt == "float" else np.float16
        feeds = {"x": (1000 + rng.normal(size=(3, 16384))).astype(np_t), "g": np.ones(16384, np_t)}
        want = evaluate(p, feeds)[0].astype(np.float64)
        got = evaluate(q, feeds)[0].astype(np.float64)
        x = feeds["x"].astype(np.float64)
        exact = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(got, exact, rtol=tol, atol=tol)
        assert np.abs(got - exact).max() <= np.abs(want - exact).max() + tol


def test_rows_too_many_short_or_uneven_keep_the_layernorm_op():
    for rows, n in ((1025, 16384), (2, 8192), (2, 16385 * 2)):
        q = parse(_long_rows(rows, n))
        run_passes(q, [PREFUSE])
        assert "layernorm" in {i.name for i in q.main}, (rows, n)
    q = parse(_long_rows(2, 32768))
    run_passes(q, [make_pass("prefuse_ops", split_long_rows=0)])
    assert "layernorm" in {i.name for i in q.main}
