"""--fp16 / --bf16 on HF-style exports with the float32-minimum attention mask (issue 24 item 2):
convert clamps float narrowing to the target's range (MIGraphX's op::convert), the quantize
stage keeps the mask, `scores + mask`, the softmax over it and sums of squares in float32, and
BERT-, GPT-2- and Llama-style models stay within relative RMS 1e-2 of fp32 (ONNX Runtime),
padded rows included, through all five pipelines."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.onnx import param_name, parse_onnx
from migx_explore.compiler.ops.pointwise import _convert
from migx_explore.compiler.pass_infra import PassManager, make_pass, run_passes
from migx_explore.compiler.ref import with_buffer_params
from migx_explore.gpu.pipelines import CompileOptions, gpu_pipelines

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hf_mask_models import MODELS, GraphBuilder, masked_feed, rms_norm  # noqa: E402

ort = pytest.importorskip("onnxruntime")
F32_MIN = np.finfo(np.float32).min


def _rel(got, want) -> float:
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.sqrt(np.mean((g - w) ** 2)) / np.sqrt(np.mean(w**2)))


@pytest.mark.parametrize("target, limit", [("float16", 65504.0), ("bfloat16", 3.3895313892515355e38)])
def test_convert_clamps_finite_values_to_the_target_range(target, limit):
    x = np.array([F32_MIN, -1e5, 1e5, -np.inf, np.inf, np.nan, 1.5], np.float32)
    got = np.asarray(_convert(x, target), np.float64)
    want_big = min(limit, 1e5) if target == "float16" else 1e5
    assert got[0] == -limit and got[3] == -np.inf and got[4] == np.inf and np.isnan(got[5]) and got[6] == 1.5
    assert abs(got[2] - want_big) <= want_big * 1e-2 and got[1] == -got[2]


def test_convert_float64_to_float32_clamps_and_saturate_false_overflows():
    assert _convert(np.array([1e300]), "float32")[0] == np.finfo(np.float32).max
    assert np.isinf(_convert(np.array([F32_MIN], np.float32), "float16", saturate=False)[0])
    # fp8 keeps ONNX's saturate rule: infinities clamp too
    assert float(_convert(np.array([np.inf], np.float32), "float8e4m3fn")[0]) == 448.0


def test_gpu_convert_row_clamps_before_the_cast():
    from migx_explore.compiler.op import Op
    from migx_explore.gpu.codegen.expr import op_expr

    half = op_expr(Op("convert", target_type="float16"), ["x"], ["float32"], "float16")
    assert half == "((float)migx::sat_float<float>(x, 65504.0f, false))"
    assert "sat_float<double>" in op_expr(Op("convert", target_type="float32"), ["x"], ["float64"], "float32")
    assert op_expr(Op("convert", target_type="float32"), ["x"], ["float16"], "float32") == "((float)x)"
    assert "true" in op_expr(Op("convert", target_type="float8e4m3fn"), ["x"], ["float32"], "float8e4m3fn")


MASK_ADD = """
    s = @param:s -> float_type, {2, 4}
    c = @param:c -> bool_type, {2, 4}
    lo = @literal{-3.4028234663852886e+38} -> float_type, {1}
    z = @literal{0} -> float_type, {1}
    @4 = multibroadcast[out_lens={2, 4}](lo) -> float_type, {2, 4}, {0, 0}
    @5 = multibroadcast[out_lens={2, 4}](z) -> float_type, {2, 4}, {0, 0}
    @6 = where(c, @4, @5) -> float_type, {2, 4}
    @7 = add(s, @6) -> float_type, {2, 4}
    @8 = softmax[axis=1](@7) -> float_type, {2, 4}
    @9 = mul(@8, s) -> float_type, {2, 4}
    @10 = @return(@9)
"""


@pytest.mark.parametrize("keep", [False, True])
def test_truncate_float_keeps_the_mask_path_in_float32(keep):
    p = parse(MASK_ADD)
    run_passes(p, [make_pass("truncate_float", float_type="float16", keep_out_of_range=keep)])
    types = {i.name: i.shape.type for i in p.main if i.name in ("where", "add", "softmax", "mul")}
    if keep:  # the mask, scores + mask and the softmax stay float32; the product after is half
        assert types == {"where": "float32", "add": "float32", "softmax": "float32", "mul": "float16"}
    else:  # MIGraphX's truncate_float: everything in half
        assert set(types.values()) == {"float16"}
    # a row with every key masked: uniform in float32, and with keep_out_of_range in fp16 too
    s = np.array([[30.0, -20.0, 5.0, 1.0], [2.0, 0.5, -1.0, 3.0]], np.float32)
    c = np.array([[True] * 4, [False, True, False, True]])
    out = evaluate(p, {"s": s, "c": c})[0].astype(np.float64)
    want = evaluate(parse(MASK_ADD), {"s": s, "c": c})[0]
    if keep:
        np.testing.assert_allclose(out, want, rtol=2e-3, atol=1e-2)
    else:
        assert not np.allclose(out[0], want[0], rtol=1e-2)  # -65504 + s rounds to steps of 32


def test_rms_norm_of_large_activations_in_fp16():
    g = GraphBuilder(0)
    y = rms_norm(g, "x", 64)
    graph = helper.make_graph(
        g.nodes,
        "rms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [4, 64])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = (np.random.default_rng(0).standard_normal((4, 64)) * 500).astype(np.float32)  # x^2 > 65504
    want = evaluate(parse_onnx(model), {"x": x})[0]
    p = parse_onnx(model)
    PassManager().run(p, gpu_pipelines(CompileOptions(precision="fp16"), include_backend=False))
    got = evaluate(p, {"x": x})[0]
    assert np.all(np.isfinite(got)) and _rel(got, want) < 1e-2


@pytest.mark.parametrize("precision, limit", [("fp16", 1e-2), ("bf16", 3e-2)])
@pytest.mark.parametrize("name", list(MODELS))
def test_hf_masked_model_low_precision_matches_fp32(name, precision, limit):
    build, left = MODELS[name]
    model, feed = build(), masked_feed(left=left)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    feeds = {param_name(k): v for k, v in feed.items()}
    np.testing.assert_allclose(evaluate(parse_onnx(model), feeds)[0], want, rtol=1e-4, atol=1e-4)
    p = parse_onnx(model)
    trace = PassManager().run(p, gpu_pipelines(CompileOptions(precision=precision), include_backend=True))
    assert trace.error is None, trace.error
    prog = trace.final.to_program()
    got = evaluate(prog, with_buffer_params(prog, feeds))[0]
    assert not np.isnan(got).any()
    padded = 1  # the second sequence: 5 pad tokens, left-padded for the decoders (fully masked rows)
    assert _rel(got, want) < limit, _rel(got, want)
    assert _rel(got[padded], want[padded]) < limit, _rel(got[padded], want[padded])
