"""A Loop without a trip count runs until its condition, as ONNX Runtime does (issue 37): no
silent cap at 10 iterations; only the work budget stops a loop that never ends, saying so."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from migx_explore.compiler import evaluate
from migx_explore.compiler.limits import WORK_ENV, WorkBudgetError
from migx_explore.compiler.onnx import parse_onnx
from tests.onnx.onnx_util import const, make_model, run_ort, vi

F, B, I64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64


def _count_to_limit(scan: bool = False, forever: bool = False):
    """acc += 1 while acc < limit (limit is an input: the condition depends on data)."""
    nodes = [
        helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
        helper.make_node("Less", ["acc_out", "limit"], ["less"]),
        helper.make_node("Or", ["less", "always"], ["cond_out"]),
    ]
    outs = [vi("cond_out", B, [1]), vi("acc_out", F, [1])]
    if scan:
        nodes.append(helper.make_node("Identity", ["acc_out"], ["row"]))
        outs.append(vi("row", F, [1]))
    body = helper.make_graph(
        nodes,
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [1])],
        outs,
        [
            helper.make_tensor("one", F, [1], [1.0]),
            helper.make_tensor("always", B, [], [forever]),
        ],
    )
    loop_out = ["acc"] + (["rows"] if scan else [])
    return make_model(
        [const("go", np.array(True)), helper.make_node("Loop", ["", "go", "acc0"], loop_out, body=body)],
        [vi("acc0", F, [1]), vi("limit", F, [1])],
        [vi("acc", F, [1])] + ([vi("rows", F, None)] if scan else []),
    )


@pytest.mark.parametrize("limit", [3, 11, 100, 5000])
def test_loop_without_trip_count_runs_until_its_condition(limit):
    model = _count_to_limit()
    feed = {"acc0": np.zeros(1, np.float32), "limit": np.array([limit], np.float32)}
    ours, ref = evaluate(parse_onnx(model), feed), run_ort(model, feed)
    assert ref[0][0] == limit
    np.testing.assert_array_equal(ours[0], ref[0])


def test_per_iteration_outputs_have_one_row_per_iteration_run():
    model = _count_to_limit(scan=True)
    feed = {"acc0": np.zeros(1, np.float32), "limit": np.array([13], np.float32)}
    ours, ref = evaluate(parse_onnx(model), feed), run_ort(model, feed)
    assert ref[1].shape == (13, 1)
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a, b)


def test_a_loop_that_never_ends_stops_at_the_work_budget(monkeypatch):
    monkeypatch.setenv(WORK_ENV, "20K")
    feed = {"acc0": np.zeros(1, np.float32), "limit": np.array([3], np.float32)}
    with pytest.raises(WorkBudgetError, match=r"after 20,000 instructions, at module loop_body.*--work-budget"):
        evaluate(parse_onnx(_count_to_limit(forever=True)), feed)
