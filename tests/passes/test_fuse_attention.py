"""fuse_attention: dot -> scale -> mask -> softmax -> dot becomes group[tag=attention]; refusals
say why; the group evaluates like the ops it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.passes.fuse_attention import FindAttention
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import assert_same_outputs, check_pass

FA, DCE = make_pass("fuse_attention"), make_pass("dead_code_elimination")
QKV = """
    q = @param:q -> float_type, {1, 2, 3, 4}
    k = @param:k -> float_type, {1, 2, 4, 3}
    v = @param:v -> float_type, {1, 2, 3, 4}
"""
ATTN_PARAMS = """
    module: "attn0" bypass
    x0 = @param:x0 -> float_type, {1, 2, 3, 4}
    x1 = @param:x1 -> float_type, {1, 2, 4, 3}
"""


def test_scaled_attention_without_mask_becomes_one_group():
    check_pass(
        QKV
        + """
        @3 = @literal{0.5} -> float_type, {1}
        @4 = dot(q, k) -> float_type, {1, 2, 3, 3}
        @5 = multibroadcast[out_lens={1, 2, 3, 3}](@3) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @6 = mul(@4, @5) -> float_type, {1, 2, 3, 3}
        @7 = softmax[axis=3](@6) -> float_type, {1, 2, 3, 3}
        @8 = dot(@7, v) -> float_type, {1, 2, 3, 4}
        @9 = @return(@8)
    """,
        [FA, DCE],
        QKV
        + """
        @3 = group[tag=attention](q, k, v), [attn0] -> float_type, {1, 2, 3, 4}
        @4 = @return(@3)
    """
        + ATTN_PARAMS
        + """
        x2 = @param:x2 -> float_type, {1, 2, 3, 4}
        @3 = @literal{0.5} -> float_type, {1}
        @4 = dot(x0, x1) -> float_type, {1, 2, 3, 3}
        @5 = multibroadcast[out_lens={1, 2, 3, 3}](@3) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @6 = mul(@4, @5) -> float_type, {1, 2, 3, 3}
        @7 = softmax[axis=3](@6) -> float_type, {1, 2, 3, 3}
        @8 = dot(@7, x2) -> float_type, {1, 2, 3, 4}
        @9 = @return(@8)
    """,
    )


def test_causal_minus_inf_mask_stays_an_input_with_its_broadcast():
    """The -inf literal and its broadcast stay outside: the kernel reads the mask through its
    strides; only scalar constants (the scale) move inside."""
    check_pass(
        QKV
        + """
        @3 = @literal{0.5} -> float_type, {1}
        @4 = @literal{0, -inf, -inf, 0, 0, -inf, 0, 0, 0} -> float_type, {3, 3}
        @5 = dot(q, k) -> float_type, {1, 2, 3, 3}
        @6 = multibroadcast[out_lens={1, 2, 3, 3}](@3) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @7 = mul(@5, @6) -> float_type, {1, 2, 3, 3}
        @8 = multibroadcast[out_lens={1, 2, 3, 3}](@4) -> float_type, {1, 2, 3, 3}, {0, 0, 3, 1}
        @9 = add(@7, @8) -> float_type, {1, 2, 3, 3}
        @10 = softmax[axis=3](@9) -> float_type, {1, 2, 3, 3}
        @11 = dot(@10, v) -> float_type, {1, 2, 3, 4}
        @12 = @return(@11)
    """,
        [FA, DCE],
        QKV
        + """
        @3 = @literal{0, -inf, -inf, 0, 0, -inf, 0, 0, 0} -> float_type, {3, 3}
        @4 = multibroadcast[out_lens={1, 2, 3, 3}](@3) -> float_type, {1, 2, 3, 3}, {0, 0, 3, 1}
        @5 = group[tag=attention](q, k, @4, v), [attn0] -> float_type, {1, 2, 3, 4}
        @6 = @return(@5)
    """
        + ATTN_PARAMS
        + """
        x2 = @param:x2 -> float_type, {1, 2, 3, 3}
        x3 = @param:x3 -> float_type, {1, 2, 3, 4}
        @4 = @literal{0.5} -> float_type, {1}
        @5 = dot(x0, x1) -> float_type, {1, 2, 3, 3}
        @6 = multibroadcast[out_lens={1, 2, 3, 3}](@4) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @7 = mul(@5, @6) -> float_type, {1, 2, 3, 3}
        @8 = add(@7, x2) -> float_type, {1, 2, 3, 3}
        @9 = softmax[axis=3](@8) -> float_type, {1, 2, 3, 3}
        @10 = dot(@9, x3) -> float_type, {1, 2, 3, 4}
        @11 = @return(@10)
    """,
    )


DECOMPOSED_PADDING = (
    QKV
    + """
    mask = @param:mask -> float_type, {1, 3}
    @4 = dot(q, k) -> float_type, {1, 2, 3, 3}
    @5 = multibroadcast[out_lens={1, 2, 3, 3}](mask) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 1}
    @6 = add(@4, @5) -> float_type, {1, 2, 3, 3}
    @7 = reduce_max[axes={3}](@6) -> float_type, {1, 2, 3, 1}
    @8 = multibroadcast[out_lens={1, 2, 3, 3}](@7) -> float_type, {1, 2, 3, 3}, {0, 3, 1, 0}
    @9 = sub(@6, @8) -> float_type, {1, 2, 3, 3}
    @10 = exp(@9) -> float_type, {1, 2, 3, 3}
    @11 = reduce_sum[axes={3}](@10) -> float_type, {1, 2, 3, 1}
    @12 = multibroadcast[out_lens={1, 2, 3, 3}](@11) -> float_type, {1, 2, 3, 3}, {0, 3, 1, 0}
    @13 = div(@10, @12) -> float_type, {1, 2, 3, 3}
    @14 = dot(@13, v) -> float_type, {1, 2, 3, 4}
    @15 = @return(@14)
