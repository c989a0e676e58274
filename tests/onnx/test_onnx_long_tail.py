"""The ONNX long tail (issue 24 item 4): op semantics a peer compiler's parser corpus found wrong,
each checked against ONNX Runtime, and against onnx.reference.ReferenceEvaluator where ORT refuses
the model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from tests.onnx.onnx_util import F, check_against_ort, init, make_model, run_ort, run_ours, vi


def check_against_reference(model: onnx.ModelProto, feed: dict, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Our import + reference evaluation equals onnx's own ReferenceEvaluator (the second oracle)."""
    ours = run_ours(model, feed)
    ref = ReferenceEvaluator(model).run(None, feed)
    for a, b in zip(ours, ref):
        assert a.shape == np.shape(b) and a.dtype == np.asarray(b).dtype, (a.shape, a.dtype, np.shape(b))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def check_against_oracles(model: onnx.ModelProto, feed: dict, rtol: float = 1e-5, atol: float = 1e-5) -> str:
    """ONNX Runtime where it runs the model, else onnx.reference; then the pipelines. Returns the
    oracle used."""
    from pipeline_check import check_pipelines

    from migx_explore.compiler.onnx import param_name, parse_onnx

    try:
        run_ort(model, feed)
    except Exception:  # noqa: BLE001 - ORT refuses some valid models; the second oracle decides
        check_against_reference(model, feed, rtol, atol)
        oracle = "onnx.reference"
    else:
        check_against_ort(model, feed, rtol, atol, pipelines=False)
        oracle = "onnxruntime"
    check_pipelines(parse_onnx(model), {param_name(k): v for k, v in feed.items()})
    return oracle


# ---- Pow: integer base, float exponent ---------------------------------------------------------------
@pytest.mark.parametrize("itype", [TensorProto.INT32, TensorProto.INT64])
def test_pow_integer_base_float_exponent_truncates_the_result_not_the_exponent(itype):
    m = make_model(
        [helper.make_node("Pow", ["x", "e"], ["y"])], [vi("x", itype, [4]), vi("e", F, [4])], [vi("y", itype, [4])]
    )
    npt = helper.tensor_dtype_to_np_dtype(itype)
    feed = {"x": np.array([2, 3, 5, 7], npt), "e": np.array([1.82, 0.5, 2.1, -0.3], np.float32)}
    out = check_against_ort(m, feed)
    assert out[0][0] == 3  # 2 ** 1.82 = 3.53


# ---- Shrink on integers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "itype,values",
    [(TensorProto.INT8, [-9, -5, -2, -1, 0, 1, 2, 5, 9]), (TensorProto.UINT8, [0, 1, 2, 5, 9, 200, 255])],
)
def test_shrink_on_integers_truncates_and_takes_uint8(itype, values):
    n = len(values)
    m = make_model(
        [helper.make_node("Shrink", ["x"], ["y"], lambd=1.5, bias=1.5)], [vi("x", itype, [n])], [vi("y", itype, [n])]
    )
    npt = helper.tensor_dtype_to_np_dtype(itype)
    check_against_ort(m, {"x": np.array(values, npt)})


# ---- Celu(alpha=0): its NaN outputs survive optimize_module -------------------------------------------------
def test_celu_alpha_zero_keeps_its_nans_through_the_pipelines():
    m = make_model([helper.make_node("Celu", ["x"], ["y"], alpha=0.0)], [vi("x", F, [6])], [vi("y", F, [6])])
    feed = {"x": np.array([-2, -0.5, 0, 0.5, 2, np.nan], np.float32)}
    out = check_against_ort(m, feed)  # the pipelines included: NaN must stay NaN after every pass
    assert np.isnan(out[0][2:]).all() and (out[0][:2] == 0).all()


