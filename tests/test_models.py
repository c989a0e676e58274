"""Built-in models: each imports, matches onnxruntime (float32, seeded inputs) and its imported
program round-trips through the full text form."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest

from migx_explore import models
from migx_explore.compiler import evaluate, parse, print_program, random_inputs
from migx_explore.compiler.onnx import param_name, parse_onnx

ort = pytest.importorskip("onnxruntime")


def _load(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dynamic_mlp's symbolic batch defaults to 1 with a warning
        return models.load(name)


def _ort(model: onnx.ModelProto, feed: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def _assert_close_up_to_tied_rows(ours: np.ndarray, ref: np.ndarray) -> None:
    """Equal within tolerance, except that rows may trade places among themselves: a TopK over scores
    that tie in one evaluator and differ by an ulp in the other orders those candidates either way."""
    close = np.isclose(ours, ref, rtol=1e-4, atol=1e-5).reshape(-1, ours.shape[-1]).all(axis=1)
    if close.all():
        return
    a = ours.reshape(-1, ours.shape[-1])[~close]
    free = list(ref.reshape(-1, ref.shape[-1])[~close])
    for row in a:
        match = next((k for k, cand in enumerate(free) if np.allclose(row, cand, rtol=1e-4, atol=1e-5)), None)
        assert match is not None, f"row {row} has no counterpart among the reordered rows of ONNX Runtime's output"
        free.pop(match)


@pytest.mark.parametrize("name", models.list_models())
def test_model_matches_onnxruntime(name):
    model = models.get_model(name)
    program = _load(name)
    program.validate()
    feed = random_inputs(program, seed=0)
    ours = evaluate(program, feed)
    ref = _ort(model, {n: feed[param_name(n)] for n in program.input_names})
    assert program.output_names == [o.name for o in model.graph.output]
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32
        if any(n.op_type == "TopK" for n in model.graph.node) and a.ndim >= 2:
            _assert_close_up_to_tied_rows(a, b)
        else:
            # float32 rounding of a sum scales with its terms, not with the result: a logit of
            # 0.24 among logits of +-120 (resnet18) carries the rounding of the large ones
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 + 1e-6 * float(np.abs(b).max(initial=0)))


# resnet18 and yolov8 print millions of weights; their ops round-trip in the smaller models.
@pytest.mark.parametrize("name", [n for n in models.list_models() if n not in ("resnet18", "yolov8")])
def test_imported_model_round_trips_through_text(name):
    p = _load(name)
    assert parse(print_program(p, full=True)) == p


def test_resnet18_layout_round_trips_through_text():
    # The full ResNet-18 prints 11.7M weights; a narrow copy has the same graph structure.
    p = parse_onnx(models.cnn.resnet18(size=32, classes=10, width=4))
    assert parse(print_program(p, full=True)) == p
    full = _load("resnet18")
    assert [i.name for i in full.main if not i.is_literal()] == [i.name for i in p.main if not i.is_literal()]


def test_models_carry_exporter_patterns():
    ops = {n: {node.op_type for node in models.get_model(n).graph.node} for n in models.list_models()}
    everywhere = set().union(*ops.values())
    for pattern in ("Constant", "Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Expand", "ReduceMean"):
        assert pattern in everywhere
    assert {"Split", "Resize", "MaxPool", "Sigmoid", "Mul"} <= ops["yolo"]
    assert {"LayerNormalization", "Softmax", "Erf", "Trilu", "Where"} <= ops["transformer"]
    assert {"Clip", "Conv", "BatchNormalization"} <= ops["mobilenet"]
    m = models.get_model("transformer")
    assert any(
        t.float_data == [] and np.isneginf(onnx.numpy_helper.to_array(a.t)).any()
        for n in m.graph.node
        if n.op_type == "Constant"
        for a in n.attribute
        for t in [a.t]
    )


def test_dynamic_mlp_batch_is_symbolic_and_settable():
    dims = models.get_model("dynamic_mlp").graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch"
    with pytest.warns(UserWarning, match="batch"):
        assert models.load("dynamic_mlp").main.get_parameter("x").shape.lens == (1, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = models.load("dynamic_mlp", x=[8, 64])
    assert p.main.output_shapes()[0].lens == (8, 10)


def test_dynamic_mlp_imports_a_batch_range_that_split_single_dyn_dim_splits():
    from migx_explore.compiler.pass_infra import make_pass, run_passes

    p = models.load("dynamic_mlp", x=[(1, 4), 64])
    assert p.main.get_parameter("x").shape.dynamic_shape
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    want = _ort(models.get_model("dynamic_mlp"), {"x": x})[0]
    np.testing.assert_allclose(evaluate(p, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    run_passes(p, [make_pass("split_single_dyn_dim"), make_pass("dead_code_elimination")])
    assert {"dim_1", "dim_4"} <= set(p.modules)
    np.testing.assert_allclose(evaluate(p, {"x": x})[0], want, rtol=1e-4, atol=1e-5)


def test_unknown_model_lists_the_built_in_names():
    from migx_explore.compiler.errors import MigxError

    with pytest.raises(MigxError, match="resnet18"):
        models.get_model("resnet50")
