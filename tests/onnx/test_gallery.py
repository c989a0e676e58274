"""A gallery of small real-model families, built in code with seeded weights and checked against
onnxruntime: an LSTM sequence classifier, an If/Loop model, an NMS-based detector head, a QDQ int8
CNN, and a transformer block in ONNX Runtime's fused ops (com.microsoft). Each also runs through
the target's pipelines, whose numerics must stay put, and the recurrent one must be unrolled by
rewrite_rnn on the way."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from gallery_models import _model, _t, control_flow_model, fused_transformer, lstm_classifier, nms_detector, qdq_cnn
from onnx import TensorProto, helper
from pipeline_check import check_pipelines

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import param_name, parse_onnx

ort = pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT


def _compare(model: onnx.ModelProto, feeds: dict, rtol: float = 1e-4, atol: float = 1e-5):
    """Our import + reference evaluation against onnxruntime; returns our program and outputs."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    prog = parse_onnx(model)
    got = evaluate(prog, {param_name(k): v for k, v in feeds.items()})
    for name, g, w in zip(prog.output_names, got, want):
        np.testing.assert_allclose(
            np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=rtol, atol=atol, err_msg=name
        )
    return prog, got, want


def test_lstm_sequence_model_matches_onnxruntime_and_is_unrolled():
    rng = np.random.default_rng(2)
    feeds = {"tokens": rng.integers(0, 20, size=(6, 2)).astype(np.int64)}
    prog, _, _ = _compare(lstm_classifier(), feeds)
    assert {"lstm", "gru"} <= {i.name for i in prog.main}
    trace = check_pipelines(prog, {"tokens": feeds["tokens"]})
    rec = next(r for r in trace if r.name == "rewrite_rnn")
    assert not rec.noop
    after = trace.final.module("main")
    assert not {"lstm", "gru", "rnn"} & {r.name for r in after.instrs}


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_loop_model_matches_onnxruntime_on_both_branches(sign):
    rng = np.random.default_rng(4)
    feeds = {"x": (sign * np.abs(rng.standard_normal((1, 4)))).astype(np.float32)}
    prog, _, _ = _compare(control_flow_model(), feeds)
    names = {i.name for i in prog.main}
    assert {"loop", "if"} <= names
    assert any(m.startswith("loop_body") for m in prog.modules) and any(m.startswith("if_then") for m in prog.modules)
    check_pipelines(prog, {"x": feeds["x"]}, backend=True)


def test_if_and_loop_render_as_nested_clusters():
    from migx_explore.render.dot import to_dot
    from migx_explore.render.model import build_graph

    g = build_graph(parse_onnx(control_flow_model()), expand=True)
    labels = " ".join(gr.label for gr in g.groups.values())
    assert "loop [loop_body" in labels and "if [if_then" in labels and "if [if_else" in labels
    dot = to_dot(g)
    assert dot.count('subgraph "cluster_') == 3 and 'label="loop [loop_body0]"' in dot


def test_nms_detector_matches_onnxruntime_with_padded_selection():
    rng = np.random.default_rng(7)
    model = nms_detector()
    feeds = {"img": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want_sel, want_crops = sess.run(None, feeds)
    prog = parse_onnx(model)
    got_sel, got_crops = evaluate(prog, feeds)
    k = len(want_sel)
    assert 0 < k and got_sel.shape == (1 * 2 * 3, 3)  # batches x classes x max_output_boxes_per_class
    np.testing.assert_array_equal(got_sel[:k], want_sel)
    assert (got_sel[k:] == -1).all()
    np.testing.assert_allclose(got_crops, want_crops, rtol=1e-4, atol=1e-5)
    check_pipelines(prog, feeds, backend=True)


def test_qdq_int8_cnn_matches_onnxruntime_exactly():
    rng = np.random.default_rng(9)
    feeds = {"x": rng.uniform(-2, 2, (1, 3, 8, 8)).astype(np.float32)}
    prog, got, _ = _compare(qdq_cnn(), feeds, rtol=0, atol=1e-6)
    assert len(np.unique(got[0])) > 5  # not saturated to a constant
    # the GPU pipelines keep the two fake-quantization pairs (input and first activation) that
    # MIGraphX's simplify_qdq drops: their rounding and clamp are values (issue 24)
    check_pipelines(prog, feeds, rtol=0, atol=1e-6)


def test_transformer_with_ort_fused_ops_matches_onnxruntime():
    rng = np.random.default_rng(11)
    feeds = {"x": rng.standard_normal((2, 5, 16)).astype(np.float32)}
    prog, _, _ = _compare(fused_transformer(), feeds, rtol=1e-3, atol=1e-4)
    assert not any(i.name.startswith("com.") for i in prog.main)
    check_pipelines(prog, feeds, rtol=1e-3, atol=1e-4)


def test_group_query_attention_matches_onnxruntime():
    rng = np.random.default_rng(12)
    b, s, heads, kv, d = 1, 4, 4, 2, 8
    nodes = [
        helper.make_node(
            "GroupQueryAttention",
            ["q", "k", "v", "pk", "pv", "seqlens", "total"],
            ["y", "present_k", "present_v"],
            domain="com.microsoft",
            num_heads=heads,
            kv_num_heads=kv,
        )
    ]
    inits = [
        _t("seqlens", np.full([b], s - 1, np.int32)),
        _t("total", np.array(s, np.int32)),
        _t("pk", np.zeros((b, kv, 0, d), np.float32)),
        _t("pv", np.zeros((b, kv, 0, d), np.float32)),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info(n, F, [b, s, h * d]) for n, h in (("q", heads), ("k", kv), ("v", kv))],
        [helper.make_tensor_value_info("y", F, [b, s, heads * d])],
        inits,
        msft=True,
    )
    feeds = {n: rng.standard_normal((b, s, h * d)).astype(np.float32) for n, h in (("q", heads), ("k", kv), ("v", kv))}
    _compare(model, feeds, rtol=1e-4, atol=1e-5)


def test_explorer_steps_onto_rewrite_rnn_and_shows_what_it_unrolled():
    from migx_explore.session import Session

    s = Session(parse_onnx(lstm_classifier()), name="lstm")
    assert s.run().error is None
    rec = s.goto("rewrite_rnn")
    assert not rec.noop
    d = s.diff()
    lstm_ids = {r.id for r in s.before().module("main").instrs if r.name in ("lstm", "gru")}
    assert lstm_ids <= set(d.removed) and len(d.added) > 100
    assert all(d.replaced_by.get(i) for i in lstm_ids)  # provenance: the unrolled cells name their op
