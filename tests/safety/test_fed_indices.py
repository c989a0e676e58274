"""Issue 40 item 1: an index the model is fed never wraps into a wrong answer. Every op that takes a
fed index either matches ONNX Runtime or refuses (exit 2, one line) where ORT refuses."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.safety.hostile import I64, F, assert_agrees_with_ort, assert_clean_refusal, model_bytes, run_ours

pytest.importorskip("onnxruntime")

D43 = np.arange(12, dtype=np.float32).reshape(4, 3)


def test_gather_index_below_minus_n_is_refused_naming_the_index(capsys, tmp_path):
    m = model_bytes(
        [helper.make_node("Gather", ["D", "I"], ["Y"], axis=0)], [("D", F, [4, 3]), ("I", I64, [2])], [("Y", F, [2, 3])]
    )
    rc, err, _ = run_ours(capsys, tmp_path, m, {"D": D43, "I": np.array([0, -5])})
    line = assert_clean_refusal(rc, err, "gather", "indices[1] = -5", "[-4, 3]")
    assert "Traceback" not in line


GATHER = (
    [helper.make_node("Gather", ["D", "I"], ["Y"], axis=0)],
    [("D", F, [4, 3]), ("I", I64, [2])],
    [("Y", F, [2, 3])],
    lambda i: {"D": D43, "I": np.array(i, np.int64)},
)
GATHER_AX1 = (
    [helper.make_node("Gather", ["D", "I"], ["Y"], axis=1)],
    [("D", F, [4, 3]), ("I", I64, [2])],
    [("Y", F, [4, 2])],
    lambda i: {"D": D43, "I": np.array(i, np.int64)},
)
GATHER_ELEMENTS = (
    [helper.make_node("GatherElements", ["D", "I"], ["Y"], axis=1)],
    [("D", F, [4, 3]), ("I", I64, [4, 1])],
    [("Y", F, [4, 1])],
    lambda i: {"D": D43, "I": np.array(i, np.int64).reshape(4, 1)},
)
GATHER_ND = (
    [helper.make_node("GatherND", ["D", "I"], ["Y"])],
    [("D", F, [4, 3]), ("I", I64, [1, 2])],
    [("Y", F, [1])],
    lambda i: {"D": D43, "I": np.array(i, np.int64).reshape(1, 2)},
)
SCATTER_ELEMENTS = (
    [helper.make_node("ScatterElements", ["D", "I", "U"], ["Y"], axis=0)],
    [("D", F, [4, 3]), ("I", I64, [1, 3]), ("U", F, [1, 3])],
    [("Y", F, [4, 3])],
    lambda i: {"D": D43, "I": np.array(i, np.int64).reshape(1, 3), "U": -np.ones((1, 3), np.float32)},
)
SCATTER_ND = (
    [helper.make_node("ScatterND", ["D", "I", "U"], ["Y"])],
    [("D", F, [4, 3]), ("I", I64, [1, 1]), ("U", F, [1, 3])],
    [("Y", F, [4, 3])],
    lambda i: {"D": D43, "I": np.array(i, np.int64).reshape(1, 1), "U": -np.ones((1, 3), np.float32)},
)
ONE_HOT = (
    [
        helper.make_node("Constant", [], ["depth"], value=helper.make_tensor("d", I64, [], [3])),
        helper.make_node("Constant", [], ["vals"], value=helper.make_tensor("v", F, [2], [0.0, 1.0])),
        helper.make_node("OneHot", ["I", "depth", "vals"], ["Y"]),
    ],
    [("I", I64, [3])],
    [("Y", F, [3, 3])],
    lambda i: {"I": np.array(i, np.int64)},
)

CASES = [
    ("gather", GATHER, [0, -5]),
    ("gather", GATHER, [0, 4]),
    ("gather", GATHER, [-4, 3]),
    ("gather_axis1", GATHER_AX1, [2, -4]),
    ("gather_axis1", GATHER_AX1, [-3, 2]),
    ("gather_elements", GATHER_ELEMENTS, [0, 1, 2, 3]),  # 3 would land on the next row's element
    ("gather_elements", GATHER_ELEMENTS, [0, -4, 1, 2]),
    ("gather_elements", GATHER_ELEMENTS, [-3, -1, 1, 2]),
    ("gather_nd", GATHER_ND, [0, 3]),
    ("gather_nd", GATHER_ND, [-5, 0]),
    ("gather_nd", GATHER_ND, [-4, -3]),
    ("scatter_elements", SCATTER_ELEMENTS, [0, 4, 1]),
    ("scatter_elements", SCATTER_ELEMENTS, [0, -5, 1]),
    ("scatter_elements", SCATTER_ELEMENTS, [0, -4, 3]),
    ("scatter_nd", SCATTER_ND, [4]),
    ("scatter_nd", SCATTER_ND, [-5]),
    ("scatter_nd", SCATTER_ND, [-4]),
    ("one_hot", ONE_HOT, [0, 5, -7]),  # ONNX defines these: an all-off row
    ("one_hot", ONE_HOT, [-1, -3, 2]),
]


@pytest.mark.parametrize("name,case,idx", CASES, ids=[f"{c[0]}{c[2]}" for c in CASES])
def test_fed_indices_match_onnxruntime_or_are_refused(capsys, tmp_path, name, case, idx):
    nodes, inputs, outputs, feed = case
    m = model_bytes(nodes, inputs, outputs)
    assert_agrees_with_ort(capsys, tmp_path, m, feed(idx), [o[0] for o in outputs])


def test_topk_fed_k_beyond_the_axis_is_refused(capsys, tmp_path):
    m = model_bytes(
        [helper.make_node("TopK", ["X", "K"], ["V", "J"], axis=1)],
        [("X", F, [2, 5]), ("K", I64, [1])],
        [("V", F, [2, None]), ("J", I64, [2, None])],
    )
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    for k in ([3], [6], [-1]):
        assert_agrees_with_ort(capsys, tmp_path, m, {"X": x, "K": np.array(k, np.int64)}, ["V", "J"])


@pytest.mark.parametrize("starts", [[-100], [100], [1], [-2]])
def test_slice_fed_starts_clamp_as_onnxruntime(capsys, tmp_path, starts):
    m = model_bytes(
        [
            helper.make_node("Constant", [], ["E"], value=helper.make_tensor("e", I64, [1], [4])),
            helper.make_node("Constant", [], ["A"], value=helper.make_tensor("a", I64, [1], [0])),
            helper.make_node("Slice", ["X", "S", "E", "A"], ["Y"]),
        ],
        [("X", F, [5]), ("S", I64, [1])],
        [("Y", F, [None])],
    )
    feed = {"X": np.arange(5, dtype=np.float32), "S": np.array(starts, np.int64)}
    assert_agrees_with_ort(capsys, tmp_path, m, feed, ["Y"])
