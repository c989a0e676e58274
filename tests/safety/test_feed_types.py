"""Issue 40 item 2: a feed of the wrong element type is refused, as ONNX Runtime refuses it, with one
line naming the input, the type it takes and the type given; --convert-inputs casts it instead."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from migx_explore.compiler.errors import MigxError
from migx_explore.session import Session
from tests.safety.hostile import I64, F, assert_clean_refusal, model_bytes, run_ort, run_ours

MODEL = model_bytes(
    [helper.make_node("Gather", ["D", "I"], ["Y"], axis=0)], [("D", F, [4, 3]), ("I", I64, [2])], [("Y", F, [2, 3])]
)
D = np.arange(12, dtype=np.float32).reshape(4, 3)
I = np.array([0, 2], np.int64)  # noqa: E741


@pytest.mark.parametrize("given", ["float64", "float16", "int32", "int64", "uint8", "bool"])
def test_wrong_type_for_a_float32_input_is_refused(capsys, tmp_path, given):
    feed = {"D": D.astype(given), "I": I}
    rc, err, _ = run_ours(capsys, tmp_path, MODEL, feed)
    assert_clean_refusal(rc, err, "'D'", f"element type {given}", "takes float32", "--convert-inputs")
    if pytest.importorskip("onnxruntime"):
        assert isinstance(run_ort(MODEL, feed), str)  # ORT refuses the same feed


def test_int32_for_an_int64_index_is_refused(capsys, tmp_path):
    rc, err, _ = run_ours(capsys, tmp_path, MODEL, {"D": D, "I": I.astype(np.int32)})
    assert_clean_refusal(rc, err, "'I'", "int32", "takes int64")


def test_convert_inputs_casts_on_request(capsys, tmp_path):
    rc, err, outs = run_ours(capsys, tmp_path, MODEL, {"D": D.astype(np.float64), "I": I}, "--convert-inputs")
    assert rc == 0, err
    np.testing.assert_array_equal(outs["Y"], D[I])


def test_a_type_that_cannot_be_cast_is_refused_even_with_the_flag(capsys, tmp_path):
    rc, err, _ = run_ours(capsys, tmp_path, MODEL, {"D": D, "I": I.astype(np.float32)}, "--convert-inputs")
    line = assert_clean_refusal(rc, err, "'I'", "float32", "takes int64")
    assert "--convert-inputs" not in line


def test_session_refuses_and_converts_alike(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(MODEL)
    with pytest.raises(MigxError, match="'D' has element type float64 but the model takes float32"):
        Session.from_onnx(str(path), inputs={"D": D.astype(np.float64), "I": I})
    s = Session.from_onnx(str(path), inputs={"D": D.astype(np.float64), "I": I}, convert_inputs=True)
    assert s is not None
