"""simplify_algebra's convolution and dot finders (compiler/passes/conv_rules.py): one IR-text
test per finder (the finder alone, then DCE), and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from algebra_helpers import CONV, X23, lit, only  # noqa: F401

from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes import simplify_algebra as sa
from migx_explore.compiler.passes.rewrite import dce, sweep
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.testing import assert_same_outputs, check_pass


def test_mul_conv_folds_channel_scale_into_weights():
    check_pass(
        f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        a = @literal{{2, 3}} -> float_type, {{2}}
        c = {CONV}(x,w) -> float_type, {{1, 2, 3, 3}}
        ab = broadcast[axis=1,out_lens={{1, 2, 3, 3}}](a) -> float_type, {{1, 2, 3, 3}}, {{0, 1, 0, 0}}
        y = mul(c,ab) -> float_type, {{1, 2, 3, 3}}
        r = @return(y)
    """,
        [only(sa.MUL_CONV)],
        f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        a = @literal{{2, 3}} -> float_type, {{2}}
        aw = broadcast[axis=0,out_lens={{2, 2, 1, 1}}](a) -> float_type, {{2, 2, 1, 1}}, {{1, 0, 0, 0}}
        nw = mul(aw,w) -> float_type, {{2, 2, 1, 1}}
        y = {CONV}(x,nw) -> float_type, {{1, 2, 3, 3}}
        r = @return(y)
    """,
    )


def test_mul_conv_refuses_spatially_varying_multiplier():
    p = parse(f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        a = @literal{lit(range(9))} -> float_type, {{3, 3}}
        c = {CONV}(x,w) -> float_type, {{1, 2, 3, 3}}
        ab = multibroadcast[out_lens={{1, 2, 3, 3}}](a) -> float_type, {{1, 2, 3, 3}}, {{0, 0, 3, 1}}
        y = mul(c,ab) -> float_type, {{1, 2, 3, 3}}
        r = @return(y)
    """)
    (miss,) = [nm for nm in near_misses(p.main, sa.MUL_CONV) if nm.op == "mul"]
    assert "more than one axis longer than 1" in miss.reason


# MIGraphX's simplify_mul_conv1..3 (fold) and simplify_mul_conv_skip1..2 (a literal already
# broadcast over space: skipped); their tests check only whether the mul survives
@pytest.mark.parametrize(
    "name, lens, strides, bcast, folds",
    [
        ("simplify_mul_conv1", (4,), (1,), dict(name="broadcast", axis=1), True),
        ("simplify_mul_conv3", (4, 1, 1), (1, 18, 1), dict(name="multibroadcast"), True),
        ("simplify_mul_conv_skip1", (4, 3, 3), (1, 0, 0), dict(name="broadcast", axis=1), False),
        ("simplify_mul_conv_skip2", (4, 3, 3), (1, 0, 0), dict(name="multibroadcast"), False),
    ],
)
def test_mul_conv_migraphx_cases(name, lens, strides, bcast, folds):
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", (1, 2, 3, 3)))
    w = m.add_literal(np.arange(8, dtype=np.float32).reshape(4, 2, 1, 1))
    values = np.array([2, 3, 5, 7], np.float32).reshape((4,) + (1,) * (len(lens) - 1))
    a = m.add_literal(np.broadcast_to(values, lens), Shape.of("float32", lens, strides))
    c = m.add_instruction(Op("convolution"), [x, w])
    ab = m.add_instruction(Op(bcast.pop("name"), out_lens=[1, 4, 3, 3], **bcast), [a])
    m.add_return([m.add_instruction(Op("mul"), [c, ab])])
    q = p.copy()
    sweep(q.main, [sa.MUL_CONV])
    dce(q.main)
    (conv,) = [i for i in q.main if i.name == "convolution"]
    assert (conv.outputs[0].name != "mul") == folds, name
    assert_same_outputs(p, q)


