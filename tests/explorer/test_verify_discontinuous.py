"""verify and bisect on discontinuous ops (issue 24 item 3): near-ties at a TopK's k boundary that a
1e-7 reassociation flips are reported, not failed; a real bug before or after the TopK still fails."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

from migx_explore.bisect import numeric_bisect
from migx_explore.cli import main
from migx_explore.compiler import Op
from migx_explore.compiler.pass_infra import compare_outputs
from migx_explore.compiler.ref import evaluate, with_buffer_params
from migx_explore.session import Session
from migx_explore.verification import verify_session
from tests.detector_model import detector, detector_feed


@pytest.fixture(scope="module")
def flipped(tmp_path_factory):
    """The detector and the first feed (of a few seeds) on which optimize_module flips a tie."""
    model = detector()
    path = tmp_path_factory.mktemp("det") / "detector.onnx"
    onnx.save(model, path)
    for seed in range(8):
        feed = detector_feed(model, seed=seed)
        s = Session.from_onnx(str(path), inputs=feed)
        report = verify_session(s, inputs=feed)
        if report.selection is not None:
            return path, feed
    pytest.fail("no feed flipped a TopK tie; the reproduction no longer reproduces")


def _plain_check_fails(session, feed) -> bool:
    """The elementwise comparison alone (without the discontinuity check) fails on the final program."""
    p = session.trace.final.to_program()
    outs = evaluate(p, with_buffer_params(p, feed))
    return not compare_outputs(outs, session.traces.numeric_config().reference).ok


def test_topk_tie_flip_passes_verify_and_says_what_happened(flipped):
    path, feed = flipped
    s = Session.from_onnx(str(path), inputs=feed)
    report = verify_session(s, inputs=feed)
    assert report.ok, str(report)
    assert _plain_check_fails(s, feed), "the tie flip should move output rows beyond tolerance"
    text = str(report)
    assert re.search(
        r"TopK tie order differs at \d+ of 300 rows( \(\d+ swapped across the k boundary\))?; "
        r"inputs within tolerance",
        text,
    ), text
    assert "FAIL" not in text
    assert report.selection.path == "optimize_rewrite.optimize_module"
    assert numeric_bisect(s) is None  # no pass to blame


def test_cli_verify_with_real_inputs_passes(flipped, tmp_path, capsys):
    path, feed = flipped
    npz = tmp_path / "feed.npz"
    np.savez(npz, **feed)
    assert main(["verify", str(path), "--inputs", str(npz), "--bisect"]) == 0
    out = capsys.readouterr().out
    assert "TopK tie order differs" in out and "OK:" in out


def _negate_topk_input(module, ids):
    """Claims neg(x) equals x: a sign flip in front of the TopK."""
    topk = next(i for i in module if i.name == "topk")
    x = topk.inputs[0]
    module.replace_all_uses(x, module.insert_after(x, Op("neg"), [x]))


def _scale_gathered_boxes(module, ids):
    """Claims 2 * boxes equals boxes: a bug downstream of the TopK, in the rows it selects."""
    gather = next(i for i in module if i.name == "gather" and i.shape.type == "float32")
    two = module.add_literal(np.full(gather.shape.lens, 2.0, np.float32), before=gather)
    module.replace_all_uses(gather, module.insert_after(gather, Op("mul"), [gather, two]))


@pytest.mark.parametrize("bug", [_negate_topk_input, _scale_gathered_boxes], ids=["sign_flip_before", "bug_after"])
def test_a_real_bug_around_the_topk_still_fails(flipped, bug):
    path, feed = flipped

    def planted(module) -> bool:
        if module.name != "main":
            return False
        bug(module, {})
        return True

    planted.__name__ = "planted_" + bug.__name__.strip("_")
    s = Session.from_onnx(str(path), inputs=feed)
    s.insert_pass(planted, after="optimize_rewrite.optimize_module")
    report = verify_session(s, inputs=feed, bisect=True)
    assert not report.ok
    assert report.failure.path == f"optimize_rewrite.{planted.__name__}", str(report)
    assert report.divergence is not None and planted.__name__ in report.divergence.describe()


def test_session_bisect_on_a_fresh_session_blames_no_pass(flipped):
    path, feed = flipped
    s = Session.from_onnx(str(path), inputs=feed)
    assert numeric_bisect(s, inputs=feed) is None


def _argmax_program(scale: np.ndarray):
    """labels[argmax(x * scale, axis=1)]: the gather consumes the ArgMax's choice."""
    from migx_explore.compiler import Program, Shape

    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [4, 3]))
    y = m.add_instruction(Op("mul"), [x, m.add_literal(scale)])
    idx = m.add_instruction(Op("argmax", axis=1), [y])
    flat = m.add_instruction(Op("reshape", dims=[4]), [idx])
    table = m.add_literal(np.array([10.0, 20.0, 30.0], np.float32))
    m.add_return([m.add_instruction(Op("gather", axis=0), [table, flat])])
    return p


