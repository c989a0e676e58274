"""Graphs shaped the way torch.onnx and tf2onnx emit them, checked against onnxruntime. Each one
also checks that the shape-computing parts imported to static shapes (no dynamic shape left)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_util import I64, F, check_against_ort, const, init, make_model, vi

from migx_explore.compiler.onnx import parse_onnx

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def static(model) -> None:
    p = parse_onnx(model)
    assert not any(i.shape.dynamic_shape for i in p.main if not i.is_return())
    return p


def _shape_dim(prefix: str, src: str, axis: int) -> list:
    """torch: x.size(axis) -> Shape, Constant, Gather, Unsqueeze(axes input)."""
    return [
        helper.make_node("Shape", [src], [f"{prefix}_shape"]),
        const(f"{prefix}_idx", np.int64(axis)),
        helper.make_node("Gather", [f"{prefix}_shape", f"{prefix}_idx"], [f"{prefix}_d"], axis=0),
        const(f"{prefix}_ax", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", [f"{prefix}_d", f"{prefix}_ax"], [f"{prefix}_u"]),
    ]


def test_torch_view_batch_minus_one():
    nodes = _shape_dim("n", "x", 0) + [
        const("m1", np.array([-1], np.int64)),
        helper.make_node("Concat", ["n_u", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    m = make_model(nodes, [vi("x", F, [2, 3, 4, 4])], [vi("y", F, [2, 5])], [init("w", rand(48, 5))])
    static(m)
    check_against_ort(m, {"x": rand(2, 3, 4, 4)}, rtol=1e-5, atol=1e-5)


def test_attention_heads_split_and_additive_mask_with_neg_inf():
    b, s, h, d = 1, 6, 2, 4
    nodes = (
        _shape_dim("b", "q", 0)
        + _shape_dim("s", "q", 1)
        + [
            const("hd", np.array([h, d], np.int64)),
            helper.make_node("Concat", ["b_u", "s_u", "hd"], ["heads_shape"], axis=0),
            helper.make_node("Reshape", ["q", "heads_shape"], ["q4"]),
            helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
            helper.make_node("Transpose", ["q4"], ["kt"], perm=[0, 2, 3, 1]),
            helper.make_node("MatMul", ["qh", "kt"], ["scores"]),
            const("sqrt_d", np.float32(np.sqrt(d))),
            helper.make_node("Div", ["scores", "sqrt_d"], ["scaled"]),
            # HF-style padding mask from an int64 input: 0 where attended, -inf where masked
            helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
            const("zero", np.float32(0)),
            const("ninf", np.float32(-np.inf)),
            helper.make_node("Equal", ["maskf", "zero"], ["is_pad"]),
            helper.make_node("Where", ["is_pad", "ninf", "zero"], ["add_mask"]),
            const("mask_axes", np.array([1, 2], np.int64)),
            helper.make_node("Unsqueeze", ["add_mask", "mask_axes"], ["mask4"]),
            helper.make_node("Add", ["scaled", "mask4"], ["masked"]),
            helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
            helper.make_node("MatMul", ["probs", "qh"], ["ctx"]),
        ]
    )
    m = make_model(nodes, [vi("q", F, [b, s, h * d]), vi("mask", I64, [b, s])], [vi("ctx", F, [b, h, s, d])])
    static(m)
    mask = np.array([[1, 1, 1, 0, 1, 0]], np.int64)
    check_against_ort(m, {"q": rand(b, s, h * d), "mask": mask}, rtol=1e-5, atol=1e-6)


def test_expand_to_a_shape_built_from_shape_and_concat():
    nodes = _shape_dim("n", "x", 0) + [
        const("rest", np.array([3, 4], np.int64)),
        helper.make_node("Concat", ["n_u", "rest"], ["target"], axis=0),
        helper.make_node("Expand", ["b", "target"], ["be"]),
        helper.make_node("Mul", ["x", "be"], ["y"]),
    ]
    m = make_model(nodes, [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], [init("b", rand(1, 4))])
    p = static(m)
    assert any(i.name == "multibroadcast" for i in p.main)
    check_against_ort(m, {"x": rand(2, 3, 4)})


@pytest.mark.parametrize(
    "op",
    [
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL2",
        "ReduceLogSumExp",
        "ReduceSumSquare",
    ],
)
def test_opset18_reductions_with_axes_input(op):
    nodes = [const("axes", np.array([-1, 1], np.int64)), helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)]
    m = make_model(nodes, [vi("x", F, [2, 3, 4])], [vi("y", F, [2])])
    check_against_ort(m, {"x": rand(2, 3, 4)}, rtol=1e-5, atol=1e-5)


def test_split_with_sizes_input_and_concat_back():
    nodes = [
        const("sizes", np.array([2, 1, 3], np.int64)),
        helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"], axis=1),
        helper.make_node("Relu", ["b"], ["rb"]),
        helper.make_node("Concat", ["c", "rb", "a"], ["y"], axis=1),
    ]
    m = make_model(nodes, [vi("x", F, [2, 6])], [vi("y", F, [2, 6])])
    check_against_ort(m, {"x": rand(2, 6)})


def test_slice_with_negative_starts_and_steps_like_torch_flip_and_last_k():
    big = 9223372036854775807  # torch writes INT64_MAX / -INT64_MAX for open ends
    nodes = [
        const("st", np.array([-1, -3], np.int64)),
        const("en", np.array([-big, big], np.int64)),
        const("ax", np.array([0, 1], np.int64)),
        const("sp", np.array([-1, 1], np.int64)),
        helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"]),
    ]
    m = make_model(nodes, [vi("x", F, [4, 5])], [vi("y", F, [4, 3])])
    x = rand(4, 5)
    out = check_against_ort(m, {"x": x})[0]
    np.testing.assert_array_equal(out, x[::-1, -3:])


def test_tf2onnx_nhwc_conv_with_transposes_and_squeeze_axes_input():
    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["c"], ["nhwc"], perm=[0, 2, 3, 1]),
        const("ax", np.array([1, 2], np.int64)),
        helper.make_node("ReduceMean", ["nhwc", "ax"], ["pooled"], keepdims=1),
        helper.make_node("Squeeze", ["pooled", "ax"], ["y"]),
    ]
    m = make_model(
        nodes, [vi("x", F, [1, 5, 5, 3])], [vi("y", F, [1, 4])], [init("w", rand(4, 3, 3, 3)), init("b", rand(4))]
    )
    check_against_ort(m, {"x": rand(1, 5, 5, 3)}, rtol=1e-5, atol=1e-5)


def test_position_ids_from_range_over_the_sequence_length():
    nodes = _shape_dim("s", "ids", 1) + [
        const("z", np.int64(0)),
        const("one", np.int64(1)),
        helper.make_node("Squeeze", ["s_u"], ["seq"]),
        helper.make_node("Range", ["z", "seq", "one"], ["pos"]),
        helper.make_node("Gather", ["tok", "ids"], ["te"], axis=0),
        helper.make_node("Gather", ["pe", "pos"], ["pe_s"], axis=0),
        helper.make_node("Add", ["te", "pe_s"], ["y"]),
    ]
    m = make_model(
        nodes, [vi("ids", I64, [1, 5])], [vi("y", F, [1, 5, 8])], [init("tok", rand(20, 8)), init("pe", rand(16, 8))]
    )
    static(m)
    check_against_ort(m, {"ids": np.array([[3, 1, 19, 0, 7]], np.int64)})


def test_cast_chains_and_constant_of_shape_fill():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["fill"], value=init("v", np.array([2], np.int64))),
        helper.make_node("Cast", ["fill"], ["fillf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["x"], ["xd"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["xd"], ["xf"], to=TensorProto.FLOAT),
        helper.make_node("Pow", ["xf", "fillf"], ["y"]),
    ]
    m = make_model(nodes, [vi("x", F, [3, 2])], [vi("y", F, [3, 2])])
    check_against_ort(m, {"x": rand(3, 2)})
