"""Low-precision element types through ml_dtypes: bfloat16, float16 and the float8 variants compute
like float32 then round (sums and products accumulate in float32, as GPUs do); int4 / uint4
initializers arrive packed two to a byte and unpack on import; float8 casts saturate."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from migx_explore.compiler import dtypes, evaluate
from migx_explore.compiler.onnx import parse_onnx

TYPES = {  # ONNX code, numpy dtype, relative step of the type's mantissa
    "bfloat16": (TensorProto.BFLOAT16, np.dtype(ml_dtypes.bfloat16), 2.0**-7),
    "float16": (TensorProto.FLOAT16, np.dtype(np.float16), 2.0**-10),
    "float8e4m3fn": (TensorProto.FLOAT8E4M3FN, np.dtype(ml_dtypes.float8_e4m3fn), 2.0**-3),
    "float8e5m2": (TensorProto.FLOAT8E5M2, np.dtype(ml_dtypes.float8_e5m2), 2.0**-2),
    "float8e4m3fnuz": (TensorProto.FLOAT8E4M3FNUZ, np.dtype(ml_dtypes.float8_e4m3fnuz), 2.0**-3),
    "float8e5m2fnuz": (TensorProto.FLOAT8E5M2FNUZ, np.dtype(ml_dtypes.float8_e5m2fnuz), 2.0**-2),
}
OPS = [
    ("Relu", {}),
    ("Sigmoid", {}),
    ("Tanh", {}),
    ("Softmax", {"axis": -1}),
    ("ReduceSum", {"keepdims": 1}),
    ("ReduceMean", {"keepdims": 1}),
    ("Gelu", {}),
    ("LayerNormalization", {}),
    ("MatMul", {}),
]


def _model(op: str, attrs: dict, code: int):
    ins = ["x", "x"] if op == "MatMul" else (["x", "s"] if op == "LayerNormalization" else ["x"])
    graph_ins = [helper.make_tensor_value_info("x", code, [4, 4])]
    inits = [helper.make_tensor("s", code, [4], np.ones(4, np.float32))] if op == "LayerNormalization" else []
    g = helper.make_graph(
        [helper.make_node(op, ins, ["y"], **attrs)],
        "t",
        graph_ins,
        [helper.make_tensor_value_info("y", code, None)],
        inits,
    )
    g.output[0].type.tensor_type.shape.SetInParent()
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("op, attrs", OPS, ids=[o for o, _ in OPS])
def test_low_precision_compute_matches_float32_rounded(tname, op, attrs):
    code, npd, step = TYPES[tname]
    x = (np.random.default_rng(3).uniform(0.2, 2.0, (4, 4))).astype(npd)
    got = evaluate(parse_onnx(_model(op, attrs, code)), {"x": x})[0]
    assert got.dtype == npd
    want = evaluate(parse_onnx(_model(op, attrs, TensorProto.FLOAT)), {"x": x.astype(np.float32)})[0]
    scale = max(float(np.abs(want).max()), 1e-3)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2 * step, atol=2 * step * scale)


@pytest.mark.parametrize("code, name", [(TensorProto.INT4, "int4"), (TensorProto.UINT4, "uint4")])
def test_packed_int4_initializers_dequantize_like_onnxruntime(code, name):
    ort = pytest.importorskip("onnxruntime")
    lo, hi = dtypes.int_limits(name)
    q = np.arange(lo, hi + 1)[:15].reshape(3, 5)  # odd count: the last byte is half used
    w = helper.make_tensor("w", code, [3, 5], q.reshape(-1).tolist())
    zero = helper.make_tensor("z", code, [], [1])
    g = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["y"]), helper.make_node("Mul", ["y", "x"], ["out"])],
        "t",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 5])],
        [w, zero, helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    x = np.full((3, 5), 2.0, np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(evaluate(parse_onnx(m), {"x": x})[0], want)
    np.testing.assert_array_equal(want, (q - 1) * 0.5 * 2)


def test_float8_casts_saturate_unless_told_not_to():
    x = np.array([1000.0, -1000.0, np.inf, 1.0], np.float32)
    for saturate, want in ((1, [448.0, -448.0, 448.0, 1.0]), (0, [np.nan, np.nan, np.nan, 1.0])):
        node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN, saturate=saturate)
        g = helper.make_graph(
            [node],
            "t",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [4])],
        )
        got = evaluate(parse_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])), {"x": x})[0]
        np.testing.assert_array_equal(got.astype(np.float32), np.array(want, np.float32))


@pytest.mark.parametrize(
    "tname", ["int4", "uint4", "int2", "float8e4m3fn", "float8e5m2fnuz", "float4e2m1", "float8e8m0"]
)
def test_low_precision_literals_round_trip_through_the_text_form(tname):
    from migx_explore.compiler.ir import Program
    from migx_explore.compiler.parser import parse
    from migx_explore.compiler.printer import print_program

    p = Program()
    p.main.add_return([p.main.add_literal(np.array([1, 2, 0, 1]).astype(dtypes.np_dtype(tname)))])
    assert parse(print_program(p, full=True)) == p


def test_cast_to_four_and_two_bit_integers_out_of_range():
    """Float to int4/int2 out of range is undefined in ONNX's Cast: we give 0, as ONNX's own test
    data and onnx.reference do; from an integer the spec says to keep the low bits."""
    from migx_explore.compiler.ops.pointwise import _convert

    floats = np.array([-9.0, -8.0, 7.9, 8.0, 15.0, np.nan, np.inf], np.float32)
    assert _convert(floats, "int4").astype(int).tolist() == [0, -8, 7, 0, 0, 0, 0]
    assert _convert(np.array([-1.0, 3.0, 4.0], np.float32), "uint2").astype(int).tolist() == [0, 3, 0]
    ints = np.array([8, 15, -9, 17], np.int32)
    assert _convert(ints, "int4").astype(int).tolist() == [-8, -1, 7, 1]
