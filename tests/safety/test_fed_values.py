"""Issue 40, beyond the listed examples: every op that reads a shape, size, count, k, axis, pad or
divisor from a fed input, and the ops whose output length depends on the values, either match
ONNX Runtime (values and shapes) or refuse in one line (exit 2) where ORT refuses. Each case runs
on the reference evaluator and on the GPU path (`--target gpu`, the fake backend)."""

from __future__ import annotations

import numpy as np
import pytest
from fake_gpu import fake_gpu
from onnx import helper

from tests.safety.hostile import I64, F, assert_agrees_with_ort, assert_clean_refusal, model_bytes, run_ours

pytest.importorskip("onnxruntime")

X = np.arange(20, dtype=np.float32).reshape(4, 5)
X4 = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
BOXES = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11]]], np.float32)
SCORES = np.array([[[0.9, 0.75, 0.6, 0.95]]], np.float32)


def out(name: str, rank: int, t: int = F) -> tuple[str, int, list[str]]:
    return (name, t, [f"{name}{i}" for i in range(rank)])


def one(op, ins, outs, **attrs):
    return [helper.make_node(op, ins, outs, **attrs)]


def i64(v):
    return np.array(v, np.int64)


def f32(v):
    return np.array(v, np.float32)


def nms(m, iou, score):
    ins = [("B", F, [1, 4, 4]), ("S", F, [1, 1, 4]), ("M", I64, [1]), ("I", F, [1]), ("T", F, [1])]
    feed = {"B": BOXES, "S": SCORES, "M": i64([m]), "I": f32([iou]), "T": f32([score])}
    return one("NonMaxSuppression", list(feed), ["Y"]), ins, [out("Y", 2, I64)], feed


def pad(pads, mode):
    ins = [("X", F, [4, 5]), ("P", I64, [4])]
    return one("Pad", ["X", "P"], ["Y"], mode=mode), ins, [out("Y", 2)], {"X": X, "P": i64(pads)}


def with_k(op, k, **attrs):
    ins = [("X", F, [4, 5]), ("K", I64, ["n"])]
    outs = [out("V", 2), out("J", 2, I64)] if op == "TopK" else [out("Y", 2)]
    return one(op, ["X", "K"], [o[0] for o in outs], **attrs), ins, outs, {"X": X, "K": i64(k)}


def int_div(op, **attrs):
    ins = [("A", I64, [3]), ("D", I64, [3])]
    return one(op, ["A", "D"], ["Y"], **attrs), ins, [out("Y", 1, I64)], {"A": i64([5, 6, 7]), "D": i64([2, 0, 3])}


def tile(reps):
    ins = [("X", F, [4, 5]), ("R", I64, [2])]
    return one("Tile", ["X", "R"], ["Y"]), ins, [out("Y", 2)], {"X": X, "R": i64(reps)}


def roialign(batch_index):
    ins = [("X", F, [1, 1, 4, 4]), ("R", F, [1, 4]), ("N", I64, [1])]
    feed = {"X": X4, "R": f32([[0, 0, 2, 2]]), "N": i64([batch_index])}
    return one("RoiAlign", ["X", "R", "N"], ["Y"], output_height=2, output_width=2), ins, [out("Y", 4)], feed


