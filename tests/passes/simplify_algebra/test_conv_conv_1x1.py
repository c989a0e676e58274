"""find_conv_conv_1x1: conv(x, W1)[+ b] followed by a 1x1 conv W2 -> one conv with W2 . W1.

Each case builds the pair with random weights, applies the rule alone, checks the fused conv's
weight shape is (out, in / group_new, kh, kw) with group_new = 1, and compares outputs with the
reference evaluator. Refusals are checked through near_misses.
"""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import PassManager
from migx_explore.compiler.passes.rewrite import dce
from migx_explore.compiler.passes.simplify_algebra import CONV_CONV_1X1, ConvConv1x1, SimplifyAlgebra
from migx_explore.compiler.pattern_rewriter import find_matches, matches, near_misses
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.testing import assert_same_outputs


def pair(
    *,
    cin=4,
    mid=6,
    out=3,
    k=(3, 3),
    group=1,
    stride=(1, 1),
    padding=(1, 1),
    dilation=(1, 1),
    bias=None,
    between=None,
    middle_returned=False,
    k2=(1, 1),
    group2=1,
    padding2=(0, 0),
    stride2=(1, 1),
    w2_param=False,
    w1_param=False,
    hw=(9, 9),
    dtype=np.float32,
    seed=0,
) -> Program:
    """x -> conv(W1) [-> + bias] [-> between op] -> conv 1x1 (W2) -> return."""
    rng = np.random.default_rng(seed)
    t = {np.float32: "float32", np.float16: "float16"}[dtype]
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of(t, (2, cin, *hw)))
    w1_lens = (mid, cin // group, *k)
    w1 = (
        m.add_parameter("w1", Shape.of(t, w1_lens))
        if w1_param
        else m.add_literal(rng.standard_normal(w1_lens).astype(dtype))
    )
    w2_lens = (out, mid // group2, *k2)
    w2 = (
        m.add_parameter("w2", Shape.of(t, w2_lens))
        if w2_param
        else m.add_literal(rng.standard_normal(w2_lens).astype(dtype))
    )
    y = m.add_instruction(Op("convolution", padding=padding, stride=stride, dilation=dilation, group=group), [x, w1])
    if bias == "vector":
        b = m.add_literal(rng.standard_normal(mid).astype(dtype))
        y = m.add_instruction(Op("add"), [y, m.add_instruction(Op("broadcast", axis=1, out_lens=y.shape.lens), [b])])
    elif bias == "nchw":  # a (1, mid, 1, 1) bias through multibroadcast, added on the left
        b = m.add_literal(rng.standard_normal((1, mid, 1, 1)).astype(dtype))
        y = m.add_instruction(Op("add"), [m.add_instruction(Op("multibroadcast", out_lens=y.shape.lens), [b]), y])
    elif bias == "spatial":  # varies over space: not a per-channel bias
        b = m.add_literal(rng.standard_normal(y.shape.lens[1:]).astype(dtype))
        y = m.add_instruction(Op("add"), [y, m.add_instruction(Op("multibroadcast", out_lens=y.shape.lens), [b])])
    if between:
        y = m.add_instruction(Op(between), [y])
    z = m.add_instruction(Op("convolution", padding=padding2, stride=stride2, group=group2), [y, w2])
    m.add_return([z, y] if middle_returned else [z])
    return p


def fuse(p: Program, rule=CONV_CONV_1X1) -> tuple[Program, int]:
    q = p.copy()
    n = find_matches(q.main, rule)
    dce(q.main)
    q.validate()
    return q, n


def live_convs(p: Program):
    return [i for i in p.main if i.name == "convolution" and i.outputs]


def check_fused(p: Program, *, out: int, cin: int, k=(3, 3), rule=CONV_CONV_1X1, rtol=1e-4, atol=1e-4) -> Program:
    q, n = fuse(p, rule)
    assert n == 1
    (conv,) = live_convs(q)
    assert conv.op["group"] == 1
    # (out, in / group_new, kh, kw) with group_new = 1
    assert conv.inputs[1].shape.lens == (out, cin, *k)
    assert conv.shape.lens == p.main.output_instructions()[0].shape.lens
    assert_same_outputs(p, q, rtol=rtol, atol=atol)
    return q


def test_plain_pair_fuses():
    check_fused(pair(), out=3, cin=4)


def test_fused_weights_are_w2_times_w1():
    p = pair(cin=2, mid=3, out=2, k=(1, 1), padding=(0, 0))
    q = check_fused(p, out=2, cin=2, k=(1, 1))
    w1 = [i for i in p.main if i.is_literal()][0].literal.data.reshape(3, 2)
    w2 = [i for i in p.main if i.is_literal()][1].literal.data.reshape(2, 3)
    (conv,) = live_convs(q)
    np.testing.assert_allclose(conv.inputs[1].literal.data.reshape(2, 2), w2 @ w1, rtol=1e-6)


@pytest.mark.parametrize("out", [2, 8])
def test_channel_count_changes(out):
    # mid = 6; out 2 narrows, out 8 widens (cheap enough with cin = 2: 8*2*9 <= 6*2*9 + 8*6)
    check_fused(pair(cin=2, mid=6, out=out), out=out, cin=2)


def test_widening_is_fused_by_default_and_refused_under_a_growth_bound():
    p = pair(cin=4, mid=6, out=8)  # fused 8*4*9 = 288 > 6*4*9 + 8*6 = 264
    check_fused(p, out=8, cin=4)  # MIGraphX's branch fuses regardless of cost
    bounded = ConvConv1x1(max_growth=1.0)
    assert fuse(p, bounded)[1] == 0
    reasons = [nm.reason for nm in near_misses(p.main, bounded)]
    assert any("288" in r and "264" in r for r in reasons), reasons


def test_grouped_first_conv_expands_block_diagonal():
    check_fused(pair(cin=4, mid=8, out=2, group=2), out=2, cin=4)


def test_depthwise_first_conv_fuses_like_migraphx_branch():
    # MIGraphX's conv1x1-fusion branch fuses depthwise-then-1x1 into one dense conv
    check_fused(pair(cin=4, mid=4, out=8, group=4), out=8, cin=4)


def test_depthwise_first_conv_is_refused_under_a_growth_bound():
    p = pair(cin=4, mid=4, out=8, group=4)
    bounded = ConvConv1x1(max_growth=1.0)
    assert fuse(p, bounded)[1] == 0
    (miss,) = [nm for nm in near_misses(p.main, bounded) if nm.reason.startswith("refused")]
    assert "group 4 expands to dense" in miss.reason


@pytest.mark.parametrize(
    "kw",
    [
        dict(w2_param=True),
        dict(w1_param=True),
        dict(w1_param=True, w2_param=True, cin=4, mid=6, out=8),  # widening: out != mid
        dict(w1_param=True, w2_param=True, cin=4, mid=8, out=2, group=2),
        dict(w1_param=True, w2_param=True, cin=6, mid=6, out=4, group=6),  # depthwise, out != mid
        dict(w2_param=True, k=(1, 3), padding=(0, 1), stride=(2, 1)),
    ],
)
def test_non_constant_weights_are_combined_in_the_graph(kw):
    p = pair(**kw)
    q = check_fused(p, out=kw.get("out", 3), cin=kw.get("cin", 4), k=kw.get("k", (3, 3)))
    assert any(i.name == "dot" and i.outputs for i in q.main)  # W2 . W1 computed at run time


def test_refuses_bias_with_non_constant_weights():
    assert "needs constant weights" in _refusal(pair(w2_param=True, bias="vector"))


@pytest.mark.parametrize(
    "kw",
    [
        dict(stride=(2, 2)),
        dict(stride=(2, 1), hw=(10, 7)),
        dict(padding=(0, 1, 2, 1)),  # asymmetric: begins then ends
        dict(padding=(0, 0)),
        dict(dilation=(2, 2)),
        dict(dilation=(2, 1), padding=(2, 1), stride=(1, 2)),
        dict(k=(1, 3), padding=(0, 1)),
    ],
)
def test_first_conv_geometry_carries_over(kw):
    p = pair(**kw)
    q = check_fused(p, out=3, cin=4, k=kw.get("k", (3, 3)))
    (conv,) = live_convs(q)
    first = [i for i in p.main if i.name == "convolution"][0]
    for a in ("padding", "stride", "dilation"):
        assert conv.op[a] == first.op[a]


@pytest.mark.parametrize("bias", ["vector", "nchw"])
def test_bias_between_becomes_w2_bias(bias):
    p = pair(bias=bias)
    q = check_fused(p, out=3, cin=4)
    adds = [i for i in q.main if i.name == "add" and i.outputs]
    assert len(adds) == 1 and adds[0].inputs[1].name == "broadcast"
    b = [i for i in p.main if i.is_literal()][2].literal.data.reshape(-1)
    w2 = [i for i in p.main if i.is_literal()][1].literal.data.reshape(3, 6)
    np.testing.assert_allclose(adds[0].inputs[1].inputs[0].literal.data, w2 @ b, rtol=1e-5)


def test_bias_with_grouped_first_conv():
    check_fused(pair(cin=4, mid=8, out=2, group=2, bias="vector"), out=2, cin=4)


def test_fp16_pair():
    check_fused(pair(dtype=np.float16), out=3, cin=4, rtol=2e-2, atol=2e-2)


def _refusal(p: Program) -> str:
    """The near miss reported at the 1x1 conv (the last convolution)."""
    last = [i for i in p.main if i.name == "convolution"][-1]
    (miss,) = [nm for nm in near_misses(p.main, CONV_CONV_1X1) if nm.instruction == last.id]
    assert fuse(p)[1] == 0
    return miss.reason


def test_refuses_middle_value_with_other_users():
    assert "2 users" in _refusal(pair(middle_returned=True))


def test_refuses_biased_middle_value_with_other_users():
    assert "2 users" in _refusal(pair(bias="vector", middle_returned=True))


@pytest.mark.parametrize("op", ["relu", "sigmoid", "tanh"])
def test_refuses_nonlinearity_between(op):
    assert f"{op} sits between the convolutions" in _refusal(pair(between=op))


def test_refuses_bias_varying_over_space():
    assert "not one value per channel" in _refusal(pair(bias="spatial"))


@pytest.mark.parametrize(
    "kw, why",
    [
        (dict(padding2=(1, 1)), "padded (1, 1)"),
        (dict(stride2=(2, 2)), "stride (2, 2)"),
        (dict(k2=(3, 3), padding2=(1, 1)), "3x3, not 1x1"),
        (dict(group2=2, out=4), "grouped (group=2)"),
    ],
)
def test_refuses_second_conv_that_is_not_plain_1x1(kw, why):
    assert why in _refusal(pair(**kw))


def test_matches_lists_candidates_for_notebooks():
    p = pair()
    (r,) = matches(p.main, CONV_CONV_1X1)
    assert r.root.name == "convolution" and r["first"].name == "convolution"
    assert r.get("bias") is None


def test_full_simplify_algebra_fuses_biased_pair():
    """Inside simplify_algebra, find_conv_add splits the bias first, then the pair fuses and the
    bias term conv(broadcast(b)) shrinks to a dot; the result is still one conv over x."""
    p = pair(bias="vector")
    q = p.copy()
    PassManager().run(q, [SimplifyAlgebra()])
    assert len(live_convs(q)) == 1
    assert live_convs(q)[0].inputs[0].is_param()
    assert_same_outputs(p, q, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("nd", [1, 3])
def test_1d_and_3d_grouped_strided_biased_pair(nd):
    rng = np.random.default_rng(nd)
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", (2, 4) + (5,) * nd))
    w1 = m.add_literal(rng.standard_normal((6, 2) + (3,) * nd).astype(np.float32))
    w2 = m.add_literal(rng.standard_normal((3, 6) + (1,) * nd).astype(np.float32))
    c = m.add_instruction(Op("convolution", padding=(1,) * nd, stride=(2,) * nd, dilation=(1,) * nd, group=2), [x, w1])
    b = m.add_instruction(
        Op("broadcast", axis=1, out_lens=c.shape.lens), [m.add_literal(rng.standard_normal(6).astype(np.float32))]
    )
    z = m.add_instruction(
        Op("convolution", padding=(0,) * nd, stride=(1,) * nd, dilation=(1,) * nd),
        [m.add_instruction(Op("add"), [c, b]), w2],
    )
    m.add_return([z])
    check_fused(p, out=3, cin=4, k=(3,) * nd)
