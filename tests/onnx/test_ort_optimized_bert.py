"""An ORT-optimized BERT (onnxruntime's transformers optimizer on a torch-style export, built in
code: tests/ort_bert.py) imported at fixed sizes and over a batch range, against ONNX Runtime; a
QDQ CNN over a batch range; contrib ops that take fixed dims refuse a range by a named rule."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.onnx import parse_onnx
from tests.onnx.onnx_util import run_ort
from tests.ort_bert import bert_feed, hf_bert, ort_optimized_bert

pytest.importorskip("sympy")  # the optimizer's symbolic shape inference


@pytest.fixture(scope="module")
def optimized():
    return ort_optimized_bert()


def test_the_optimizer_fuses_what_deployment_guides_get(optimized):
    ops = {(n.domain, n.op_type) for n in optimized.graph.node}
    for op in ("EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"):
        assert ("com.microsoft", op) in ops
    assert ("", "LayerNormalization") not in ops and ("", "Softmax") not in ops


@pytest.mark.parametrize("batch, seq", [(1, 5), (2, 7), (3, 12)])
def test_fixed_sizes_match_onnxruntime(optimized, batch, seq):
    feed = bert_feed(batch, seq)
    ours = evaluate(parse_onnx(optimized, feed=feed), feed)[0]
    np.testing.assert_allclose(ours, run_ort(optimized, feed)[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours, run_ort(hf_bert(), feed)[0], rtol=1e-4, atol=1e-4)


def test_a_batch_range_runs_at_every_size_inside_it(optimized):
    program = parse_onnx(optimized, input_dims={"batch_size": (1, 4), "sequence_length": 12})
    assert str(program.main.output_shapes()[0]) == "dynamic, float32, {[1..4], 12, 16}"
    for batch in (1, 3, 4):
        feed = bert_feed(batch, 12)
        np.testing.assert_allclose(evaluate(program, feed)[0], run_ort(optimized, feed)[0], rtol=1e-4, atol=1e-5)


def test_a_sequence_range_on_fixed_dim_contrib_ops_is_a_named_refusal(optimized):
    """EmbedLayerNormalization and Attention follow a dynamic batch, not a dynamic sequence."""
    with pytest.raises(
        MigxError, match="EmbedLayerNormalization takes fixed dims other than the batch.*contrib-ops-fixed-dims"
    ):
        parse_onnx(optimized, input_dims={"batch_size": 2, "sequence_length": (1, 16)})
    # the unfused export takes the same range
    program = parse_onnx(hf_bert(), input_dims={"batch_size": 2, "sequence_length": (1, 16)})
    feed = bert_feed(2, 9)
    np.testing.assert_allclose(evaluate(program, feed)[0], run_ort(hf_bert(), feed)[0], rtol=1e-4, atol=1e-4)


def test_a_qdq_cnn_takes_a_batch_range():
    from tests.qdq_models import image_batches, quantize_qdq, resnet_like

    fp = resnet_like()
    for vi in (*fp.graph.input, *fp.graph.output):  # as torch.onnx writes dynamic_axes={0: "batch_size"}
        vi.type.tensor_type.shape.dim[0].dim_param = "batch_size"
    model = quantize_qdq(fp, image_batches(4))
    program = parse_onnx(model, input_dims={"batch_size": (1, 4)})
    for batch in (1, 3):
        x = np.concatenate(image_batches(batch, seed=9))
        ours = evaluate(program, {"input": x})[0]
        static = evaluate(parse_onnx(model, input_dims={"input": list(x.shape)}), {"input": x})[0]
        np.testing.assert_array_equal(ours, static)
        np.testing.assert_allclose(ours, run_ort(model, {"input": x})[0], atol=0.05)