NZ_FEED = {"X": f32([[0, 1, 0], [2, 0, 3]])}
CASES = {
    # data-dependent lengths: ONNX's exact rows, not MIGraphX's padded maximum
    "nonzero": (one("NonZero", ["X"], ["Y"]), [("X", F, [2, 3])], [out("Y", 2, I64)], NZ_FEED),
    "nms": nms(3, 0.5, 0.0),
    "nms_huge_limit": nms(2**40, 0.5, 0.0),
    "nms_nan_score": nms(3, 0.5, float("nan")),
    "nms_nan_iou": nms(3, float("nan"), 0.0),
    "nms_iou_2": nms(3, 2.0, 0.0),
    # a count or an axis must be one integer
    "topk_two_ks": with_k("TopK", [1, 2], axis=1),
    "topk_no_k": with_k("TopK", [], axis=1),
    "cumsum_no_axis": with_k("CumSum", []),
    "trilu_two_ks": with_k("Trilu", [1, 2]),
    # reflect pads wider than the axis, and the same widths in the modes ORT runs
    "pad_reflect_wide": pad([5, 0, 0, 0], "reflect"),
    "pad_reflect_wide_after_crop": pad([-1, 0, 4, 0], "reflect"),
    "pad_reflect_widest": pad([0, 4, 0, 0], "reflect"),
    "pad_edge_wide": pad([5, 0, 0, 0], "edge"),
    # integer division by zero has no value
    "div_int_zero": int_div("Div"),
    "mod_int_zero": int_div("Mod"),
    "fmod_int_zero": int_div("Mod", fmod=1),
    # zero repeats: an empty result, wherever the zero is
    "tile_zero_first": tile([0, 2]),
    "tile_zero_last": tile([3, 0]),
    # batch indices outside the batch, negative ones too
    "roialign_past_batch": roialign(1),
    "roialign_negative": roialign(-1),
    # an index past 32 bits: narrowed to int32 on the GPU path it would wrap to a valid one
    "gathernd_2_32": (
        one("GatherND", ["D", "J"], ["Y"]),
        [("D", F, [4, 5]), ("J", I64, [1, 2])],
        [out("Y", 1)],
        {"D": X, "J": i64([[0, 2**32 + 1]])},
    ),
    "scatter_2_32": (
        one("ScatterElements", ["D", "K", "U"], ["Y"], axis=1),
        [("D", F, [4, 5]), ("K", I64, [4, 1]), ("U", F, [4, 1])],
        [out("Y", 2)],
        {"D": X, "K": i64([[0], [2**32 + 1], [1], [2]]), "U": np.ones((4, 1), np.float32)},
    ),
    "onehot_2_32": (
        [
            helper.make_node("Constant", [], ["dep"], value=helper.make_tensor("d", I64, [], [3])),
            helper.make_node("Constant", [], ["vals"], value=helper.make_tensor("v", F, [2], [0.0, 1.0])),
            helper.make_node("OneHot", ["J", "dep", "vals"], ["Y"]),
        ],
        [("J", I64, [2])],
        [out("Y", 2)],
        {"J": i64([2**32 + 1, 1])},
    ),
    "hann_negative": (one("HannWindow", ["N"], ["Y"]), [("N", I64, [])], [out("Y", 1)], {"N": i64(-3)}),
    "upsample_below_one": (
        one("Upsample", ["X", "S"], ["Y"], mode="nearest"),
        [("X", F, [1, 1, 4, 4]), ("S", F, [4])],
        [out("Y", 4)],
        {"X": X4, "S": f32([1, 1, 0.5, 3])},
    ),
}
OPSET = {"pad_edge_wide": 19, "upsample_below_one": 9}


@pytest.mark.parametrize("target", ["ref", "gpu"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fed_values_match_onnxruntime_or_are_refused(capsys, tmp_path, name, target):
    nodes, ins, outs, feed = CASES[name]
    m = model_bytes(nodes, ins, outs, opset=OPSET.get(name, 18))
    with fake_gpu():
        assert_agrees_with_ort(capsys, tmp_path, m, feed, [o[0] for o in outs], "--target", target)


def test_nonzero_of_a_fed_tensor_has_no_padding_rows(capsys, tmp_path):
    nodes, ins, outs, feed = CASES["nonzero"]
    rc, err, got = run_ours(capsys, tmp_path, model_bytes(nodes, ins, outs), feed)
    assert rc == 0, err
    np.testing.assert_array_equal(got["Y"], np.array(np.nonzero(feed["X"])))


@pytest.mark.parametrize("dtype", ["int32", "float64", "float32", "uint8"])
def test_a_frozen_shape_operand_of_another_type_is_refused_naming_it(capsys, tmp_path, dtype):
    m = model_bytes(one("Reshape", ["X", "S"], ["Y"]), [("X", F, [4, 5]), ("S", I64, [2])], [out("Y", 2)])
    rc, err, _ = run_ours(capsys, tmp_path, m, {"X": X, "S": np.array([5, 4]).astype(dtype)})
    assert_clean_refusal(rc, err, "'S'", dtype, "int64")


def test_a_frozen_int32_shape_converts_when_asked(capsys, tmp_path):
    m = model_bytes(one("Reshape", ["X", "S"], ["Y"]), [("X", F, [4, 5]), ("S", I64, [2])], [out("Y", 2)])
    rc, err, got = run_ours(capsys, tmp_path, m, {"X": X, "S": np.array([5, 4], np.int32)}, "--convert-inputs")
    assert rc == 0, err
    assert got["Y"].shape == (5, 4)


@pytest.mark.parametrize("value", [np.array(["a", "b"]), np.array([1j, 2])], ids=["string", "complex"])
def test_a_feed_of_a_type_no_model_takes_is_one_line(capsys, tmp_path, value):
    m = model_bytes(one("Relu", ["A"], ["Y"]), [("A", F, [2])], [out("Y", 1)])
    rc, err, _ = run_ours(capsys, tmp_path, m, {"A": value})
    assert_clean_refusal(rc, err, "'A'", "float32")


def test_gpu_refusal_names_the_kernel(capsys, tmp_path):
    m = model_bytes(one("Gather", ["D", "I"], ["Y"], axis=0), [("D", F, [4, 5]), ("I", I64, [2])], [out("Y", 2)])
    with fake_gpu():
        rc, err, _ = run_ours(capsys, tmp_path, m, {"D": X, "I": i64([0, -5])}, "--target", "gpu")
    assert_clean_refusal(rc, err, "gather", "indices[1] = -5", "[-4, 3]")