# ---- BatchNormalization: rank 1, mixed float types ----------------------------------------------------------
def _bn_model(x_type, p_type, lens):
    c = lens[1] if len(lens) > 1 else lens[0]
    rng = np.random.default_rng(0)
    npt = helper.tensor_dtype_to_np_dtype(p_type)
    params = [
        init(n, v.astype(npt))
        for n, v in (
            ("s", rng.uniform(0.5, 2, c)),
            ("b", rng.normal(size=c)),
            ("mu", rng.normal(size=c)),
            ("var", rng.uniform(0.5, 2, c)),
        )
    ]
    return make_model(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y"])],
        [vi("x", x_type, lens)],
        [vi("y", x_type, lens)],
        params,
        opset=15,
    )


def test_rank1_batchnorm_is_applied_per_element():
    m = _bn_model(F, F, [5])
    check_against_reference(m, {"x": np.random.default_rng(1).normal(size=5).astype(np.float32)})


def test_batchnorm_fp16_input_with_fp32_statistics():
    m = _bn_model(TensorProto.FLOAT16, F, [2, 3, 4])
    x = np.random.default_rng(1).normal(size=(2, 3, 4)).astype(np.float16)
    check_against_ort(m, {"x": x}, rtol=2e-3, atol=2e-3)


# ---- Pad: reflect wider than the dimension: ORT refuses, so the importer refuses (decision 22; issue 40) ----
def test_reflect_pad_wider_than_the_dimension_is_refused_as_ort_does():
    from migx_explore.compiler.errors import MigxError
    from migx_explore.compiler.onnx import parse_onnx

    m = make_model(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
        [vi("x", F, [2, 3, 1])],
        [vi("y", F, None)],
        [init("p", np.array([1, 5, 2, 0, 4, 3], np.int64))],
    )
    with pytest.raises(MigxError, match="reflect pad of 5 on axis 1"):
        parse_onnx(m)
    # the widest reflection ORT runs (the axis minus one) still matches it
    m2 = make_model(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
        [vi("x", F, [2, 3, 1])],
        [vi("y", F, None)],
        [init("p", np.array([1, 2, 0, 1, 2, 0], np.int64))],
    )
    check_against_ort(m2, {"x": np.arange(6, dtype=np.float32).reshape(2, 3, 1)})


# ---- Resize: tf_half_pixel_for_nn; align_corners downsampling by a float scale ------------------------------
@pytest.mark.parametrize(
    "ctm,mode,scale,opset",
    [
        ("tf_half_pixel_for_nn", "nearest", 0.6, 11),
        ("tf_half_pixel_for_nn", "nearest", 1.7, 11),
        ("align_corners", "nearest", 0.6, 13),
        ("align_corners", "linear", 0.6, 13),
        ("align_corners", "linear", 0.7, 18),
        ("align_corners", "nearest", 1.5, 18),
        ("pytorch_half_pixel", "linear", 0.4, 13),
        ("pytorch_half_pixel", "cubic", 0.4, 13),
    ],
)  # one output row
def test_resize_coordinate_modes_match_onnxruntime(ctm, mode, scale, opset):
    node = helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode=mode, coordinate_transformation_mode=ctm)
    m = make_model(
        [node],
        [vi("x", F, [1, 1, 3, 4])],
        [vi("y", F, None)],
        [init("roi", np.zeros(0, np.float32)), init("s", np.array([1, 1, scale, scale], np.float32))],
        opset=opset,
    )
    out = check_against_ort(m, {"x": np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)})
    if (ctm, scale) == ("align_corners", 0.6):
        assert out[0][0, 0, 0, -1] == 3  # the last output column reads the last input column