"""
)


def test_padding_mask_with_the_softmax_rewrite_reduce_leaves():
    check_pass(
        DECOMPOSED_PADDING,
        [FA, DCE],
        QKV
        + """
        mask = @param:mask -> float_type, {1, 3}
        @4 = multibroadcast[out_lens={1, 2, 3, 3}](mask) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 1}
        @5 = group[tag=attention](q, k, @4, v), [attn0] -> float_type, {1, 2, 3, 4}
        @6 = @return(@5)
    """
        + ATTN_PARAMS
        + """
        x2 = @param:x2 -> float_type, {1, 2, 3, 3}
        x3 = @param:x3 -> float_type, {1, 2, 3, 4}
        @4 = dot(x0, x1) -> float_type, {1, 2, 3, 3}
        @5 = add(@4, x2) -> float_type, {1, 2, 3, 3}
        @6 = reduce_max[axes={3}](@5) -> float_type, {1, 2, 3, 1}
        @7 = multibroadcast[out_lens={1, 2, 3, 3}](@6) -> float_type, {1, 2, 3, 3}, {0, 3, 1, 0}
        @8 = sub(@5, @7) -> float_type, {1, 2, 3, 3}
        @9 = exp(@8) -> float_type, {1, 2, 3, 3}
        @10 = reduce_sum[axes={3}](@9) -> float_type, {1, 2, 3, 1}
        @11 = multibroadcast[out_lens={1, 2, 3, 3}](@10) -> float_type, {1, 2, 3, 3}, {0, 3, 1, 0}
        @12 = div(@9, @11) -> float_type, {1, 2, 3, 3}
        @13 = dot(@12, x3) -> float_type, {1, 2, 3, 4}
        @14 = @return(@13)
    """,
    )


def test_explorer_shows_the_group_as_one_node_that_expands_into_its_steps():
    from migx_explore.render.model import build_graph

    p = parse(DECOMPOSED_PADDING)
    run_passes(p, [FA, DCE])
    collapsed = [n for n in build_graph(p, expand=False).nodes if n.kind == "fused"]
    assert len(collapsed) == 1 and collapsed[0].label.startswith("group\ntag=attention")
    expanded = build_graph(p, expand=True)
    inside = [n.label.split("\n")[0] for n in expanded.nodes if n.module == "attn0"]
    assert {"dot", "reduce_max", "exp", "reduce_sum", "div"} <= set(inside), inside


def test_where_mask_with_a_minus_inf_fill():
    """GPT-2's form: where(keep, scores, -inf); the bool mask is an input, the fill moves inside."""
    p = parse(
        QKV
        + """
        keep = @param:keep -> bool_type, {1, 2, 3, 3}
        @4 = @literal{-inf} -> float_type, {1}
        @5 = dot(q, k) -> float_type, {1, 2, 3, 3}
        @6 = multibroadcast[out_lens={1, 2, 3, 3}](@4) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @7 = where(keep, @5, @6) -> float_type, {1, 2, 3, 3}
        @8 = softmax[axis=-1](@7) -> float_type, {1, 2, 3, 3}
        @9 = dot(@8, v) -> float_type, {1, 2, 3, 4}
        @10 = @return(@9)
    """
    )
    before = p.copy()
    run_passes(p, [FA, DCE])
    group = [i for i in p.main if i.name == "group"]
    assert len(group) == 1 and [x.name for x in group[0].inputs] == ["@param", "@param", "@param", "@param"]
    assert [i.name for i in group[0].module_inputs[0] if not i.is_builtin()] == [
        "dot",
        "multibroadcast",
        "where",
        "softmax",
        "dot",
    ]
    keep = np.tril(np.ones((3, 3), bool))[None, None].repeat(2, axis=1)
    rng = np.random.default_rng(0)
    feeds = {
        n: rng.standard_normal(s).astype(np.float32)
        for n, s in (("q", (1, 2, 3, 4)), ("k", (1, 2, 4, 3)), ("v", (1, 2, 3, 4)))
    }
    assert_same_outputs(before, p, {**feeds, "keep": keep})


