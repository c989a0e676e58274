"""Symbolic dims end to end on exporter-style models (issue 37): a dynamic-batch CNN and a
dynamo-style KV-cache decoder import with a range, evaluate at sizes inside it as onnxruntime
does, and dynamic_shapes splits them into static submodules with no runtime-shape op left."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

from migx_explore.compiler import evaluate, parse, print_program
from migx_explore.compiler.onnx import ConstantInputRequired, parse_onnx
from migx_explore.compiler.ops.dynamic_values import DYNAMIC_VALUE_OPS
from migx_explore.compiler.pass_infra import PassManager
from migx_explore.gpu.pipelines import gpu_pipelines
from tests.dynamic_exports import cnn_feed, decoder_feed, dyn_batch_cnn, kv_decoder
from tests.onnx.onnx_util import make_model, run_ort, vi

PAST = {"past_sequence_length": (1, 16), "sequence_length": 1, "batch_size": 1}
PREFILL = {"past_sequence_length": 0, "sequence_length": (1, 6), "batch_size": 1}


def _close(ours, ref):
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _dynamic_shapes(program):
    PassManager().run(program, gpu_pipelines()[:1])
    subs = [m for m in program.modules.values() if m.name != "main"]
    for m in subs:
        assert all(not i.shape.dynamic_shape for i in m), m.name
        assert not {i.name for i in m} & (DYNAMIC_VALUE_OPS | {"dimensions_of", "range"}), m.name
    return subs


def _imported(model, dims):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a range leaves no dim to default
        return parse_onnx(model, input_dims=dims)


def test_batch_range_cnn_imports_dynamic_and_matches_onnxruntime():
    model = dyn_batch_cnn()
    program = _imported(model, {"batch_size": (1, 4)})
    text = print_program(program)
    assert "dynamic, float32, {[1..4], 10}" in text  # the Gemm output, bias broadcast at run time
    assert "reshape_with_dims" in text  # torch's flatten: Reshape(x, Concat(Shape(x)[0], -1))
    for batch in (1, 3, 4):
        _close(evaluate(program, cnn_feed(batch)), run_ort(model, cnn_feed(batch)))
    subs = _dynamic_shapes(program)
    assert [m.name for m in subs] == ["dim_1", "dim_2", "dim_3", "dim_4"]
    for batch in (2, 4):
        _close(evaluate(program, cnn_feed(batch)), run_ort(model, cnn_feed(batch)))


@pytest.mark.parametrize(("dims", "sizes"), [(PAST, [(1, 1), (7, 1), (16, 1)]), (PREFILL, [(0, 1), (0, 4), (0, 6)])])
def test_kv_decoder_shape_chains_stay_symbolic_and_match_onnxruntime(dims, sizes):
    model = kv_decoder()
    program = _imported(model, dims)
    names = {i.name for i in program.main}
    # Slice of the position table by Shape-derived bounds, Reshape of the heads, the mask's
    # ConstantOfShape and Expand to [batch, 1, seq, total]: none refused, none frozen at the max.
    assert {"dimensions_of", "slice_with_bounds", "fill_with_dims", "broadcast_with_dims"} <= names
    assert parse(print_program(program, full=True)) == program  # the ops' output ranges round-trip
    for past, new in sizes:
        _close(evaluate(program, decoder_feed(past, new)), run_ort(model, decoder_feed(past, new)))
    subs = _dynamic_shapes(program)
    lo, hi = next(v for v in dims.values() if isinstance(v, tuple))
    assert len(subs) == hi - lo + 1  # one static submodule per size
    for past, new in sizes[::2]:
        _close(evaluate(program, decoder_feed(past, new)), run_ort(model, decoder_feed(past, new)))


def test_shape_from_input_data_is_still_refused():
    # Reshape to a shape read from an input's values (not its shape): ORT runs it, a compiler
    # must know it; refused naming the input, as before.
    model = make_model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [vi("x", dims=["n", 4]), vi("s", TensorProto.INT64, [2])],
        [vi("y", dims=None)],
    )
    with pytest.raises(ConstantInputRequired, match="depends on graph input"):
        parse_onnx(model, input_dims={"n": (1, 4)})


def test_builtin_resnet18_takes_a_batch_range():
    from migx_explore.models import load

    program = load("resnet18", input=[(1, 2), 3, 224, 224])
    out = program.main.output_shapes()[0]
    assert str(out) == "dynamic, float32, {[1..2], 1000}"


def _ort_greedy(model, prompt, steps):
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    kv = np.zeros((1, 2, 0, 8), np.float32)
    past_k, past_v, ids, tokens = kv, kv, np.asarray([prompt], np.int64), []
    for _ in range(steps):
        logits, past_k, past_v = sess.run(None, {"input_ids": ids, "past_key": past_k, "past_value": past_v})
        tokens.append(int(logits[0, -1].argmax()))
        ids = np.asarray([[tokens[-1]]], np.int64)
    return tokens


def test_generate_on_the_dynamo_style_decoder_matches_onnxruntime():
    """generate makes bucket programs from the dynamic import: the Range to P + T, the mask's
    ConstantOfShape / Expand span the bucket (the causal mask hides the rows past P + T)."""
    from migx_explore.decode import generate

    model = kv_decoder()
    prompt = [3, 5, 7]
    ours = generate(model, prompt, 8, target="ref", max_len=32)
    assert list(ours.tokens) == _ort_greedy(model, prompt, 8)