# ---- Einsum with broadcasting ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("ij, jk -> ik", [(3, 1), (2, 2)]),  # a summed letter of size 1 on one side (was refused at import)
        ("bik,bkj->bij", [(1, 3, 1), (2, 2, 4)]),  # batch and summed letters broadcast (was refused)
        ("bik,bkj->bij", [(1, 3, 2), (2, 1, 4)]),  # the opposite sides (was refused)
        ("bac,cd,def->ebc", [(2, 2, 2), (2, 2), (2, 2, 2)]),  # crashed in required.simplify_reshapes
        ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]),
        ("...ij,...jk,...kl->...il", [(2, 1, 2, 3), (1, 3, 3, 4), (4, 2)]),
        ("...ik,kj...->ij...", [(3, 2, 3, 2), (2, 4, 3, 2)]),
        ("..., ...", [(2, 3), (2, 3)]),
        ("i...k,k...j->i...j", [(3, 2, 2), (2, 2, 3)]),
        ("...i,...i,...i->...", [(2, 1, 3), (1, 4, 3), (3,)]),
        ("ik,jkl,il->ij", [(2, 3), (5, 3, 7), (2, 7)]),
    ],
)
def test_einsum_with_broadcasting(eq, shapes):
    rng = np.random.default_rng(0)
    feed = {f"x{k}": rng.normal(size=s).astype(np.float32) for k, s in enumerate(shapes)}
    m = make_model(
        [helper.make_node("Einsum", list(feed), ["y"], equation=eq)],
        [vi(n, F, list(v.shape)) for n, v in feed.items()],
        [vi("y", F, None)],
        opset=12,
    )
    # make_model declares the output as ONNX's Einsum inference sees it, which does not broadcast
    # (it would declare [1, 3, 4] for [2, 3, 4]); declare it of unknown shape, as an exporter may.
    m.graph.output[0].type.tensor_type.ClearField("shape")
    m.graph.output[0].type.tensor_type.shape.SetInParent()
    np.testing.assert_allclose(run_ours(m, feed)[0], np.einsum(eq, *feed.values()), rtol=1e-5, atol=1e-5)
    check_against_oracles(m, feed)