def _reasons(text: str, **kw) -> list[str]:
    p = parse(QKV + text)
    return [m.reason for m in near_misses(p.main, FindAttention(**kw))]


def test_refuses_softmax_over_the_wrong_axis():
    assert any(
        "not the last axis" in r
        for r in _reasons("""
        @3 = dot(q, k) -> float_type, {1, 2, 3, 3}
        @4 = softmax[axis=2](@3) -> float_type, {1, 2, 3, 3}
        @5 = dot(@4, v) -> float_type, {1, 2, 3, 4}
        @6 = @return(@5)
    """)
    )


def test_refuses_when_the_probabilities_are_also_an_output():
    reasons = _reasons("""
        @3 = dot(q, k) -> float_type, {1, 2, 3, 3}
        @4 = softmax[axis=3](@3) -> float_type, {1, 2, 3, 3}
        @5 = dot(@4, v) -> float_type, {1, 2, 3, 4}
        @6 = @return(@5, @4)
    """)
    assert any("also used outside the attention" in r for r in reasons), reasons


def test_refuses_softmax_not_fed_by_a_dot_and_a_too_wide_head():
    assert any(
        "not computed from a dot" in r
        for r in _reasons("""
        s = @param:s -> float_type, {1, 2, 3, 3}
        @4 = softmax[axis=3](s) -> float_type, {1, 2, 3, 3}
        @5 = dot(@4, v) -> float_type, {1, 2, 3, 4}
        @6 = @return(@5)
    """)
    )
    assert any(
        "head dim 4 > 2" in r
        for r in _reasons(
            """
        @3 = dot(q, k) -> float_type, {1, 2, 3, 3}
        @4 = softmax[axis=3](@3) -> float_type, {1, 2, 3, 3}
        @5 = dot(@4, v) -> float_type, {1, 2, 3, 4}
        @6 = @return(@5)
    """,
            max_head_dim=2,
        )
    )


def test_plain_matmul_is_left_alone():
    p = parse(
        QKV
        + """
        @3 = dot(q, k) -> float_type, {1, 2, 3, 3}
        @4 = @return(@3)
    """
    )
    assert run_passes(p, [FA]).records[0].noop


@pytest.mark.parametrize("layers", [1, 2])
def test_builtin_transformer_gets_one_group_per_layer_and_keeps_its_numerics(layers):
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu.pipelines import TARGET_INDEPENDENT, gpu_pipelines
    from migx_explore.models.transformer import transformer

    model = transformer(seq=8, d_model=16, heads=2, d_ff=32, layers=layers)
    p = parse_onnx(model)
    feeds = {"hidden": np.random.default_rng(1).standard_normal((1, 8, 16)).astype(np.float32)}
    want = evaluate(p, feeds)
    PassManager(validate=True).run(p, [pl for pl in gpu_pipelines() if pl.name in TARGET_INDEPENDENT])
    assert sum(i.name == "group" for i in p.main) == layers
    for g, w in zip(evaluate(p, feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