def test_argmax_near_tie_is_explained_and_a_real_change_is_not():
    from migx_explore.compiler.discontinuous import explain_selection_change
    from migx_explore.compiler.verify import Tolerance

    x = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0], [3.0, 0.5, 3.0], [0.1, 0.2, 0.3]], np.float32)
    ref = _argmax_program(np.ones((4, 3), np.float32))
    one_ulp = np.ones((4, 3), np.float32)
    one_ulp[0, 1] = np.nextafter(np.float32(1), np.float32(2))  # row 0: column 1 now wins by one ulp
    near = _argmax_program(one_ulp)
    outs = evaluate(near, {"x": x})
    assert not compare_outputs(outs, evaluate(ref, {"x": x})).ok
    change = explain_selection_change(ref, near, {"x": x}, outs, Tolerance())
    assert change is not None and change.note.startswith("ArgMax tie order differs at 1 of 4 rows")
    far = np.ones((4, 3), np.float32)
    far[1, 2] = 3.0  # row 1: column 2 wins by far: a different answer, not a tie
    outs = evaluate(_argmax_program(far), {"x": x})
    assert explain_selection_change(ref, _argmax_program(far), {"x": x}, outs, Tolerance()) is None


def test_yolo_sized_topk_split_by_rewrite_topk(tmp_path, monkeypatch):
    """33,600 anchors, as in a YOLOv8/v10 head at 1280x1280, with the radix top-k kept to one
    block per slice (MIGX_TOPK_CHUNK=0; spread over blocks it is one launch): rewrite_topk splits
    the TopK into two stages, so the candidate has no TopK of the reference's shape; the choice
    is still found and explained."""
    monkeypatch.setenv("MIGX_TOPK_CHUNK", "0")
    model = detector(n=33600)
    path = tmp_path / "det33600.onnx"
    onnx.save(model, path)
    for seed in range(4):
        feed = detector_feed(model, seed=seed)
        s = Session.from_onnx(str(path), inputs=feed)
        report = verify_session(s, inputs=feed)
        assert report.ok, str(report)
        if report.selection is not None:
            assert any(r.path.endswith("rewrite_topk") and r.changed for r in s.trace)
            assert "TopK tie order differs" in str(report)
            return
    pytest.fail("no feed flipped a TopK tie over 33600 anchors")


def _nms_program(scale: np.ndarray):
    """The box a one-per-class NMS keeps, as its coordinates: two disjoint boxes whose scores tie."""
    from migx_explore.compiler import Program, Shape

    p = Program()
    m = p.main
    boxes = m.add_parameter("boxes", Shape.of("float32", [1, 2, 4]))
    scores = m.add_instruction(
        Op("mul"), [m.add_parameter("scores", Shape.of("float32", [1, 1, 2])), m.add_literal(scale)]
    )
    sel = m.add_instruction(Op("nonmaxsuppression", max_output_boxes_per_class=1, iou_threshold=0.5), [boxes, scores])
    box_idx = m.add_instruction(
        Op("reshape", dims=[1]), [m.add_instruction(Op("slice", axes=[1], starts=[2], ends=[3]), [sel])]
    )
    flat = m.add_instruction(Op("reshape", dims=[2, 4]), [boxes])
    m.add_return([m.add_instruction(Op("gather", axis=0), [flat, box_idx])])
    return p


def test_nms_near_tie_is_explained():
    from migx_explore.compiler.discontinuous import explain_selection_change
    from migx_explore.compiler.verify import Tolerance

    feed = {
        "boxes": np.array([[[0, 0, 1, 1], [2, 2, 3, 3]]], np.float32),
        "scores": np.array([[[0.5, 0.5]]], np.float32),
    }
    ref = _nms_program(np.ones((1, 1, 2), np.float32))
    bumped = np.ones((1, 1, 2), np.float32)
    bumped[0, 0, 1] = np.nextafter(np.float32(1), np.float32(2))  # box 1 now wins by one ulp
    near = _nms_program(bumped)
    outs = evaluate(near, feed)
    assert not compare_outputs(outs, evaluate(ref, feed)).ok
    change = explain_selection_change(ref, near, feed, outs, Tolerance())
    assert change is not None and change.note.startswith("NonMaxSuppression selection differs at 1 of 1 rows")


def test_after_all_five_pipelines_the_detections_match_onnxruntime_up_to_tie_order(flipped):
    """Row for row where ORT and we pick the same anchors; the rows only one side picked are
    near-ties at the k boundary (their scores within rounding of the 300th score)."""
    path, feed = flipped
    s = Session.from_onnx(str(path), inputs=feed)
    final = s.trace.final.to_program()
    ours = evaluate(final, with_buffer_params(final, feed))[0]
    from tests.onnx.onnx_util import run_ort

    theirs = run_ort(onnx.load(path), feed)[0]
    # Each of our rows against the ORT row with the nearest box: the same anchor when it agrees
    # to rounding; the unmatched rows on either side must be near-ties at the k boundary.
    dist = np.abs(ours[:, None, :4] - theirs[None, :, :4]).max(-1)
    match = dist.argmin(1)
    same = dist[np.arange(len(ours)), match] <= 1e-5
    np.testing.assert_allclose(ours[same], theirs[match[same]], rtol=1e-5, atol=1e-5)
    kth = float(theirs[:, 4].min())
    only_ours = ours[~same]
    only_theirs = np.delete(theirs, match[same], axis=0)
    for row in (*only_ours, *only_theirs):
        assert abs(row[4] - kth) <= 1e-5 * kth, (row, kth)
    assert len(only_ours) == len(only_theirs) <= 10
