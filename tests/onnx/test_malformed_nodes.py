"""Malformed nodes that pass the ONNX checker (it checks types and counts, not values) must be
refused with exit 2 and a message naming the node, never crash a handler (exit 3)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from migx_explore.cli import main
from tests.onnx.onnx_util import I64, F, init, vi


def _model(node, inputs, inits=()):
    g = helper.make_graph([node], "g", inputs, [vi("y", F, None)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    m.graph.output[0].type.tensor_type.shape.SetInParent()
    return m


X = [vi("x", F, [2, 3, 4])]
CASES = {
    "transpose_perm_too_short": _model(helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0], name="bad"), X),
    "transpose_perm_repeats": _model(helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0, 1], name="bad"), X),
    "gather_axis_past_rank": _model(
        helper.make_node("Gather", ["x", "i"], ["y"], axis=5, name="bad"), X, [init("i", np.array([0], np.int64))]
    ),
    "concat_axis_past_rank": _model(helper.make_node("Concat", ["x", "x"], ["y"], axis=7, name="bad"), X),
    "split_sizes_do_not_sum": _model(
        helper.make_node("Split", ["x", "s"], ["y"], axis=1, name="bad"), X, [init("s", np.array([1, 1], np.int64))]
    ),
    "reshape_two_minus_ones": _model(
        helper.make_node("Reshape", ["x", "s"], ["y"], name="bad"), X, [init("s", np.array([-1, -1], np.int64))]
    ),
    "squeeze_non_unit_axis": _model(
        helper.make_node("Squeeze", ["x", "a"], ["y"], name="bad"), X, [init("a", np.array([1], np.int64))]
    ),
    "conv_weight_rank": _model(
        helper.make_node("Conv", ["x", "w"], ["y"], name="bad"), X, [init("w", np.ones((3, 3), np.float32))]
    ),
    "tile_repeats_length": _model(
        helper.make_node("Tile", ["x", "r"], ["y"], name="bad"), X, [init("r", np.array([2, 2], np.int64))]
    ),
    "depth_to_space_blocksize": _model(
        helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=5, name="bad"), [vi("x", F, [1, 4, 2, 2])]
    ),
    "slice_axes_repeat": _model(
        helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="bad"),
        X,
        [
            init("s", np.array([0, 0], np.int64)),
            init("e", np.array([1, 1], np.int64)),
            init("a", np.array([1, 1], np.int64)),
        ],
    ),
    "onehot_depth_negative": _model(
        helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="bad"),
        [vi("i", I64, [3])],
        [init("d", np.array(-2, np.int64)), init("v", np.array([0, 1], np.float32))],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_node_is_exit_2_naming_the_node(case, tmp_path, capsys):
    path = tmp_path / f"{case}.onnx"
    onnx.save(CASES[case], path)
    rc = main(["read", str(path)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "node bad (" in err, err
    assert "Traceback" not in err
