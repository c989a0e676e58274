"""If / Loop / Scan import: If and Loop become ops with submodules (outer values passed as explicit
inputs, constants copied in), a constant If condition inlines one branch, Scan unrolls; numbers are
checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import ConstantInputRequired, parse_onnx

ort = pytest.importorskip("onnxruntime")

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "cf", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def _ort(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _branch(name: str, op: str, out: str):
    return helper.make_graph([helper.make_node(op, ["x", "x"], [out])], name, [], [_vi(out, F, [3])])


def test_constant_condition_inlines_the_chosen_branch():
    cond = numpy_helper.from_array(np.array(False), "c")
    m = _model(
        [
            helper.make_node(
                "If", ["c"], ["y"], then_branch=_branch("t", "Add", "a"), else_branch=_branch("e", "Mul", "b")
            )
        ],
        [_vi("x", F, [3])],
        [_vi("y", F, [3])],
        [cond],
    )
    p = parse_onnx(m)
    assert list(p.modules) == ["main"] and "mul" in {i.name for i in p.main}
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(evaluate(p, {"x": x})[0], x * x)


def test_runtime_condition_passes_outer_values_to_both_branches():
    m = _model(
        [
            helper.make_node(
                "If", ["c"], ["y"], then_branch=_branch("t", "Add", "a"), else_branch=_branch("e", "Mul", "b")
            )
        ],
        [_vi("c", B, []), _vi("x", F, [3])],
        [_vi("y", F, [3])],
    )
    p = parse_onnx(m)
    (if_ins,) = [i for i in p.main if i.name == "if"]
    assert [len(s.params()) for s in if_ins.module_inputs] == [1, 1]  # x, captured from the outer graph
    x = np.array([1, 2, 3], np.float32)
    for c in (True, False):
        feeds = {"c": np.array(c), "x": x}
        np.testing.assert_allclose(evaluate(p, feeds)[0], _ort(m, feeds)[0])


def _counting_loop(stop_at: float):
    """acc += x each step while acc < stop_at; scan output: acc per step."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
            helper.make_node("ReduceMax", ["acc_out"], ["m"], keepdims=0),
            helper.make_node("Less", ["m", "limit"], ["cond_out"]),
            helper.make_node("Identity", ["acc_out"], ["seen"]),
        ],
        "body",
        [_vi("i", I64, []), _vi("cond_in", B, []), _vi("acc_in", F, [2])],
        [_vi("cond_out", B, []), _vi("acc_out", F, [2]), _vi("seen", F, [2])],
    )
    inits = [
        numpy_helper.from_array(np.array(6, np.int64), "trip"),
        numpy_helper.from_array(np.array(True), "go"),
        numpy_helper.from_array(np.float32(stop_at), "limit"),
        numpy_helper.from_array(np.zeros(2, np.float32), "acc0"),
    ]
    return _model(
        [helper.make_node("Loop", ["trip", "go", "acc0"], ["acc", "steps"], body=body)],
        [_vi("x", F, [2])],
        [_vi("acc", F, [2]), _vi("steps", F, [None, 2])],
        inits,
    )


def test_loop_runs_to_its_trip_count():
    m = _counting_loop(100.0)
    feeds = {"x": np.array([1.0, 2.0], np.float32)}
    got, want = evaluate(parse_onnx(m), feeds), _ort(m, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)


def test_loop_exits_early_and_pads_scan_outputs_with_zeros():
    m = _counting_loop(5.0)
    feeds = {"x": np.array([1.0, 2.0], np.float32)}
    (acc, steps), (want_acc, want_steps) = evaluate(parse_onnx(m), feeds), _ort(m, feeds)
    np.testing.assert_allclose(acc, want_acc)
    k = len(want_steps)
    assert k < 6 and steps.shape == (6, 2)
    np.testing.assert_allclose(steps[:k], want_steps)
    assert not steps[k:].any()


