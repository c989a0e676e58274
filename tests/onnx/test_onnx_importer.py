"""ONNX importer: MIGraphX-style decompositions, static shape chains, input dims, opset variants,
errors and the text round trip."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_util import I64, F, check_against_ort, const, init, make_model, op_names, run_ours, vi

from migx_explore.compiler import parse, print_program
from migx_explore.compiler.errors import ImportError_, MigxError
from migx_explore.compiler.onnx import ConstantInputRequired, param_name, parse_onnx, supported_ops

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


REQUIRED = """Abs Add And ArgMax ArgMin AveragePool BatchNormalization Cast Ceil Clip Concat Constant ConstantOfShape
Conv ConvTranspose Cos CumSum DepthToSpace DequantizeLinear Div Dropout Einsum Elu Equal Erf Exp Expand Flatten Floor
Gather GatherElements GatherND Gelu Gemm GlobalAveragePool GlobalMaxPool Greater GreaterOrEqual HardSigmoid HardSwish
Identity InstanceNormalization IsInf IsNaN LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax MatMul Max
MaxPool Mean Min Mod Mul Neg Not OneHot Or Pad Pow PRelu QuantizeLinear Range Reciprocal ReduceL2 ReduceLogSumExp
ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize Round ScatterElements ScatterND
Shape Sigmoid Sign Sin Slice Softmax Softplus SpaceToDepth Split Sqrt Squeeze Sub Sum Tanh Tile TopK Transpose Trilu
Unsqueeze Where Xor Tan Asin Size Upsample ReduceL1 Selu Celu Mish Softsign ThresholdedRelu Hardmax BitShift""".split()


def test_supported_ops_cover_the_required_list():
    missing = sorted(set(REQUIRED) - set(supported_ops()))
    assert not missing


# ---- decompositions ----------------------------------------------------------------------------
def test_implicit_broadcast_becomes_multibroadcast():
    m = make_model(
        [helper.make_node("Add", ["a", "b"], ["y"])], [vi("a", F, [2, 3]), vi("b", F, [3])], [vi("y", F, [2, 3])]
    )
    p = parse_onnx(m)
    bc = [i for i in p.main if i.name == "multibroadcast"]
    assert len(bc) == 1 and bc[0].op["out_lens"] == (2, 3) and bc[0].inputs[0].param_name == "b"
    check_against_ort(m, {"a": rand(2, 3), "b": rand(3)})


def test_gemm_becomes_transposes_dot_scale_and_broadcast_add():
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)
    m = make_model([node], [vi("a", F, [4, 3]), vi("b", F, [5, 4]), vi("c", F, [5])], [vi("y", F, [3, 5])])
    names = op_names(parse_onnx(m))
    assert names.count("transpose") == 2 and "dot" in names and names.count("mul") == 2
    assert "multibroadcast" in names and "add" in names
    check_against_ort(m, {"a": rand(4, 3), "b": rand(5, 4), "c": rand(5)})


def test_batchnorm_is_pointwise_with_broadcast_per_channel_literals():
    c = 4
    inits = [init("s", rand(c)), init("bias", rand(c)), init("mean", rand(c)), init("var", np.abs(rand(c)) + 0.5)]
    node = helper.make_node("BatchNormalization", ["x", "s", "bias", "mean", "var"], ["y"], epsilon=1e-3)
    m = make_model([node], [vi("x", F, [2, c, 3, 3])], [vi("y", F, [2, c, 3, 3])], inits)
    names = set(op_names(parse_onnx(m)))
    assert {"sub", "mul", "add", "rsqrt", "multibroadcast", "unsqueeze"} <= names
    check_against_ort(m, {"x": rand(2, c, 3, 3)})


def test_conv_bias_is_broadcast_plus_add():
    m = make_model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
        [vi("x", F, [1, 3, 8, 8])],
        [vi("y", F, None)],
        [init("w", rand(6, 3, 3, 3)), init("b", rand(6))],
    )
    p = parse_onnx(m)
    bc = next(i for i in p.main if i.name == "broadcast")
    assert bc.op["axis"] == 1 and bc.op["out_lens"] == (1, 6, 4, 4)
    assert any(i.name == "add" and bc in i.inputs for i in p.main)
    check_against_ort(m, {"x": rand(1, 3, 8, 8)}, rtol=1e-4, atol=1e-5)


def test_layernorm_decomposes_and_matches_ort():
    m = make_model(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
        [vi("x", F, [2, 5, 8])],
        [vi("y", F, [2, 5, 8])],
        [init("g", rand(8)), init("b", rand(8))],
    )
    names = op_names(parse_onnx(m))
    assert "reduce_mean" in names and "sqdiff" in names and "rsqrt" in names
    check_against_ort(m, {"x": rand(2, 5, 8)}, rtol=1e-4, atol=1e-5)


def test_matmul_1d_operands_and_batch_broadcast():
    cases = [([4], [4, 3]), ([2, 3, 4], [4]), ([2, 1, 3, 4], [5, 4, 6]), ([4], [4])]
    for sa, sb in cases:
        m = make_model(
            [helper.make_node("MatMul", ["a", "b"], ["y"])], [vi("a", F, sa), vi("b", F, sb)], [vi("y", F, None)]
        )
        a, b = rand(*sa), rand(*sb)
        out = run_ours(m, {"a": a, "b": b})[0]
        np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("ij->ji", [(3, 4)]),
        ("i,i", [(5,), (5,)]),
        ("...ij,...jk", [(2, 3, 4), (1, 4, 2)]),
        ("bii->bi", [(2, 3, 3)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
        ("ij->", [(3, 4)]),
    ],
)
def test_einsum_forms(eq, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    m = make_model(
        [helper.make_node("Einsum", names, ["y"], equation=eq)],
        [vi(n, F, list(s)) for n, s in zip(names, shapes)],
        [vi("y", F, None)],
        opset=12,
    )
    vals = [rand(*s) for s in shapes]
    out = run_ours(m, dict(zip(names, vals)))[0]
    np.testing.assert_allclose(out, np.einsum(eq, *vals), rtol=1e-5, atol=1e-5)


def test_gather_elements_is_a_gather_on_flattened_data():
    m = make_model(
        [helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)],
        [vi("x", F, [3, 4]), vi("i", I64, [3, 2])],
        [vi("y", F, [3, 2])],
    )
    p = parse_onnx(m)
    g = next(i for i in p.main if i.name == "gather")
    assert g.inputs[0].shape.lens == (12,)
    check_against_ort(m, {"x": rand(3, 4), "i": np.array([[0, -1], [3, 1], [2, 2]], np.int64)})


@pytest.mark.parametrize(
    "kw",
    [
        dict(strides=[2, 2]),
        dict(strides=[2, 2], output_padding=[1, 1]),
        dict(pads=[1, 0, 1, 2], group=2),
        dict(strides=[3, 2], output_shape=[10, 8]),
    ],
)
def test_conv_transpose_matches_ort(kw):
    m = make_model(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **kw)],
        [vi("x", F, [1, 4, 3, 3])],
        [vi("y", F, None)],
        [init("w", rand(4, 3, 3, 3)), init("b", rand(3 * kw.get("group", 1)))],
    )
    check_against_ort(m, {"x": rand(1, 4, 3, 3)}, rtol=1e-4, atol=1e-5)


# align_corners with a fractional output width (scale * length) is where onnxruntime and the ONNX
# reference differ; the op follows the reference (the conformance suite checks it), so keep it integral.
@pytest.mark.parametrize(
    "mode,ctm,scale",
    [
        ("nearest", "asymmetric", 1.5),
        ("linear", "half_pixel", 1.5),
        ("linear", "align_corners", 2.0),
        ("cubic", "half_pixel", 1.5),
    ],
)
def test_resize_matches_ort(mode, ctm, scale):
    m = make_model(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode=mode, coordinate_transformation_mode=ctm)],
        [vi("x", F, [1, 2, 4, 5])],
        [vi("y", F, None)],
        [init("s", np.array([1, 1, 2, scale], np.float32))],
    )
    check_against_ort(m, {"x": rand(1, 2, 4, 5)}, rtol=1e-4, atol=1e-5)


# ---- static shapes from shape-computing subgraphs ------------------------------------------------
def test_shape_gather_concat_reshape_chain_imports_static():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        const("zero", np.int64(0)),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        const("ax", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        const("tail", np.array([-1], np.int64)),
        helper.make_node("Concat", ["n1", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    m = make_model(nodes, [vi("x", F, [2, 3, 4])], [vi("y", F, None)])
    p = parse_onnx(m)
    r = next(i for i in p.main if i.name == "reshape")
    assert r.op["dims"] == (2, -1) and r.shape.lens == (2, 12)
    assert not any(i.shape.dynamic_shape for i in p.main if not i.is_return())
    check_against_ort(m, {"x": rand(2, 3, 4)})


def test_range_constantofshape_expand_with_shape_inputs():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        const("i1", np.array([1], np.int64)),
        const("i2", np.array([2], np.int64)),
        helper.make_node("Slice", ["s", "i1", "i2"], ["len1"]),
        helper.make_node("Squeeze", ["len1"], ["len"]),
        const("z", np.int64(0)),
        const("one", np.int64(1)),
        helper.make_node("Range", ["z", "len", "one"], ["pos"]),
        helper.make_node("ConstantOfShape", ["s"], ["ones"], value=init("v", np.array([1.0], np.float32))),
        helper.make_node("Cast", ["pos"], ["posf"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Expand", ["posf", "s"], ["pe"]),
        helper.make_node("Mul", ["pe", "ones"], ["pm"]),
        helper.make_node("Add", ["x", "pm"], ["y"]),
    ]
    m = make_model(nodes, [vi("x", F, [2, 5])], [vi("y", F, [2, 5])])
    p = parse_onnx(m)
    assert not any(i.name in ("@param",) and i.param_name != "x" for i in p.main)
    check_against_ort(m, {"x": rand(2, 5)})


# ---- inputs --------------------------------------------------------------------------------------
def _symbolic_model():
    return make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, ["batch", 3])], [vi("y", F, ["batch", 3])])


def test_symbolic_dim_defaults_with_a_warning_naming_input_and_dim():
    with pytest.warns(UserWarning, match=r"input 'x': dimension 0 \('batch'\)"):
        p = parse_onnx(_symbolic_model())
    assert p.main.get_parameter("x").shape.lens == (1, 3)
    with pytest.warns(UserWarning):
        assert parse_onnx(_symbolic_model(), default_dim=4).main.get_parameter("x").shape.lens == (4, 3)


def test_input_dims_fix_symbolic_dims_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = parse_onnx(_symbolic_model(), input_dims={"x": [8, 3]})
    assert p.main.get_parameter("x").shape.lens == (8, 3)
    with pytest.raises(ImportError_, match="rank"):
        parse_onnx(_symbolic_model(), input_dims={"x": [8]})
    with pytest.raises(ImportError_, match="unknown input.*'nope'"):
        parse_onnx(_symbolic_model(), input_dims={"nope": [1]})


def test_program_records_onnx_io_names_and_safe_param_names():
    m = make_model([helper.make_node("Neg", ["in put:0"], ["out/0"])], [vi("in put:0", F, [2])], [vi("out/0", F, [2])])
    p = parse_onnx(m)
    assert p.input_names == ["in put:0"] and p.output_names == ["out/0"]
    assert p.main.param_names() == [param_name("in put:0")] == ["in_put:0"]
    assert parse(print_program(p, full=True)) == p


def test_initializers_and_constants_become_literals():
    m = make_model(
        [
            const("k", np.float32(2.0)),
            helper.make_node("Mul", ["x", "k"], ["t"]),
            helper.make_node("Add", ["t", "w"], ["y"]),
        ],
        [vi("x", F, [3])],
        [vi("y", F, [3])],
        [init("w", rand(3))],
    )
    p = parse_onnx(m)
    assert p.main.param_names() == ["x"]
    assert sum(i.is_literal() for i in p.main) == 2


def test_constant_inputs_freeze_a_shape_input():
    m = make_model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [vi("x", F, [2, 6]), vi("shape", I64, [2])],
        [vi("y", F, None)],
    )
    with pytest.raises(ConstantInputRequired, match="depends on graph input.*shape") as e:
        parse_onnx(m)
    assert e.value.params == ["shape"]
    p = parse_onnx(m, constant_inputs={"shape": np.array([3, 4])})
    assert p.input_names == ["x"] and p.main.output_shapes()[0].lens == (3, 4)


# ---- opset variants ------------------------------------------------------------------------------
def test_reduce_axes_attribute_and_input_forms():
    x = rand(2, 3, 4)
    m11 = make_model(
        [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)],
        [vi("x", F, [2, 3, 4])],
        [vi("y", F, None)],
        opset=11,
    )
    m13 = make_model(
        [helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=0)],
        [vi("x", F, [2, 3, 4])],
        [vi("y", F, None)],
        [init("a", np.array([1], np.int64))],
        opset=13,
    )
    m17 = make_model(
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[-1])], [vi("x", F, [2, 3, 4])], [vi("y", F, None)], opset=17
    )
    m18 = make_model(
        [helper.make_node("ReduceMean", ["x", "a"], ["y"])],
        [vi("x", F, [2, 3, 4])],
        [vi("y", F, None)],
        [init("a", np.array([-1], np.int64))],
        opset=18,
    )
    for m in (m11, m13, m17, m18):
        check_against_ort(m, {"x": x})
    noop = make_model(
        [helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1)], [vi("x", F, [3, 4])], [vi("y", F, None)]
    )
    np.testing.assert_array_equal(run_ours(noop, {"x": x[0]})[0], x[0])


def test_split_attribute_input_and_num_outputs_forms():
    x = rand(7, 2)
    m11 = make_model(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=0, split=[3, 4])],
        [vi("x", F, [7, 2])],
        [vi("a", F, None), vi("b", F, None)],
        opset=11,
    )
    m13 = make_model(
        [helper.make_node("Split", ["x", "s"], ["a", "b"], axis=0)],
        [vi("x", F, [7, 2])],
        [vi("a", F, None), vi("b", F, None)],
        [init("s", np.array([3, 4], np.int64))],
        opset=13,
    )
    m18 = make_model(
        [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)],
        [vi("x", F, [7, 2])],
        [vi("a", F, None), vi("b", F, None), vi("c", F, None)],
        opset=18,
    )
    for m in (m11, m13, m18):
        check_against_ort(m, {"x": x})
    assert [o.shape[0] for o in run_ours(m18, {"x": x})] == [3, 3, 1]


def test_clip_min_max_as_inputs_and_attributes():
    x = rand(10) * 3
    m6 = make_model(
        [helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=0.5)], [vi("x", F, [10])], [vi("y", F, None)], opset=6
    )
    m11 = make_model(
        [helper.make_node("Clip", ["x", "lo", ""], ["y"])],
        [vi("x", F, [10])],
        [vi("y", F, None)],
        [init("lo", np.float32(-0.25))],
        opset=11,
    )
    np.testing.assert_allclose(run_ours(m6, {"x": x})[0], np.clip(x, -1.0, 0.5))
    check_against_ort(m11, {"x": x})


def test_pad_input_forms_and_negative_pads():
    x = rand(3, 4)
    m = make_model(
        [helper.make_node("Pad", ["x", "p", "v"], ["y"], mode="constant")],
        [vi("x", F, [3, 4])],
        [vi("y", F, None)],
        [init("p", np.array([1, -1, 0, 2], np.int64)), init("v", np.float32(7))],
    )
    check_against_ort(m, {"x": x})
    m2 = make_model(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
        [vi("x", F, [3, 4])],
        [vi("y", F, None)],
        [init("p", np.array([1, 2, 1, 2], np.int64))],
    )
    check_against_ort(m2, {"x": x})


def test_slice_negative_starts_and_steps():
    x = rand(6, 7)
    inits = [
        init("st", np.array([-1, 1], np.int64)),
        init("en", np.array([-7, 100], np.int64)),
        init("ax", np.array([0, -1], np.int64)),
        init("sp", np.array([-2, 3], np.int64)),
    ]
    m = make_model(
        [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
        [vi("x", F, [6, 7])],
        [vi("y", F, None)],
        inits,
    )
    out = check_against_ort(m, {"x": x})[0]
    np.testing.assert_array_equal(out, x[-1:-7:-2, 1:100:3])


# ---- errors --------------------------------------------------------------------------------------
def _one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text
    return text


def test_unsupported_op_names_type_node_opset_and_list_command():
    m = make_model([helper.make_node("Det", ["x"], ["y"], name="det_1")], [vi("x", F, [2, 2])], [vi("y", F, None)])
    with pytest.raises(ImportError_) as e:
        parse_onnx(m)
    msg = _one_line(e.value)
    assert "Det" in msg and "det_1" in msg and "opset 18" in msg and "migx-explore onnx --list" in msg


def test_truncated_file_reports_the_parse_or_checker_message(tmp_path):
    m = make_model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])], [init("w", rand(100))]
    )
    data = m.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImportError_) as e:
        parse_onnx(path)
    msg = _one_line(e.value)
    assert "cut.onnx" in msg and ("protobuf" in msg or "checker" in msg)
    with pytest.raises(ImportError_, match="empty"):
        parse_onnx(b"")


def test_checker_failure_is_reported():
    bad = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])])
    bad.graph.node[0].input[0] = "missing"
    with pytest.raises(ImportError_, match="checker"):
        parse_onnx(bad)


def test_bad_attribute_names_node_and_attribute():
    m = make_model(
        [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="XYZ", name="d2s")],
        [vi("x", F, [1, 8, 2, 2])],
        [vi("y", F, None)],
    )
    with pytest.raises(ImportError_) as e:
        parse_onnx(m)
    msg = _one_line(e.value)
    assert "d2s" in msg and "'mode'" in msg and "XYZ" in msg
    m2 = make_model(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0], name="t0")], [vi("x", F, [2, 3])], [vi("y", F, None)]
    )
    with pytest.raises(ImportError_, match=r"t0.*'perm'"):
        parse_onnx(m2)


def _external_model(tmp_path, location: str):
    w = rand(4)
    t = init("w", w)
    onnx.external_data_helper.set_external_data(t, location=location)
    t.ClearField("raw_data")
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])], [t])
    return m, w


def test_external_data_is_read_from_the_model_folder(tmp_path):
    m, w = _external_model(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").write_bytes(w.tobytes())
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    x = rand(4)
    np.testing.assert_allclose(run_ours(str(path), {"x": x})[0], x + w)


def test_external_data_path_escaping_the_folder_is_rejected(tmp_path):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    sub = tmp_path / "model"
    sub.mkdir()
    m, _ = _external_model(tmp_path, "../secret.bin")
    (sub / "m.onnx").write_bytes(m.SerializeToString())
    with pytest.raises(ImportError_) as e:
        parse_onnx(sub / "m.onnx")
    msg = _one_line(e.value)
    assert "escapes the model folder" in msg and "../secret.bin" in msg
    with pytest.raises(MigxError, match="from its path"):
        parse_onnx(m)


def test_text_form_round_trips_for_an_imported_graph():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("TopK", ["p", "k"], ["v", "i"], axis=-1),
        helper.make_node("Resize", ["p", "", "s"], ["u"], mode="linear"),
    ]
    m = make_model(
        nodes,
        [vi("x", F, [1, 2, 4, 4])],
        [vi("v", F, None), vi("i", I64, None), vi("u", F, None)],
        [
            init("w", rand(3, 2, 3, 3)),
            init("k", np.array([1], np.int64)),
            init("s", np.array([1, 1, 2, 2], np.float32)),
        ],
    )
    p = parse_onnx(m)
    assert parse(print_program(p, full=True)) == p
    check_against_ort(m, {"x": rand(1, 2, 4, 4)}, rtol=1e-4, atol=1e-5)
