"""Validation follows ONNX Runtime (issue 37): a declared graph-output shape that differs from the
computed one is accepted with one warning, as ORT does ("Falling back to lenient merge")."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import parse_onnx
from tests.onnx.onnx_util import run_ort, vi


def _relu(y_dims, extra_output=None):
    from onnx import TensorProto

    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    outs = [vi("y", TensorProto.FLOAT, y_dims)]
    if extra_output is not None:
        nodes.append(helper.make_node("Neg", ["x"], ["z"], name="n"))
        outs.append(vi("z", TensorProto.FLOAT, extra_output))
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [1, 4])], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.mark.parametrize("declared", [[1, 5], [1, 4, 1], [4], []], ids=["dim", "rank up", "rank down", "scalar"])
def test_declared_output_shape_that_ort_ignores_is_one_warning(declared):
    model = _relu(declared)
    feed = {"x": np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = parse_onnx(model)
    mine = [str(w.message) for w in caught if "graph output" in str(w.message)]
    assert len(mine) == (0 if declared == [] else 1), mine  # [] with no dims: unknown rank, no warning
    if declared:
        assert "using the computed shape" in mine[0] and "'y'" in mine[0]
    ours, ref = evaluate(program, feed), run_ort(model, feed)
    assert ours[0].shape == ref[0].shape == (1, 4)
    np.testing.assert_array_equal(ours[0], ref[0])


def test_several_mismatched_outputs_make_one_warning_naming_each():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parse_onnx(_relu([2, 4], extra_output=[3]))
    mine = [str(w.message) for w in caught if "graph output" in str(w.message)]
    assert len(mine) == 1 and "'y'" in mine[0] and "'z'" in mine[0]


def test_every_unsupported_operator_is_named_in_one_message():
    """An sklearn pipeline through skl2onnx: Scaler -> LinearClassifier (ai.onnx.ml), plus a
    contrib op: one refusal naming all three, worded as for com.microsoft."""
    from onnx import TensorProto

    from migx_explore.compiler.errors import ImportError_

    nodes = [
        helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml", name="scaler", offset=[0.0] * 4, scale=[1.0] * 4),
        helper.make_node(
            "LinearClassifier",
            ["s"],
            ["label", "prob"],
            domain="ai.onnx.ml",
            name="clf",
            classlabels_ints=[0, 1],
            coefficients=[0.1] * 8,
            intercepts=[0.0, 0.0],
        ),
        helper.make_node("FastGelu", ["prob"], ["y"], domain="com.microsoft", name="gelu_like"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [vi("x", TensorProto.FLOAT, [1, 4])],
        [vi("label", TensorProto.INT64, [1]), vi("y", TensorProto.FLOAT, [1, 2])],
    )
    ops = [helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(g, opset_imports=ops, ir_version=9)
    with pytest.raises(ImportError_) as e:
        parse_onnx(model)
    msg = str(e.value)
    assert "\n" not in msg
    for op in ("ai.onnx.ml.Scaler (node scaler)", "ai.onnx.ml.LinearClassifier (node clf)"):
        assert op in msg
    assert "migx-explore onnx --list" in msg


def test_a_fed_sequence_is_refused_by_name_through_the_backend():
    """The onnx backend API feeds a sequence as a list: the refusal names the input and its type
    (it used to crash in numpy, or blame input_dims)."""
    from migx_explore.compiler.errors import MigxError
    from migx_explore.compiler.onnx.backend import ReferenceBackend

    seq = helper.make_tensor_sequence_value_info
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [seq("x", onnx.TensorProto.FLOAT, [2])],
        [seq("y", onnx.TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    feed = [np.zeros(2, np.float32), np.ones(2, np.float32)]
    import onnxruntime as ort

    assert len(ort.InferenceSession(model.SerializeToString()).run(None, {"x": feed})[0]) == 2
    with pytest.raises(MigxError, match="input 'x': only tensor inputs are supported \\(got sequence\\)"):
        ReferenceBackend.prepare(model).run({"x": feed})
