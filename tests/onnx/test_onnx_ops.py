"""The ops added for the importer (data.py, resize.py, nn_extra.py, bitwise.py): shape rules,
attribute validation, normalize and reference compute, written as IR text where possible."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from migx_explore.compiler import Op, Program, Shape, evaluate, parse, print_program
from migx_explore.compiler.errors import AttributeError_, EvalError, ParseError, ShapeError
from migx_explore.compiler.op import compute_shape

RNG = np.random.default_rng(1)


def run_text(text: str, **inputs):
    p = parse(text)
    assert parse(print_program(p, full=True)) == p
    return evaluate(p, inputs)


def shape_of(op: Op, *shapes: Shape) -> Shape:
    return compute_shape(op, list(shapes))


def f32(*lens):
    return Shape.of("float32", lens)


def i64(*lens):
    return Shape.of("int64", lens)


def test_gather_negative_indices_and_shape_rule():
    out = run_text(
        """
        x = @param:x -> float_type, {3, 4}, {4, 1}
        @1 = @literal{-1, 0} -> int64_type, {2}, {1}
        @2 = gather[axis=1](x,@1) -> float_type, {3, 2}, {2, 1}
        @3 = @return(@2)
    """,
        x=np.arange(12, dtype=np.float32).reshape(3, 4),
    )[0]
    np.testing.assert_array_equal(out, [[3, 0], [7, 4], [11, 8]])
    assert shape_of(Op("gather", axis=0), f32(5, 6), i64()).lens == (6,)
    with pytest.raises(ShapeError, match="indices must be an integer"):
        shape_of(Op("gather"), f32(5), f32(2))
    with pytest.raises(ShapeError, match="out of range"):
        shape_of(Op("gather", axis=2), f32(5, 6), i64(1))
    assert Op("gather", axis=-1).spec.normalize(Op("gather", axis=-1), [f32(5, 6), i64(1)])["axis"] == 1


def test_gather_out_of_range_index_is_an_eval_error():
    p = parse("""
        x = @param:x -> float_type, {3}, {1}
        @1 = @literal{5} -> int64_type, {1}, {1}
        @2 = gather(x,@1) -> float_type, {1}, {1}
        @3 = @return(@2)
    """)
    with pytest.raises(EvalError, match="gather"):
        evaluate(p, {"x": np.zeros(3, np.float32)})


def test_gathernd_with_batch_dims():
    data = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    ind = np.array([[[1], [2]], [[0], [-1]]], np.int64)
    p = Program()
    d = p.main.add_parameter("d", f32(2, 3, 4))
    i = p.main.add_literal(ind)
    p.main.add_return([p.main.add_instruction(Op("gathernd", batch_dims=1), [d, i])])
    out = evaluate(p, {"d": data})[0]
    np.testing.assert_array_equal(out, np.stack([data[0, [1, 2]], data[1, [0, 2]]]))
    with pytest.raises(ShapeError, match="exceed data rank"):
        shape_of(Op("gathernd"), f32(2, 3), i64(1, 3))


@pytest.mark.parametrize("red,fn", [("none", None), ("add", np.add), ("mul", np.multiply), ("max", np.maximum)])
def test_scatter_elements_reductions(red, fn):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    ind = np.array([[2, 2], [0, 1]], np.int64)
    upd = np.array([[10, 20], [30, 40]], np.float32)
    p = Program()
    d, u = p.main.add_parameter("d", f32(2, 3)), p.main.add_parameter("u", f32(2, 2))
    p.main.add_return([p.main.add_instruction(Op(f"scatter_{red}", axis=1), [d, p.main.add_literal(ind), u])])
    out = evaluate(p, {"d": data, "u": upd})[0]
    want = data.copy()
    for r, c in itertools.product(range(2), range(2)):
        j = ind[r, c]
        want[r, j] = upd[r, c] if fn is None else fn(want[r, j], upd[r, c])
    if red == "none":  # duplicate indices: ONNX leaves the winner unspecified; check the others
        assert out[1, 0] == 30 and out[1, 1] == 40 and out[0, 2] in (10, 20)
    else:
        np.testing.assert_array_equal(out, want)


def test_scatternd_add_accumulates_duplicates():
    p = Program()
    d = p.main.add_parameter("d", f32(4))
    ind = p.main.add_literal(np.array([[1], [1], [3]], np.int64))
    upd = p.main.add_literal(np.array([1, 2, 5], np.float32))
    p.main.add_return([p.main.add_instruction(Op("scatternd_add"), [d, ind, upd])])
    np.testing.assert_array_equal(evaluate(p, {"d": np.zeros(4, np.float32)})[0], [0, 3, 0, 5])
    with pytest.raises(ShapeError, match="updates must have lens"):
        shape_of(Op("scatternd_none"), f32(4, 5), i64(2, 1), f32(2))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_match_numpy(mode):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    op = Op("pad", pads=[1, 2, 2, 1], mode=mode, value=5.0)
    p = Program()
    p.main.add_return([p.main.add_instruction(op, [p.main.add_parameter("x", f32(3, 4))])])
    assert parse(print_program(p)) == p
    kw = {"constant_values": 5.0} if mode == "constant" else {}
    np.testing.assert_array_equal(evaluate(p, {"x": x})[0], np.pad(x, [(1, 2), (2, 1)], mode=mode, **kw))


def test_pad_rejects_bad_pads_and_modes():
    with pytest.raises(ShapeError, match="needs 4 values"):
        shape_of(Op("pad", pads=[1, 1]), f32(2, 2))
    with pytest.raises(ShapeError, match="reflect"):  # nothing to reflect (a pad wider than the dim is fine)
        shape_of(Op("pad", pads=[2, 0, 0, 0], mode="reflect"), f32(0, 2))
    with pytest.raises(AttributeError_, match="mode"):
        Op("pad", mode="mirror")


def test_reverse_and_prefix_scan_sum():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    for excl, rev in itertools.product((False, True), repeat=2):
        p = Program()
        p.main.add_return(
            [
                p.main.add_instruction(
                    Op("prefix_scan_sum", axis=-1, exclusive=excl, reverse=rev), [p.main.add_parameter("x", f32(2, 3))]
                )
            ]
        )
        v = x[:, ::-1] if rev else x
        want = np.cumsum(v, axis=1) - (v if excl else 0)
        np.testing.assert_array_equal(evaluate(p, {"x": x})[0], want[:, ::-1] if rev else want)
    out = run_text(
        """
        x = @param:x -> float_type, {2, 3}, {3, 1}
        @1 = reverse[axes={0, 1}](x) -> float_type, {2, 3}, {3, 1}
        @2 = @return(@1)
    """,
        x=x,
    )[0]
    np.testing.assert_array_equal(out, x[::-1, ::-1])


def test_topk_returns_a_tuple_with_stable_ties():
    x = np.array([[1, 3, 3, 2], [4, 4, 0, 4]], np.float32)
    out = run_text(
        """
        x = @param:x -> float_type, {2, 4}, {4, 1}
        @1 = topk[k=2,axis=-1](x) -> tuple_type, {(float_type, {2, 2}, {2, 1}), (int64_type, {2, 2}, {2, 1})}
        @2 = get_tuple_elem[index=0](@1) -> float_type, {2, 2}, {2, 1}
        @3 = get_tuple_elem[index=1](@1) -> int64_type, {2, 2}, {2, 1}
        @4 = @return(@2,@3)
    """,
        x=x,
    )
    np.testing.assert_array_equal(out[0], [[3, 3], [4, 4]])
    np.testing.assert_array_equal(out[1], [[1, 2], [0, 1]])
    with pytest.raises(ShapeError, match="k=5"):
        shape_of(Op("topk", k=5), f32(2, 4))


def test_onehot_depth_axis_and_out_of_range():
    p = Program()
    i = p.main.add_parameter("i", i64(3))
    v = p.main.add_literal(np.array([0, 1], np.float32))
    p.main.add_return([p.main.add_instruction(Op("onehot", depth=4, axis=0), [i, v])])
    out = evaluate(p, {"i": np.array([1, -1, 7], np.int64)})[0]
    assert out.shape == (4, 3)
    np.testing.assert_array_equal(out.T, [[0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0]])
    op = Op("onehot", depth=4, axis=-1)
    assert op.spec.normalize(op, [i64(3), f32(2)])["axis"] == 1


def _deconv_reference(x, w, stride, pads, group):
    n, c, h, wd = x.shape
    k = w.shape[1] * group
    kh, kw = w.shape[2:]
    full = np.zeros((n, k, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    cg, kg = c // group, k // group
    for b, ci, i, j in itertools.product(range(n), range(c), range(h), range(wd)):
        g = ci // cg
        full[b, g * kg : (g + 1) * kg, i * stride : i * stride + kh, j * stride : j * stride + kw] += (
            x[b, ci, i, j] * w[ci]
        )
    return full[:, :, pads[0] : full.shape[2] - pads[2], pads[1] : full.shape[3] - pads[3]]


@pytest.mark.parametrize("stride,pads,group", [(1, [0, 0, 0, 0], 1), (2, [1, 0, 0, 1], 1), (2, [1, 1, 1, 1], 2)])
def test_convolution_backwards_matches_a_loop(stride, pads, group):
    x = RNG.standard_normal((1, 4, 3, 3)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 2)).astype(np.float32)
    p = Program()
    op = Op("convolution_backwards", padding=pads, stride=[stride, stride], group=group)
    p.main.add_return([p.main.add_instruction(op, [p.main.add_parameter("x", f32(1, 4, 3, 3)), p.main.add_literal(w)])])
    out = evaluate(p, {"x": x})[0]
    np.testing.assert_allclose(out, _deconv_reference(x, w, stride, pads, group), rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match="input channels"):
        shape_of(Op("convolution_backwards"), f32(1, 3, 4, 4), f32(4, 2, 3, 3))


def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -300.0, 300.0], np.float32)
    p = Program()
    xi = p.main.add_parameter("x", f32(5))
    s = p.main.add_literal(np.ones(5, np.float32))
    q = p.main.add_instruction(Op("quantizelinear", out_type="int8"), [xi, s])
    zp = p.main.add_literal(np.zeros(5, np.int8))
    p.main.add_return([q, p.main.add_instruction(Op("dequantizelinear"), [q, s, zp])])
    assert parse(print_program(p, full=True)) == p
    q_out, dq = evaluate(p, {"x": x})
    np.testing.assert_array_equal(q_out, np.array([0, 2, 2, -128, 127], np.int8))
    np.testing.assert_array_equal(dq, [0, 2, 2, -128, 127])
    with pytest.raises(ShapeError, match="not an integer"):
        shape_of(Op("quantizelinear", out_type="float32"), f32(2), f32(2))


def test_resize_shape_rule_and_nearest_compute():
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    attrs = "sizes={1, 1, 4, 4},mode=nearest,coordinate_transformation_mode=asymmetric,nearest_mode=floor"
    out = run_text(
        f"""
        x = @param:x -> float_type, {{1, 1, 2, 2}}, {{4, 4, 2, 1}}
        @1 = resize[{attrs}](x) -> float_type, {{1, 1, 4, 4}}, {{16, 16, 4, 1}}
        @2 = @return(@1)
    """,
        x=x,
    )[0]
    np.testing.assert_array_equal(out[0, 0], np.repeat(np.repeat(x[0, 0], 2, 0), 2, 1))
    with pytest.raises(ShapeError, match="needs 4 values"):
        shape_of(Op("resize", sizes=[2, 2]), f32(1, 1, 2, 2))
    with pytest.raises(AttributeError_, match="mode"):
        Op("resize", mode="bicubic")


def test_bit_ops_and_lrn():
    a = np.array([5, -8, 3], np.int32)
    b = np.array([1, 40, 0], np.int32)
    p = Program()
    pa, pb = p.main.add_parameter("a", Shape.of("int32", (3,))), p.main.add_parameter("b", Shape.of("int32", (3,)))
    outs = [p.main.add_instruction(Op(n), [pa, pb]) for n in ("bitwise_or", "bitwise_xor", "shift_left", "shift_right")]
    p.main.add_return(outs)
    o = evaluate(p, {"a": a, "b": b})
    np.testing.assert_array_equal(o[0], a | b)
    np.testing.assert_array_equal(o[1], a ^ b)
    np.testing.assert_array_equal(o[2], [10, 0, 3])
    np.testing.assert_array_equal(o[3], [2, -1, 3])  # arithmetic shift past the width keeps the sign
    with pytest.raises(ParseError):
        parse("x = @param:x -> float_type, {2}, {1}\n@1 = lrn[size=0](x) -> float_type, {2}, {1}")