def test_loop_trip_count_fed_at_run_time_asks_for_a_constant():
    m = _counting_loop(5.0)
    m.graph.initializer.remove(next(t for t in m.graph.initializer if t.name == "trip"))
    m.graph.input.append(_vi("trip", I64, []))
    with pytest.raises(ConstantInputRequired) as e:
        parse_onnx(m)
    assert e.value.params == ["trip"]


@pytest.mark.parametrize("in_dir, out_dir, out_axis", [(0, 0, 0), (1, 0, 1), (0, 1, -1)])
def test_scan_unrolls_with_directions_and_axes(in_dir, out_dir, out_axis):
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Mul", ["s_out", "x_t"], ["y_t"])],
        "body",
        [_vi("s_in", F, [3]), _vi("x_t", F, [3])],
        [_vi("s_out", F, [3]), _vi("y_t", F, [3])],
    )
    node = helper.make_node(
        "Scan",
        ["s0", "xs"],
        ["s", "ys"],
        body=body,
        num_scan_inputs=1,
        scan_input_directions=[in_dir],
        scan_output_directions=[out_dir],
        scan_output_axes=[out_axis],
    )
    m = _model([node], [_vi("s0", F, [3]), _vi("xs", F, [4, 3])], [_vi("s", F, [3]), _vi("ys", F, [None, None])])
    feeds = {"s0": np.ones(3, np.float32), "xs": np.arange(12, dtype=np.float32).reshape(4, 3) / 10}
    p = parse_onnx(m)
    assert list(p.modules) == ["main"]  # unrolled: no submodule
    for g, w in zip(evaluate(p, feeds), _ort(m, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_loop_whose_body_slices_at_the_iteration_number_is_unrolled():
    """acc += table[i] while max(acc) < limit (limit fed at run time): the Slice needs i at import."""
    table = numpy_helper.from_array(np.arange(10, dtype=np.float32).reshape(5, 2), "table")
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    body = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["i", "zero_axis"], ["start"]),
            helper.make_node("Add", ["start", "one"], ["end"]),
            helper.make_node("Slice", ["table", "start", "end"], ["row2"]),
            helper.make_node("Squeeze", ["row2", "zero_axis"], ["row"]),
            helper.make_node("Add", ["acc_in", "row"], ["acc_out"]),
            helper.make_node("ReduceMax", ["acc_out"], ["m"], keepdims=0),
            helper.make_node("Less", ["m", "limit"], ["cond_out"]),
            helper.make_node("Identity", ["row"], ["seen"]),
        ],
        "body",
        [_vi("i", I64, []), _vi("cond_in", B, []), _vi("acc_in", F, [2])],
        [_vi("cond_out", B, []), _vi("acc_out", F, [2]), _vi("seen", F, [2])],
    )
    inits = [
        table,
        one,
        numpy_helper.from_array(np.array([0], np.int64), "zero_axis"),
        numpy_helper.from_array(np.array(5, np.int64), "trip"),
        numpy_helper.from_array(np.array(True), "go"),
        numpy_helper.from_array(np.zeros(2, np.float32), "acc0"),
    ]
    m = _model(
        [helper.make_node("Loop", ["trip", "go", "acc0"], ["acc", "rows"], body=body)],
        [_vi("limit", F, [])],
        [_vi("acc", F, [2]), _vi("rows", F, [None, 2])],
        inits,
    )
    p = parse_onnx(m)
    assert list(p.modules) == ["main"] and "loop" not in {i.name for i in p.main}
    for limit in (100.0, 7.0):
        feeds = {"limit": np.array(limit, np.float32)}
        (acc, rows), (want_acc, want_rows) = evaluate(p, feeds), _ort(m, feeds)
        np.testing.assert_allclose(acc, want_acc)
        np.testing.assert_allclose(rows[: len(want_rows)], want_rows)
        assert rows.shape == (5, 2) and not rows[len(want_rows) :].any()
