"""com.microsoft.EmbedLayerNormalization (what ORT's transformers optimizer makes of a BERT's
embeddings) against onnxruntime, with and without segment ids, mask and position ids."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import parse_onnx
from tests.onnx.onnx_util import init, run_ort, vi

I32, F = TensorProto.INT32, TensorProto.FLOAT
B, S, H, V = 2, 5, 8, 20


def _model(segments: bool, mask: bool, position_ids: bool, embedding_sum: bool):
    rng = np.random.default_rng(0)
    inits = [
        init("word", rng.standard_normal((V, H)).astype(np.float32)),
        init("pos", rng.standard_normal((16, H)).astype(np.float32)),
        init("seg", rng.standard_normal((2, H)).astype(np.float32)),
        init("gamma", (1 + 0.1 * rng.standard_normal(H)).astype(np.float32)),
        init("beta", (0.1 * rng.standard_normal(H)).astype(np.float32)),
    ]
    ins = ["ids", "segs" if segments else "", "word", "pos", "seg" if segments else "", "gamma", "beta"]
    ins += ["mask" if mask else "", "pids" if position_ids else ""]
    outs = ["y", "mask_index"] + (["sum"] if embedding_sum else [])
    node = helper.make_node("EmbedLayerNormalization", ins, outs, domain="com.microsoft", name="emb", epsilon=1e-12)
    inputs = [vi("ids", I32, [B, S])]
    inputs += [vi("segs", I32, [B, S])] if segments else []
    inputs += [vi("mask", I32, [B, S])] if mask else []
    inputs += [vi("pids", I32, [B, S])] if position_ids else []
    outputs = [vi("y", F, [B, S, H]), vi("mask_index", I32, [B])] + ([vi("sum", F, [B, S, H])] if embedding_sum else [])
    g = helper.make_graph([node], "g", inputs, outputs, inits)
    ops = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(g, opset_imports=ops, ir_version=9)


def _feed(segments, mask, position_ids):
    rng = np.random.default_rng(1)
    f = {"ids": rng.integers(0, V, (B, S)).astype(np.int32)}
    if segments:
        f["segs"] = rng.integers(0, 2, (B, S)).astype(np.int32)
    if mask:
        f["mask"] = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    if position_ids:
        f["pids"] = rng.integers(0, 16, (B, S)).astype(np.int32)
    return f


@pytest.mark.parametrize(
    "segments, mask, position_ids, embedding_sum",
    [(True, True, False, False), (False, False, False, True), (True, False, True, True), (True, True, True, True)],
    ids=["bert", "word_and_position", "position_ids", "all"],
)
def test_embed_layer_norm_matches_onnxruntime(segments, mask, position_ids, embedding_sum):
    model = _model(segments, mask, position_ids, embedding_sum)
    feed = _feed(segments, mask, position_ids)
    ours, ref = evaluate(parse_onnx(model), feed), run_ort(model, feed)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_embed_layer_norm_compiles_for_the_gpu_target():
    """Every pipeline, backend included (lowering to kernels), keeps the outputs (fake backend)."""
    from pipeline_check import check_pipelines

    model = _model(True, True, False, True)
    trace = check_pipelines(parse_onnx(model), _feed(True, True, False), backend=True)
    lowered = {i.name for i in trace.final.to_program().main}
    assert "gpu::code_object" in lowered or "gpu::precompile_op" in lowered


def test_skip_simplified_layer_norm_optional_outputs_match_onnxruntime():
    """All four outputs: output, mean (zeros: an RMS norm has none), inv_std_var, and the sum."""
    node = helper.make_node(
        "SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["y", "mean", "inv", "sum"], domain="com.microsoft"
    )
    shape = [2, 3, H]
    g = helper.make_graph(
        [node],
        "g",
        [vi("x", F, shape), vi("s", F, shape)],
        [vi("y", F, shape), vi("mean", F, [2, 3, 1]), vi("inv", F, [2, 3, 1]), vi("sum", F, shape)],
        [init("g", np.linspace(0.5, 1.5, H, dtype=np.float32))],
    )
    model = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=9
    )
    rng = np.random.default_rng(2)
    feed = {"x": rng.standard_normal(shape).astype(np.float32), "s": rng.standard_normal(shape).astype(np.float32)}
    ours, ref = evaluate(parse_onnx(model), feed), run_ort(model, feed)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("bits", "zero_points"), [(4, False), (4, True), (8, True)])
def test_gather_block_quantized_matches_onnxruntime(bits, zero_points):
    """A quantized embedding table (com.microsoft.GatherBlockQuantized) looked up by 2-D ids."""
    rng = np.random.default_rng(bits)
    n, k, block = 6, 64, 16
    data = rng.integers(0, 256, (n, k * bits // 8)).astype(np.uint8)
    scales = rng.uniform(0.01, 0.1, (n, k // block)).astype(np.float32)
    inits = [init("d", data), init("s", scales)]
    names = ["d", "ids", "s"]
    if zero_points:
        z = rng.integers(0, 1 << bits, (n, k // block)).astype(np.uint8)
        inits.append(init("z", (z[:, 0::2] | (z[:, 1::2] << 4)).astype(np.uint8) if bits == 4 else z))
        names.append("z")
    node = helper.make_node(
        "GatherBlockQuantized", names, ["y"], domain="com.microsoft", block_size=block, bits=bits, quantize_axis=1
    )
    g = helper.make_graph([node], "g", [vi("ids", TensorProto.INT64, [2, 3])], [vi("y", F, [2, 3, k])], inits)
    model = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=9
    )
    feed = {"ids": np.array([[5, 0, 3], [1, 1, 2]], np.int64)}
    ours, ref = evaluate(parse_onnx(model), feed), run_ort(model, feed)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5, atol=1e-5)
