"""gpt2_decode against onnxruntime: static prefill/decode shapes, and a dynamic past length
through the dynamic_shapes pipeline (split_single_dyn_dim, simplify_dyn_ops)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate, print_program
from migx_explore.compiler.pass_infra import PassManager
from migx_explore.gpu.pipelines import gpu_pipelines
from migx_explore.models import load
from migx_explore.models.gpt2_decode import decode_feed


def _close(outs, ref):
    assert len(outs) == len(ref)
    for a, b in zip(outs, ref):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize(("past", "new"), [(0, 16), (127, 1)], ids=["prefill_P0_T16", "decode_P127_T1"])
def test_static_shapes_match_onnxruntime(past, new, onnxruntime_outputs):
    feed = decode_feed(past, new)
    program = load("gpt2_decode", feed=feed)
    _close(evaluate(program, feed), onnxruntime_outputs(feed))


def _dynamic():
    return load("gpt2_decode", P=(1, 4), T=1)


def test_dynamic_import_keeps_shape_computations_symbolic():
    text = print_program(_dynamic())
    assert "dimensions_of(past_key_0)" in text  # P = Shape(past)[2], not a literal at the maximum
    assert "range[lens={2, 5}]" in text  # key index Range(0, P + T): length 2..5
    assert "concat[axis=2](past_key_0," in text and "dynamic, float32, {1, 4, [2..5], 32}" in text


@pytest.mark.parametrize("past", [1, 3, 4])
def test_dynamic_program_matches_onnxruntime_before_and_after_dynamic_shapes(past, onnxruntime_outputs):
    feed = decode_feed(past, 1)
    ref = onnxruntime_outputs(feed)
    program = _dynamic()
    _close(evaluate(program, feed), ref)
    PassManager().run(program, gpu_pipelines()[:1])
    _close(evaluate(program, feed), ref)


def test_dynamic_shapes_splits_into_static_submodules_without_dynamic_ops():
    program = _dynamic()
    PassManager().run(program, gpu_pipelines()[:1])
    assert [i.name for i in program.main if not i.is_builtin()] == ["select_module"] + ["get_tuple_elem"] * 9
    sel = next(i for i in program.main if i.name == "select_module")
    assert [m.name for m in sel.module_inputs] == ["dim_1", "dim_2", "dim_3", "dim_4"]
    assert not sel.op["output_dyn_shapes"].sub_shapes[0].dynamic_shape  # logits [1, 1, 512] in every size
    for m in sel.module_inputs:
        names = {i.name for i in m}
        assert not names & {"dimensions_of", "range"}, m.name  # folded per size
        assert all(not i.shape.dynamic_shape for i in m), m.name
        size = int(m.name.split("_")[1])
        assert m.get_parameter("past_value_2").shape.lens == (1, 4, size, 32)


def test_dynamic_decoder_text_form_round_trips_before_and_after_dynamic_shapes():
    from migx_explore.compiler import parse

    program = _dynamic()
    assert parse(print_program(program, full=True)) == program
    PassManager().run(program, gpu_pipelines()[:1])
    assert parse(print_program(program, full=True)) == program