def test_add_convs_concatenates_inputs_and_weights():
    check_pass(
        f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        y = @param:y -> float_type, {{1, 1, 3, 3}}
        w1 = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{{5, 6}} -> float_type, {{2, 1, 1, 1}}
        c1 = {CONV}(x,w1) -> float_type, {{1, 2, 3, 3}}
        c2 = {CONV}(y,w2) -> float_type, {{1, 2, 3, 3}}
        s = add(c1,c2) -> float_type, {{1, 2, 3, 3}}
        r = @return(s)
    """,
        [only(sa.ADD_CONVS)],
        f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        y = @param:y -> float_type, {{1, 1, 3, 3}}
        w1 = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{{5, 6}} -> float_type, {{2, 1, 1, 1}}
        xy = concat[axis=1](x,y) -> float_type, {{1, 3, 3, 3}}
        w = concat[axis=1](w1,w2) -> float_type, {{2, 3, 1, 1}}
        s = {CONV}(xy,w) -> float_type, {{1, 2, 3, 3}}
        r = @return(s)
    """,
    )


def test_add_convs_steps_the_finer_strided_1x1():
    p = parse(f"""
        x = @param:x -> float_type, {{1, 2, 4, 4}}
        y = @param:y -> float_type, {{1, 1, 8, 8}}
        w1 = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        w2 = @literal{{5, 6}} -> float_type, {{2, 1, 1, 1}}
        c1 = {CONV}(x,w1) -> float_type, {{1, 2, 4, 4}}
        c2 = convolution[padding={{0, 0}},stride={{2, 2}}](y,w2) -> float_type, {{1, 2, 4, 4}}
        s = add(c1,c2) -> float_type, {{1, 2, 4, 4}}
        r = @return(s)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.ADD_CONVS])
    names = [i.name for i in q.main if not i.is_builtin()]
    assert names == ["step", "concat", "concat", "convolution"]
    assert_same_outputs(p, q)


def test_conv_dot_horiz_fusion_of_dots():
    check_pass(
        f"""
        x = @param:x -> float_type, {{2, 4}}
        a = @literal{lit(range(12))} -> float_type, {{4, 3}}
        b = @literal{lit(range(20))} -> float_type, {{4, 5}}
        d1 = dot(x,a) -> float_type, {{2, 3}}
        d2 = dot(x,b) -> float_type, {{2, 5}}
        r = @return(d1,d2)
    """,
        [only(sa.CONV_DOT_HORIZ_FUSION)],
        f"""
        x = @param:x -> float_type, {{2, 4}}
        a = @literal{lit(range(12))} -> float_type, {{4, 3}}
        b = @literal{lit(range(20))} -> float_type, {{4, 5}}
        ab = concat[axis=1](a,b) -> float_type, {{4, 8}}
        d = dot(x,ab) -> float_type, {{2, 8}}
        d1 = slice[axes={{1}},starts={{0}},ends={{3}}](d) -> float_type, {{2, 3}}, {{8, 1}}
        d2 = slice[axes={{1}},starts={{3}},ends={{8}}](d) -> float_type, {{2, 5}}, {{8, 1}}
        r = @return(d1,d2)
    """,
    )


def test_conv_dot_horiz_fusion_of_convs_moves_late_weights():
    p = parse(f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        w1 = @literal{lit(range(4))} -> float_type, {{2, 2, 1, 1}}
        c1 = {CONV}(x,w1) -> float_type, {{1, 2, 3, 3}}
        w2 = @literal{lit(range(6))} -> float_type, {{3, 2, 1, 1}}
        w2n = neg(w2) -> float_type, {{3, 2, 1, 1}}
        c2 = {CONV}(x,w2n) -> float_type, {{1, 3, 3, 3}}
        r = @return(c1,c2)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.CONV_DOT_HORIZ_FUSION])
    q.validate()
    assert sum(1 for i in q.main if i.name == "convolution") == 1
    assert [i.name for i in q.main if i.name == "slice"] == ["slice", "slice"]
    assert_same_outputs(p, q)


def test_mul_dot_scales_constant_columns():
    check_pass(
        f"""
        x = @param:x -> float_type, {{2, 2}}
        b = @literal{lit([1, 2, 3, 4, 5, 6])} -> float_type, {{2, 3}}
        c = @literal{{2, 3, 4}} -> float_type, {{3}}
        d = dot(x,b) -> float_type, {{2, 3}}
        cb = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 1}}
        y = mul(d,cb) -> float_type, {{2, 3}}
        r = @return(y)
    """,
        [only(sa.MUL_DOT)],
        f"""
        x = @param:x -> float_type, {{2, 2}}
        b = @literal{lit([1, 2, 3, 4, 5, 6])} -> float_type, {{2, 3}}
        c = @literal{{2, 3, 4}} -> float_type, {{3}}
        cb = multibroadcast[out_lens={{2, 3}}](c) -> float_type, {{2, 3}}, {{0, 1}}
        bc = mul(b,cb) -> float_type, {{2, 3}}
        y = dot(x,bc) -> float_type, {{2, 3}}
        r = @return(y)
    """,
    )


def test_mul_dot_refuses_rows_of_a_parameter():
    p = parse("""
        x = @param:x -> float_type, {2, 2}
        b = @literal{1, 2, 3, 4} -> float_type, {2, 2}
        c = @literal{2, 3} -> float_type, {2, 1}
        d = dot(x,b) -> float_type, {2, 2}
        cb = multibroadcast[out_lens={2, 2}](c) -> float_type, {2, 2}, {1, 0}
        y = mul(d,cb) -> float_type, {2, 2}
        r = @return(y)
    """)
    (miss,) = [nm for nm in near_misses(p.main, sa.MUL_DOT) if nm.op == "mul"]
    assert "rows are scaled but dot input 0 is not constant" in miss.reason


def test_conv_add_splits_constant_addend():
    check_pass(
        f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        a = @literal{lit(range(18))} -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        s = add(x,a) -> float_type, {{1, 2, 3, 3}}
        c = {CONV}(s,w) -> float_type, {{1, 2, 3, 3}}
        r = @return(c)
    """,
        [only(sa.CONV_ADD)],
        f"""
        x = @param:x -> float_type, {{1, 2, 3, 3}}
        a = @literal{lit(range(18))} -> float_type, {{1, 2, 3, 3}}
        w = @literal{lit([1, 2, 3, 4])} -> float_type, {{2, 2, 1, 1}}
        ca = {CONV}(a,w) -> float_type, {{1, 2, 3, 3}}
        cx = {CONV}(x,w) -> float_type, {{1, 2, 3, 3}}
        c = add(ca,cx) -> float_type, {{1, 2, 3, 3}}
        r = @return(c)
    """,
    )


