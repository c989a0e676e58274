"""A softmax whose additive padding mask is broadcast inside the fused reduce (a lower-rank input
to fused_reduce): the reference pipelines and the GPU must both handle it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.ref import evaluate


def masked_attention() -> onnx.ModelProto:
    b, s, h, d = 1, 6, 2, 4
    c = lambda name, v: helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(v)))
    nodes = [
        c("shape", np.array([b, s, h, d], np.int64)),
        helper.make_node("Reshape", ["q", "shape"], ["q4"]),
        helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["q4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qh", "kt"], ["scores"]),
        helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        c("zero", np.float32(0)),
        c("ninf", np.float32(-np.inf)),
        helper.make_node("Equal", ["maskf", "zero"], ["is_pad"]),
        helper.make_node("Where", ["is_pad", "ninf", "zero"], ["add_mask"]),
        c("axes", np.array([1, 2], np.int64)),
        helper.make_node("Unsqueeze", ["add_mask", "axes"], ["mask4"]),
        helper.make_node("Add", ["scores", "mask4"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "qh"], ["ctx"]),
    ]
    graph = helper.make_graph(
        nodes,
        "masked_attention",
        [
            helper.make_tensor_value_info("q", TensorProto.FLOAT, [b, s, h * d]),
            helper.make_tensor_value_info("mask", TensorProto.INT64, [b, s]),
        ],
        [helper.make_tensor_value_info("ctx", TensorProto.FLOAT, [b, h, s, d])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


FEEDS = {
    "q": np.random.default_rng(0).standard_normal((1, 6, 8)).astype(np.float32),
    "mask": np.array([[1, 1, 1, 0, 1, 0]], np.int64),
}


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_masked_attention_on_the_gpu(mode):
    from migx_explore.gpu import compile_program

    ref = evaluate(parse_onnx(masked_attention()), FEEDS)[0]
    compiled = compile_program(masked_attention())
    try:
        out = compiled.run(FEEDS, mode=mode)[0]
    finally:
        compiled.close()
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-4)


def test_masked_attention_compiles_through_the_backend_without_a_gpu():
    """All five pipelines, kernel code generation included, with numerics checked per pass."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pipeline_check import check_pipelines

    check_pipelines(parse_onnx(masked_attention()), FEEDS, backend=True)
