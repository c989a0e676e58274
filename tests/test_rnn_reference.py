"""The numpy reference of ONNX LSTM (compiler/ops/rnn.py) against ONNX Runtime (onnx's own
reference evaluator ignores sequence_lens), on the paths its compute takes: both directions
stepped together (every sequence full length; the plain LSTM loop of _Cell.run), peepholes, and
per-entry sequence lengths (one direction at a time)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import parse_onnx

SEQ, BATCH, INP, HID = 7, 2, 5, 4


def _model(direction: str, peepholes: bool, lens: list[int] | None, acts=None) -> tuple[onnx.ModelProto, dict]:
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(11)
    inits = {
        "W": rng.uniform(-0.5, 0.5, (dirs, 4 * HID, INP)),
        "R": rng.uniform(-0.5, 0.5, (dirs, 4 * HID, HID)),
        "B": rng.uniform(-0.5, 0.5, (dirs, 8 * HID)),
        "h0": rng.uniform(-0.5, 0.5, (dirs, BATCH, HID)),
        "c0": rng.uniform(-0.5, 0.5, (dirs, BATCH, HID)),
        "P": rng.uniform(-0.5, 0.5, (dirs, 3 * HID)) if peepholes else np.zeros((dirs, 3 * HID)),
    }
    tensors = [
        helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.astype(np.float32).ravel()) for k, v in inits.items()
    ]
    lens_arr = np.array(lens if lens is not None else [SEQ] * BATCH, np.int32)
    tensors.append(helper.make_tensor("lens", TensorProto.INT32, lens_arr.shape, lens_arr))
    extra = {"activations": acts * dirs} if acts else {}
    node = helper.make_node(
        "LSTM",
        ["X", "W", "R", "B", "lens", "h0", "c0", "P"],
        ["Y", "Y_h", "Y_c"],
        direction=direction,
        hidden_size=HID,
        **extra,
    )
    graph = helper.make_graph(
        [node],
        "lstm",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [SEQ, BATCH, INP])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [SEQ, dirs, BATCH, HID]),
            helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [dirs, BATCH, HID]),
            helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, [dirs, BATCH, HID]),
        ],
        tensors,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, {"X": rng.standard_normal((SEQ, BATCH, INP)).astype(np.float32)}


@pytest.mark.parametrize(
    "direction, peepholes, lens, acts",
    [
        ("bidirectional", False, None, None),  # the directions together, the plain loop
        ("bidirectional", False, None, ["HardSigmoid", "Tanh", "Relu"]),  # plain, other activations
        ("bidirectional", True, None, None),  # together, _lstm with peepholes
        ("reverse", False, None, None),
        ("bidirectional", False, [SEQ, 4], None),  # per direction, per-entry lengths
    ],
)
def test_lstm_matches_onnx_reference(direction, peepholes, lens, acts):
    ort = pytest.importorskip("onnxruntime")
    model, feeds = _model(direction, peepholes, lens, acts)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = evaluate(parse_onnx(model.SerializeToString()), feeds)
    for name, a, b in zip(("Y", "Y_h", "Y_c"), got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)


def test_the_plan_feeds_a_constant_r_relaid_once():
    """compiler/ref_fold.py RelaidR: R stored with its last two axes transposed (so the compute's
    R^T view is row-major), made on the first evaluation and kept; the outputs stay the op's."""
    from migx_explore.compiler import ref, ref_fold

    model, feeds = _model("bidirectional", False, None)
    program = parse_onnx(model.SerializeToString())
    first = evaluate(program, feeds)
    (st,) = [s for s in ref._plan(program.main)[0] if s.fused is not None]
    assert isinstance(st.fused, ref_fold.RelaidR)
    relaid = st.fused.r
    assert np.swapaxes(relaid, 1, 2).flags.c_contiguous
    again = evaluate(program, feeds)
    assert st.fused.r is relaid  # made once, not per forward
    lstm = next(i for i in program.main if i.name == "lstm")
    args = [i.literal.data if i.is_literal() else feeds["X"] for i in lstm.inputs]
    plain = ref.evaluate_instruction(lstm, args)  # R as stored: a transposed R^T view
    for a, b, c in zip(first, again, plain):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)
