"""Single-node checks against onnxruntime for ONNX Runtime's com.microsoft ops and the quantized ops
the node conformance suite does not cover (ORT CPU runs them; a kernel ORT's CPU build lacks is
skipped with that reason)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import param_name, parse_onnx

ort = pytest.importorskip("onnxruntime")

F, U8, I8 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8
MS = "com.microsoft"


def _run(
    node: onnx.NodeProto,
    inputs: dict[str, np.ndarray],
    inits: dict[str, np.ndarray],
    outputs: list[str],
    *,
    opset: int = 17,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    out_type: int = F,
) -> None:
    g = helper.make_graph(
        [node],
        "t",
        [
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in inputs.items()
        ],
        [helper.make_tensor_value_info(o, out_type, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    for out in g.output:
        out.type.tensor_type.shape.SetInParent()  # unknown rank: the checker still wants the field
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 9
    try:
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - ORT's CPU build lacks some contrib kernels
        pytest.skip(f"onnxruntime CPU cannot run {node.op_type}: {str(e).splitlines()[0][:120]}")
    want = sess.run(None, inputs)
    got = evaluate(parse_onnx(m), {param_name(k): v for k, v in inputs.items()})
    for name, g_, w in zip(outputs, got, want):
        np.testing.assert_allclose(
            np.asarray(g_, np.float64), np.asarray(w, np.float64), atol=atol, rtol=rtol, err_msg=name
        )


RNG = np.random.default_rng(7)


def _f(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_ms_rotary_embedding_with_position_ids(interleaved):
    b, s, n, d = 2, 3, 2, 8
    pos = np.array([[0, 1, 2], [4, 5, 6]], np.int64)
    angles = np.arange(8)[:, None] / (10000 ** (np.arange(d // 2) / (d // 2)))
    node = helper.make_node(
        "RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, interleaved=interleaved, num_heads=n
    )
    _run(
        node,
        {"x": _f(b, s, n * d)},
        {"pos": pos, "cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)},
        ["y"],
    )


def test_skip_simplified_layer_norm():
    node = helper.make_node(
        "SkipSimplifiedLayerNormalization", ["x", "skip", "g", "bias"], ["y", "", "", "sum"], domain=MS, epsilon=1e-6
    )
    _run(node, {"x": _f(2, 3, 8), "skip": _f(2, 3, 8)}, {"g": _f(8), "bias": _f(8)}, ["y", "sum"])


def test_simplified_layer_norm_is_rms_norm():
    # ORT registers it in the ONNX domain, where the ONNX checker rejects it; from com.microsoft it imports.
    x, g = _f(2, 3, 8), _f(8)
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], domain=MS, epsilon=1e-6)
    graph = helper.make_graph(
        [node],
        "t",
        [helper.make_tensor_value_info("x", F, [2, 3, 8])],
        [helper.make_tensor_value_info("y", F, [2, 3, 8])],
        [numpy_helper.from_array(g, "g")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    got = evaluate(parse_onnx(m), {"x": x})[0]
    want = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["QuickGelu", "FastGelu", "BiasGelu"])
def test_gelu_variants(op):
    ins = ["x"] if op == "QuickGelu" else ["x", "bias"]
    node = helper.make_node(op, ins, ["y"], domain=MS)
    _run(node, {"x": _f(2, 5, 8)}, {} if op == "QuickGelu" else {"bias": _f(8)}, ["y"])


def test_multi_head_attention_with_bias():
    b, s, n, d = 2, 4, 2, 4
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias"], ["y"], domain=MS, num_heads=n)
    _run(
        node, {"q": _f(b, s, n * d), "k": _f(b, s + 1, n * d), "v": _f(b, s + 1, n * d)}, {"bias": _f(3 * n * d)}, ["y"]
    )


@pytest.mark.parametrize("quant_type", [0, 1])
def test_matmul_bnb4(quant_type):
    k, n, block = 16, 4, 16
    packed = RNG.integers(0, 256, size=(n * k // 2,)).astype(np.uint8)
    node = helper.make_node(
        "MatMulBnb4", ["a", "b", "absmax"], ["y"], domain=MS, K=k, N=n, block_size=block, quant_type=quant_type
    )
    _run(node, {"a": _f(3, k)}, {"b": packed, "absmax": np.abs(_f(n * k // block)) + 0.5}, ["y"])


def test_matmul_nbits_with_zero_points():
    k, n, block = 32, 3, 16
    q = RNG.integers(0, 16, size=(n, k)).astype(np.uint8)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(n, k // block, block // 2)
    zp = RNG.integers(0, 16, size=(n, k // block)).astype(np.uint8)
    zp_packed = (zp[:, 0::2] | (zp[:, 1::2] << 4)).reshape(-1)
    node = helper.make_node("MatMulNBits", ["a", "b", "s", "zp"], ["y"], domain=MS, K=k, N=n, bits=4, block_size=block)
    _run(
        node,
        {"a": _f(2, k)},
        {"b": packed, "s": np.abs(_f(n * k // block, scale=0.05)), "zp": zp_packed},
        ["y"],
        atol=1e-4,
    )


def _qparams(scale: float, zero: int, dtype=np.uint8) -> tuple[np.ndarray, np.ndarray]:
    return np.float32(scale), np.asarray(zero, dtype)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary(op):
    a = RNG.integers(0, 255, size=(2, 6)).astype(np.uint8)
    b = RNG.integers(0, 255, size=(6,)).astype(np.uint8)
    node = helper.make_node(op, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], domain=MS)
    (as_, az), (bs, bz), (ys, yz) = _qparams(0.05, 128), _qparams(0.02, 100), _qparams(0.1, 120)
    params = {"as": as_, "az": az, "bs": bs, "bz": bz, "ys": ys, "yz": yz}
    _run(node, {"a": a, "b": b}, params, ["y"], atol=1, out_type=U8)


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool", "QLinearAveragePool"])
def test_qlinear_unary(op):
    x = RNG.integers(0, 255, size=(1, 2, 4, 4)).astype(np.uint8)
    attrs = {"kernel_shape": [2, 2]} if op == "QLinearAveragePool" else {}
    node = helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, **attrs)
    (xs, xz), (ys, yz) = _qparams(0.05, 128), _qparams(0.01, 10)
    _run(node, {"x": x}, {"xs": xs, "xz": xz, "ys": ys, "yz": yz}, ["y"], atol=1, out_type=U8)


def test_qlinear_concat():
    a = RNG.integers(0, 255, size=(2, 3)).astype(np.uint8)
    b = RNG.integers(0, 255, size=(2, 2)).astype(np.uint8)
    node = helper.make_node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["y"], domain=MS, axis=1)
    (as_, az), (bs, bz), (ys, yz) = _qparams(0.05, 128), _qparams(0.02, 100), _qparams(0.04, 120)
    params = {"as": as_, "az": az, "bs": bs, "bz": bz, "ys": ys, "yz": yz}
    _run(node, {"a": a, "b": b}, params, ["y"], atol=1, out_type=U8)


def _matmul_integer_to_float_case(a_high: int):
    a = RNG.integers(0, a_high, size=(3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 127, size=(4, 5)).astype(np.int8)
    node = helper.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "bz", "bias"], ["y"], domain=MS)
    inits = {
        "b": b,
        "as": np.float32(0.02),
        "bs": np.full(5, 0.01, np.float32),
        "az": np.uint8(64),
        "bz": np.zeros(5, np.int8),
        "bias": _f(5),
    }
    return node, a, inits


def test_matmul_integer_to_float():
    # uint8 x int8 on x86 without VNNI goes through pmaddubsw, which saturates a pair of products
    # in int16 (ORT's documented u8s8 limit, the reason for its reduce_range): compare against ORT
    # with 7-bit activations, where no pair can saturate.
    node, a, inits = _matmul_integer_to_float_case(a_high=128)
    _run(node, {"a": a}, inits, ["y"], atol=1e-4)


def test_matmul_integer_to_float_full_range_is_exact():
    # Over the whole uint8 range the reference is the definition itself, computed in float64.
    node, a, inits = _matmul_integer_to_float_case(a_high=256)
    g = helper.make_graph(
        [node],
        "t",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)],
        [helper.make_tensor_value_info("y", F, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    g.output[0].type.tensor_type.shape.SetInParent()
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 9
    (got,) = evaluate(parse_onnx(m), {param_name("a"): a})
    exact = (a.astype(np.float64) - 64) * 0.02 @ (inits["b"].astype(np.float64) * 0.01) + inits["bias"]
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5)


def test_matmul_integer_per_column_zero_points():
    a = RNG.integers(0, 255, size=(3, 4)).astype(np.uint8)
    b = RNG.integers(0, 255, size=(4, 2)).astype(np.uint8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    _run(
        node,
        {"a": a},
        {"b": b, "az": np.uint8(3), "bz": np.array([4, 5], np.uint8)},
        ["y"],
        atol=0,
        out_type=TensorProto.INT32,
    )


@pytest.mark.parametrize(
    "op, attrs", [("RandomNormal", {"mean": 1.0, "scale": 2.0}), ("RandomUniform", {"low": -1.0, "high": 3.0})]
)
def test_random_ops_are_seeded_like_the_onnx_reference(op, attrs):
    from onnx.reference import ReferenceEvaluator

    def model(seed):
        node = helper.make_node(op, [], ["y"], shape=[3, 4], seed=seed, **attrs)
        g = helper.make_graph([node], "r", [], [helper.make_tensor_value_info("y", F, [3, 4])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    a, b, c = (evaluate(parse_onnx(model(s)), {})[0] for s in (1.0, 1.0, 2.0))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and a.dtype == np.float32
    np.testing.assert_array_equal(a, ReferenceEvaluator(model(1.0)).run(None, {})[0])


def test_group_query_attention_masks_each_batch_entry_by_its_length():
    b, s, heads, kv, d = 2, 4, 4, 2, 8
    node = helper.make_node(
        "GroupQueryAttention",
        ["q", "k", "v", "", "", "seqlens", "total"],
        ["y", "pk", "pv"],
        domain=MS,
        num_heads=heads,
        kv_num_heads=kv,
    )
    feeds = {
        "q": _f(b, s, heads * d),
        "k": _f(b, s, kv * d),
        "v": _f(b, s, kv * d),
        "seqlens": np.array([3, 1], np.int32),
    }  # the second entry holds 2 tokens (right-padded)
    g = helper.make_graph(
        [node],
        "t",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info("y", F, [b, s, heads * d])],
        [numpy_helper.from_array(np.array(s, np.int32), "total")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 9
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = evaluate(parse_onnx(m), feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_group_query_attention_decode_step_with_past():
    b, p, heads, kv, d = 2, 3, 4, 2, 8
    node = helper.make_node(
        "GroupQueryAttention",
        ["q", "k", "v", "pk", "pv", "seqlens", "total"],
        ["y", "present_k", "present_v"],
        domain=MS,
        num_heads=heads,
        kv_num_heads=kv,
    )
    feeds = {
        "q": _f(b, 1, heads * d),
        "k": _f(b, 1, kv * d),
        "v": _f(b, 1, kv * d),
        "pk": _f(b, kv, p, d),
        "pv": _f(b, kv, p, d),
    }
    g = helper.make_graph(
        [node],
        "t",
        [helper.make_tensor_value_info(k, F, v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, F, None) for o in ("y", "present_k", "present_v")],
        [
            numpy_helper.from_array(np.full(b, p, np.int32), "seqlens"),
            numpy_helper.from_array(np.array(p + 1, np.int32), "total"),
        ],
    )
    for out in g.output:
        out.type.tensor_type.shape.SetInParent()
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 9
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = evaluate(parse_onnx(m), feeds)
    for name, g_, w in zip(("y", "present_k", "present_v"), got, want):
        np.testing.assert_allclose(g_, w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_multi_head_attention_with_padding_mask_and_attention_bias():
    b, s, n, d = 2, 3, 2, 4
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "mask", "ab"], ["y"], domain=MS, num_heads=n)
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], np.int32)
    _run(
        node,
        {"q": _f(b, s, n * d), "k": _f(b, 4, n * d), "v": _f(b, 4, n * d)},
        {"mask": mask, "ab": _f(1, n, s, 4)},
        ["y"],
    )


def _ours(node: onnx.NodeProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    g = helper.make_graph(
        [node],
        "t",
        [helper.make_tensor_value_info(k, F, v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info("y", F, None)],
    )
    g.output[0].type.tensor_type.shape.SetInParent()
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    return evaluate(parse_onnx(m), feeds)[0]


def _onnx_reference(nodes, feeds: dict[str, np.ndarray], opset: int = 21) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info(k, F, v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info("y", F, None)],
    )
    return ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])).run(None, feeds)[0]


# ORT's CPU build has no kernels for these four (CUDA only): checked against onnx.reference on the
# standard-op graph ORT's docs give as their meaning.
def test_bias_add_and_bias_split_gelu():
    x, bias, skip = _f(2, 3, 8), _f(8), _f(2, 3, 8)
    np.testing.assert_allclose(
        _ours(helper.make_node("BiasAdd", ["x", "b", "s"], ["y"], domain=MS), {"x": x, "b": bias, "s": skip}),
        x + bias + skip,
        rtol=1e-6,
    )
    want = _onnx_reference(
        [
            helper.make_node("Add", ["x", "b"], ["xb"]),
            helper.make_node("Split", ["xb"], ["l", "r"], axis=-1, num_outputs=2),
            helper.make_node("Gelu", ["r"], ["g"]),
            helper.make_node("Mul", ["l", "g"], ["y"]),
        ],
        {"x": x, "b": bias},
    )
    got = _ours(helper.make_node("BiasSplitGelu", ["x", "b"], ["y"], domain=MS), {"x": x, "b": bias})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_nhwc_conv_and_nhwc_group_norm_with_silu():
    x, w, b = _f(1, 5, 5, 4), _f(6, 4, 3, 3), _f(6)
    nchw = [helper.make_node("Transpose", ["x"], ["xc"], perm=[0, 3, 1, 2])]
    want = _onnx_reference(
        nchw
        + [
            helper.make_node("Conv", ["xc", "w", "b"], ["yc"], pads=[1, 1, 1, 1]),
            helper.make_node("Transpose", ["yc"], ["y"], perm=[0, 2, 3, 1]),
        ],
        {"x": x, "w": w, "b": b},
    )
    got = _ours(
        helper.make_node("NhwcConv", ["x", "w", "b"], ["y"], domain=MS, pads=[1, 1, 1, 1]), {"x": x, "w": w, "b": b}
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    g, beta = _f(4), _f(4)
    want = _onnx_reference(
        nchw
        + [
            helper.make_node("GroupNormalization", ["xc", "g", "beta"], ["n"], num_groups=2, epsilon=1e-5),
            helper.make_node("Sigmoid", ["n"], ["s"]),
            helper.make_node("Mul", ["n", "s"], ["a"]),
            helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 3, 1]),
        ],
        {"x": x, "g": g, "beta": beta},
    )
    got = _ours(
        helper.make_node("GroupNorm", ["x", "g", "beta"], ["y"], domain=MS, groups=2, activation=1, epsilon=1e-5),
        {"x": x, "g": g, "beta": beta},
    )
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