# ---- com.microsoft ops without a declared opset ----------------------------------------------------------------
def test_contrib_ops_without_a_declared_com_microsoft_opset_are_read():
    from migx_explore.compiler.onnx import parse_onnx

    g = helper.make_graph(
        [helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft")],
        "g",
        [vi("x", F, [2, 3])],
        [vi("y", F, [2, 3])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    before = m.SerializeToString()
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(run_ours(m, {"x": x})[0], run_ort(m, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert m.SerializeToString() == before  # the caller's model is not edited
    assert parse_onnx(before) is not None  # bytes too


# ---- com.microsoft.Attention; MultiHeadAttention with packed QKV / KV ---------------------------------------------
MS = "com.microsoft"


def _ms_model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("mask", [None, "raw", "lengths", "start_end", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_com_microsoft_attention(mask, unidirectional):
    b, s, d, n = 2, 5, 8, 2
    rng = np.random.default_rng(0)
    inits = [
        init("w", rng.normal(0, 0.3, (d, 3 * d)).astype(np.float32)),
        init("bias", rng.normal(0, 0.1, 3 * d).astype(np.float32)),
    ]
    names = ["x", "w", "bias"]
    feed = {"x": rng.normal(size=(b, s, d)).astype(np.float32)}
    inputs = [vi("x", F, [b, s, d])]
    if mask == "raw":
        names.append("m")
        feed["m"] = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)
        inputs.append(vi("m", TensorProto.INT32, [b, s]))
    elif mask == "lengths":
        names.append("m")
        feed["m"] = np.array([5, 3], np.int32)
        inputs.append(vi("m", TensorProto.INT32, [b]))
    elif mask == "start_end":  # [2B]: end positions, then start positions
        names.append("m")
        feed["m"] = np.array([5, 4, 0, 1], np.int32)
        inputs.append(vi("m", TensorProto.INT32, [2 * b]))
    elif mask == "3d":  # [B, S, T]: one key mask per query
        names.append("m")
        feed["m"] = (rng.random((b, s, s)) > 0.3).astype(np.int32)
        feed["m"][..., 0] = 1
        inputs.append(vi("m", TensorProto.INT32, [b, s, s]))
    node = helper.make_node("Attention", names, ["y"], domain=MS, num_heads=n, unidirectional=unidirectional)
    m = _ms_model([node], inputs, [vi("y", F, [b, s, d])], inits)
    check_against_ort(m, feed, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("packing", ["qkv", "kv"])
def test_multi_head_attention_packed(packing):
    """ORT's CPU provider does not implement the packed forms: ours on the packed model must equal
    ORT on the same data given as separate query, key and value."""
    b, s, n, h = 2, 4, 2, 3
    rng = np.random.default_rng(1)
    q = rng.normal(size=(b, s, n * h)).astype(np.float32)
    k, v = (rng.normal(size=(b, 6 if packing == "kv" else s, n, h)).astype(np.float32) for _ in range(2))
    length = k.shape[1]
    if packing == "qkv":
        packed = {"qkv": np.stack([q.reshape(b, s, n, h), k, v], axis=3)}
        inputs, names = [vi("qkv", F, [b, s, n, 3, h])], ["qkv"]
    else:
        packed = {"q": q, "kv": np.stack([k, v], axis=3)}
        inputs, names = [vi("q", F, [b, s, n * h]), vi("kv", F, [b, length, n, 2, h])], ["q", "kv"]
    m = _ms_model(
        [helper.make_node("MultiHeadAttention", names, ["y"], domain=MS, num_heads=n)],
        inputs,
        [vi("y", F, [b, s, n * h])],
    )
    plain = _ms_model(
        [helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS, num_heads=n)],
        [vi("q", F, [b, s, n * h]), vi("k", F, [b, length, n * h]), vi("v", F, [b, length, n * h])],
        [vi("y", F, [b, s, n * h])],
    )
    want = run_ort(plain, {"q": q, "k": k.reshape(b, length, n * h), "v": v.reshape(b, length, n * h)})[0]
    np.testing.assert_allclose(run_ours(m, packed)[0], want, rtol=1e-4, atol=1e-5)


# ---- Slice: a negative step whose start lies below the range clamps to 0 (found by the fuzzer) -----------------
@pytest.mark.parametrize("start,end,step", [(-4, -4, -1), (5, -5, -1), (-1, -10, -2), (-10, 10, 3)])
def test_slice_clamps_like_onnx_not_like_python(start, end, step):
    consts = [
        init("st", np.array([start], np.int64)),
        init("en", np.array([end], np.int64)),
        init("ax", np.array([0], np.int64)),
        init("sp", np.array([step], np.int64)),
    ]
    m = make_model(
        [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
        [vi("x", F, [2, 3])],
        [vi("y", F, None)],
        consts,
    )
    check_against_ort(m, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def test_rmsnorm_fp16_input_with_fp32_scale_gives_fp32():
    """RMSNormalization (opset 23): Y has the scale's type V, which may differ from X's."""
    m = make_model(
        [helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1)],
        [vi("x", TensorProto.FLOAT16, [2, 4])],
        [vi("y", F, [2, 4])],
        [init("s", np.linspace(0.5, 2, 4).astype(np.float32))],
        opset=23,
    )
    x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float16)
    # Both oracles fail here: ORT's expansion refuses the mixed Mul, onnx.reference returns X's
    # type. The schema (Y: V) and the formula decide.
    s = np.linspace(0.5, 2, 4).astype(np.float32)
    xf = x.astype(np.float32)
    want = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-5) * s
    got = run_ours(m, {"x": x})[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---- ReduceLogSumExp with noop_with_empty_axes (found by the fuzzer on integer inputs) --------------------------
@pytest.mark.parametrize(
    "elem,values", [(TensorProto.INT32, [[2, -4, 3], [1, 1, 0]]), (F, [[100.0, -4.5, 3.0], [1.0, 90.0, 0.0]])]
)
def test_reduce_log_sum_exp_without_axes_is_the_identity(elem, values):
    m = make_model(
        [helper.make_node("ReduceLogSumExp", ["x"], ["y"], keepdims=0, noop_with_empty_axes=1)],
        [vi("x", elem, [2, 3])],
        [vi("y", elem, None)],
    )
    x = np.array(values, helper.tensor_dtype_to_np_dtype(elem))
    out = check_against_ort(m, {"x": x})
    np.testing.assert_array_equal(out[0], x)  # float32 exp(100) would overflow
