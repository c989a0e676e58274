"""Issue 26 item 6: work without end. A Loop with a huge constant trip count stops at the work
budget with one clear line (and --work-budget / MIGX_EXPLORE_WORK_BUDGET raise it); subgraphs
nested absurdly deep are refused at import."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from migx_explore.cli import main
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.limits import BudgetError, WorkBudgetError, work_budget
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.onnx.validate import MAX_GRAPH_DEPTH, validate_model
from migx_explore.compiler.ref import evaluate

F = TensorProto.FLOAT
vi = helper.make_tensor_value_info


def loop_model(trips: int) -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("v_in", F, [4])],
        [vi("c_out", TensorProto.BOOL, []), vi("v_out", F, [4])],
        [numpy_helper.from_array(np.ones(4, np.float32), "one")],
    )
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "M"), numpy_helper.from_array(np.array(True), "c")]
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "c", "x"], ["y"], body=body, name="forever")],
        "main",
        [vi("x", F, [4])],
        [vi("y", F, [4])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_a_huge_trip_count_stops_at_the_budget(monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_WORK_BUDGET", "10K")
    prog = parse_onnx(loop_model(10**12))  # importing it is cheap: nothing is unrolled
    with pytest.raises(WorkBudgetError, match=r"stopped after 10,000 instructions, at module .*--work-budget"):
        evaluate(prog, {"x": np.zeros(4, np.float32)})


def test_a_loop_within_the_budget_runs(monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_WORK_BUDGET", "10K")
    out = evaluate(parse_onnx(loop_model(100)), {"x": np.zeros(4, np.float32)})[0]
    np.testing.assert_array_equal(out, np.full(4, 100, np.float32))


def test_cli_stops_with_one_line_and_the_flag_raises_the_budget(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MIGX_EXPLORE_WORK_BUDGET", raising=False)
    path = tmp_path / "loop.onnx"
    onnx.save(loop_model(10**12), path)
    assert main(["run", str(path), "--work-budget", "5000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "over the work budget" in err[0] and "random inputs" not in err[0]
    onnx.save(loop_model(500), path)
    assert main(["run", str(path), "--work-budget", "1000"]) == 2
    capsys.readouterr()
    assert main(["--work-budget=1M", "run", str(path)]) == 0


def test_budget_values(monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_WORK_BUDGET", "2.5M")
    assert work_budget() == 2_500_000
    for bad in ("lots", "0", "-5"):
        monkeypatch.setenv("MIGX_EXPLORE_WORK_BUDGET", bad)
        with pytest.raises(BudgetError):
            work_budget()


def _nested_if(depth: int) -> onnx.ModelProto:
    """Built top-down in place: protobuf refuses to copy (or parse) messages this deep."""
    model = onnx.ModelProto(ir_version=9)
    model.opset_import.add(domain="", version=18)
    g = model.graph
    g.name = "main"
    g.input.append(vi("x", F, [4]))
    g.input.append(vi("c", TensorProto.BOOL, []))
    g.output.append(vi("y", F, [4]))
    out = "y"
    for level in range(depth):
        node = g.node.add(op_type="If", input=["c"], output=[out], name=f"if{level}")
        for branch in ("then_branch", "else_branch"):
            a = node.attribute.add(name=branch, type=onnx.AttributeProto.GRAPH)
            a.g.name = f"{branch}{level}"
            a.g.output.append(vi(f"o{level}{branch[0]}", F, [4]))
            if branch == "else_branch":
                a.g.node.add(op_type="Relu", input=["x"], output=[f"o{level}e"])
        g, out = node.attribute[0].g, f"o{level}t"
    g.node.add(op_type="Relu", input=["x"], output=[out])
    return model


def test_subgraphs_nested_too_deep_are_refused():
    with pytest.raises(MigxError, match=f"node if{MAX_GRAPH_DEPTH} \\(If\\): subgraphs nested more than"):
        validate_model(_nested_if(MAX_GRAPH_DEPTH + 10), "ONNX model")
    validate_model(_nested_if(8), "ONNX model")