def test_conv_broadcast_input_becomes_dot():
    p = parse(f"""
        x = @param:x -> float_type, {{2, 3}}
        w = @literal{lit(range(2 * 3 * 2 * 2))} -> float_type, {{2, 3, 2, 2}}
        u = unsqueeze[axes={{2, 3}}](x) -> float_type, {{2, 3, 1, 1}}
        b = multibroadcast[out_lens={{2, 3, 4, 4}}](u) -> float_type, {{2, 3, 4, 4}}, {{3, 1, 0, 0}}
        c = convolution[padding={{0, 0}},stride={{2, 2}}](b,w) -> float_type, {{2, 2, 2, 2}}
        r = @return(c)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.CONV_BROADCAST_INPUT])
    assert not any(i.name == "convolution" for i in q.main)
    assert any(i.name == "dot" for i in q.main)
    assert_same_outputs(p, q)


@pytest.mark.parametrize(
    "spatial, kernel, padding",
    [
        ((4, 4), (3, 3), (1, 1)),
        ((7, 5), (3, 2), (2, 0, 1, 1)),  # asymmetric: begins then ends; a width-2 kernel
        ((6,), (3,), (2,)),
        ((4, 3, 5), (3, 1, 3), (1, 0, 1)),
        ((3, 3), (3, 3), (1, 1)),  # the interior is one position: no broadcast needed there
    ],
)
def test_padded_conv_of_broadcast_input_runs_a_kernel_sized_conv(spatial, kernel, padding):
    nd = len(spatial)
    ones = ", ".join(["1"] * nd)
    zeros = ", ".join(["0"] * nd)
    lens = ", ".join(map(str, spatial))
    klens = ", ".join(map(str, kernel))
    pad = ", ".join(map(str, padding))
    both = padding if len(padding) == 2 * nd else padding + padding
    out = ", ".join(str(spatial[i] + both[i] + both[i + nd] - kernel[i] + 1) for i in range(nd))
    p = parse(f"""
        x = @param:x -> float_type, {{2, 3}}
        w = @literal{lit([(v % 7) - 3 for v in range(2 * 3 * int(np.prod(kernel)))])} -> float_type, {{2, 3, {klens}}}
        u = reshape[dims={{2, 3, {ones}}}](x) -> float_type, {{2, 3, {ones}}}
        b = multibroadcast[out_lens={{2, 3, {lens}}}](u) -> float_type, {{2, 3, {lens}}}, {{3, 1, {zeros}}}
        c = convolution[padding={{{pad}}},stride={{{ones}}},dilation={{{ones}}}](b,w) -> float_type, {{2, 2, {out}}}
        r = @return(c)
    """)
    q = p.copy()
    assert sweep(q.main, [sa.CONV_BROADCAST_INPUT])
    (conv,) = [i for i in q.main if i.name == "convolution"]
    assert conv.inputs[0].shape.lens[2:] == kernel
    assert_same_outputs(p, q)


def test_conv_broadcast_input_refuses_padding_with_stride():
    p = parse(f"""
        x = @param:x -> float_type, {{1, 3, 1, 1}}
        w = @literal{lit(range(2 * 3 * 3 * 3))} -> float_type, {{2, 3, 3, 3}}
        b = multibroadcast[out_lens={{1, 3, 5, 5}}](x) -> float_type, {{1, 3, 5, 5}}, {{0, 1, 0, 0}}
        c = convolution[padding={{1, 1}},stride={{2, 2}}](b,w) -> float_type, {{1, 2, 3, 3}}
        r = @return(c)
    """)
    (miss,) = near_misses(p.main, sa.CONV_BROADCAST_INPUT)
    assert "stride or dilation" in miss.reason


def _sliced_conv(slices: list[tuple[int, int]], scaled: int) -> Program:
    """conv(x, w) with 6 output channels, sliced along the channels; slice `scaled` times a vector."""
    rng = np.random.default_rng(3)
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", (1, 2, 4, 4)))
    w = m.add_literal(rng.standard_normal((6, 2, 3, 3)).astype(np.float32))
    c = m.add_instruction(Op("convolution", padding=[1, 1]), [x, w])
    outs = []
    # MIGraphX's order: the scaled slice first, then the others (an earlier one is refused)
    for k in [scaled] + [k for k in range(len(slices)) if k != scaled]:
        b, e = slices[k]
        s = m.add_instruction(Op("slice", axes=[1], starts=[b], ends=[e]), [c])
        if k == scaled:
            a = m.add_literal(rng.standard_normal(e - b).astype(np.float32))
            ab = m.add_instruction(Op("broadcast", axis=1, out_lens=list(s.shape.lens)), [a])
            s = m.add_instruction(Op("mul"), [s, ab])
        outs.append(s)
    m.add_return(outs)
    return p


@pytest.mark.parametrize(
    "slices, scaled", [([(0, 2), (2, 6)], 0), ([(0, 2), (2, 4), (4, 6)], 1), ([(0, 3), (3, 6)], 1)]
)
def test_mul_slice_conv_scales_those_output_channels_of_the_weights(slices, scaled):
    p = _sliced_conv(slices, scaled)
    q = p.copy()
    assert sweep(q.main, [sa.MUL_SLICE_CONV])
    dce(q.main)
    assert not any(i.name == "mul" and i.shape.ndim == 4 and i.inputs[0].name == "slice" for i in q.main)
    assert len([i for i in q.main if i.name == "convolution"]) == 1
    assert_same_outputs(p, q)


def test_mul_slice_conv_refuses_an_earlier_slice_of_the_conv():
    p = _sliced_conv([(0, 2), (2, 6)], 1)
    p.main.move_instruction(
        next(i for i in p.main if i.name == "slice" and list(i.op["starts"]) == [0]),
        next(i for i in p.main if i.name == "slice"),
    )
    (miss,) = [nm for nm in near_misses(p.main, sa.MUL_SLICE_CONV) if nm.op == "mul"]
    assert "comes before" in miss.reason


def test_mul_slice_conv_refuses_overlapping_slices():
    p = _sliced_conv([(0, 3), (2, 6)], 0)
    (miss,) = [nm for nm in near_misses(p.main, sa.MUL_SLICE_CONV) if nm.op == "mul"]
    assert "overlaps" in miss.reason


def test_horizontal_quant_dots_share_one_quant_dot():
    text = f"""
        x = @param:x -> int8_type, {{2, 3}}
        a = @literal{lit([1, -2, 3, 4, 5, -6])} -> int8_type, {{3, 2}}
        b = @literal{lit([7, 0, -1, 2, 2, 3, -4, 1, 0])} -> int8_type, {{3, 3}}
        da = quant_dot(x, a) -> int32_type, {{2, 2}}
        db = quant_dot(x, b) -> int32_type, {{2, 3}}
        r = @return(da, db)
    """
    p = parse(text)
    q = p.copy()
    assert sweep(q.main, [sa.CONV_DOT_HORIZ_FUSION])
    dce(q.main)
    assert len([i for i in q.main if i.name == "quant_dot"]) == 1
    rng = np.random.default_rng(0)
    assert_same_outputs(p, q, {"x": rng.integers(-128, 127, (2, 3)).astype(np.int8)})


def _dot_of_scaled(scale_lens, bcast: dict, constant_first: bool) -> Program:
    """dot(z * d, c) (or dot(c, z * d)), z a parameter, d a broadcast constant, c constant."""
    rng = np.random.default_rng(5)
    p = Program()
    m = p.main
    z_lens, c_lens = ((2, 3, 4), (2, 5, 3)) if constant_first else ((2, 5, 3), (2, 3, 4))
    z = m.add_parameter("z", Shape.of("float32", z_lens))
    d = m.add_literal(rng.standard_normal(scale_lens).astype(np.float32))
    db = m.add_instruction(Op(bcast.pop("name"), out_lens=list(z_lens), **bcast), [d])
    zd = m.add_instruction(Op("mul"), [z, db])
    c = m.add_literal(rng.standard_normal(c_lens).astype(np.float32))
    m.add_return([m.add_instruction(Op("dot"), [c, zd] if constant_first else [zd, c])])
    return p


@pytest.mark.parametrize(
    "scale_lens, bcast, constant_first",
    [
        ((1, 1, 3), dict(name="multibroadcast"), False),  # along K of the first operand (mul_dot_a)
        ((3,), dict(name="broadcast", axis=1), True),  # along K of the second operand (mul_dot_b)
        ((1,), dict(name="multibroadcast"), False),  # a scalar
        ((2, 1, 1), dict(name="multibroadcast"), False),  # along the batch
    ],
)
def test_dot_mul_moves_the_scale_onto_the_constant(scale_lens, bcast, constant_first):
    p = _dot_of_scaled(scale_lens, dict(bcast), constant_first)
    q = p.copy()
    assert sweep(q.main, [sa.DOT_MUL])
    dce(q.main)
    (dot,) = [i for i in q.main if i.name == "dot"]
    assert any(x.is_param() for x in dot.inputs)  # z is now a direct operand
    assert_same_outputs(p, q)


def test_dot_mul_refuses_a_scale_along_the_output_rows():
    p = _dot_of_scaled((5, 1), dict(name="multibroadcast"), False)
    (miss,) = [nm for nm in near_misses(p.main, sa.DOT_MUL) if nm.op == "dot"]
    assert "output rows" in miss.reason
