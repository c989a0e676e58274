"""Issue 14: malformed models are refused before anything is computed, each with one clear line."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from migx_explore.compiler import parse
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.inputs import random_inputs
from migx_explore.compiler.limits import BudgetError, memory_budget
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.ref import evaluate

F = TensorProto.FLOAT
vi = helper.make_tensor_value_info


def model(nodes, inputs, outputs, inits=(), opset=18) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    for out in g.output:  # the checker wants a shape field on outputs; an unknown rank is fine
        out.type.tensor_type.shape.SetInParent()
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def relu(dims, opset=18) -> onnx.ModelProto:
    return model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, dims)], [vi("y", F, dims)], opset=opset)


def refused(m, match: str, **kw) -> str:
    with pytest.raises(MigxError, match=match) as e:
        parse_onnx(m, **kw)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_huge_input_refused_with_byte_count():
    msg = refused(relu([1 << 20, 1 << 20]), "over the memory budget")
    assert "4,398,046,511,104 bytes" in msg and "input 'x'" in msg


def test_budget_is_configurable(monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_MEMORY_BUDGET", "1K")
    assert memory_budget() == 1024
    refused(relu([1, 1024]), "4,096 bytes")
    monkeypatch.setenv("MIGX_EXPLORE_MEMORY_BUDGET", "lots")
    with pytest.raises(BudgetError, match="not a size"):
        memory_budget()


def test_random_inputs_check_the_budget_first(monkeypatch):
    p = parse("x = @param:x -> float_type, {64, 64}\nr = relu(x) -> float_type, {64, 64}\n")
    monkeypatch.setenv("MIGX_EXPLORE_MEMORY_BUDGET", "1000")
    with pytest.raises(BudgetError, match=r"random inputs x \[64, 64\] needs 32,768 bytes"):
        random_inputs(p)


def test_evaluator_checks_each_value_before_computing(monkeypatch):
    p = parse(
        "x = @param:x -> float_type, {4}\n"
        "b = multibroadcast[out_lens={4096, 4}](x) -> float_type, {4096, 4}, {0, 1}\n"
        "r = relu(b) -> float_type, {4096, 4}\n"
    )
    monkeypatch.setenv("MIGX_EXPLORE_MEMORY_BUDGET", "10000")
    with pytest.raises(BudgetError, match=r"multibroadcast \(#1\) output needs 65,536 bytes"):
        evaluate(p, {"x": np.ones(4, np.float32)})


def test_elided_literal_over_budget_refused_by_the_parser(monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_MEMORY_BUDGET", "1M")
    with pytest.raises(MigxError, match="memory budget"):
        parse("l = @literal{ ... } -> float_type, {1048576, 1024}\n", allow_elided=True)


def test_constant_of_shape_and_range_checked_before_allocating():
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "s")
    refused(
        model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [vi("y", F, None)], [shape]),
        "ConstantOfShape.*memory budget",
    )
    lim = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("a", 0), ("b", 1 << 50), ("d", 1))]
    refused(
        model([helper.make_node("Range", ["a", "b", "d"], ["y"])], [], [vi("y", TensorProto.INT64, None)], lim),
        "Range.*memory budget",
    )


def test_expand_to_a_huge_shape_refused_at_import():
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "s")
    refused(
        model([helper.make_node("Expand", ["x", "s"], ["y"])], [vi("x", F, [1, 1])], [vi("y", F, None)], [shape]),
        "Expand.*memory budget",
    )


def test_negative_dim_refused():
    refused(relu([-3, 4]), "dimension 0 is -3; dimensions must not be negative")


def test_opset_newer_than_onnx_knows_refused():
    msg = refused(relu([1, 4], opset=99), "declares opset 99")
    assert f"knows opsets 1 to {onnx.defs.onnx_opset_version()}" in msg


@pytest.mark.parametrize("pads", [[0, 0, 0, -100, 0, 0, 0, 0], [0, 0, 0, -5, 0, 0, 0, -5]])
def test_pad_cropping_past_the_axis_refused(pads):
    p = numpy_helper.from_array(np.array(pads, np.int64), "p")
    refused(
        model([helper.make_node("Pad", ["x", "p"], ["y"])], [vi("x", F, [1, 3, 8, 8])], [vi("y", F, None)], [p]),
        "crop .* from axis 3, which has only 8 elements",
    )


def test_pad_cropping_within_the_axis_still_works():
    p = numpy_helper.from_array(np.array([0, 0, 0, -2, 0, 0, 0, -1], np.int64), "p")
    prog = parse_onnx(
        model([helper.make_node("Pad", ["x", "p"], ["y"])], [vi("x", F, [1, 3, 8, 8])], [vi("y", F, None)], [p])
    )
    assert list(prog.main.output_shapes()[0].lens) == [1, 3, 8, 5]


@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_integer_division_by_a_constant_zero_refused(op):
    z = numpy_helper.from_array(np.array([1, 0, 2, 3], np.int32), "z")
    I32 = TensorProto.INT32
    refused(
        model([helper.make_node(op, ["x", "z"], ["y"])], [vi("x", I32, [1, 4])], [vi("y", I32, [1, 4])], [z]),
        f"{op}.*integer division by a constant divisor that holds 0",
    )


def test_float_division_by_zero_is_fine():
    z = numpy_helper.from_array(np.array([0.0], np.float32), "z")
    parse_onnx(model([helper.make_node("Div", ["x", "z"], ["y"])], [vi("x", F, [1, 4])], [vi("y", F, [1, 4])], [z]))


def test_empty_graph_refused():
    refused(model([], [vi("x", F, [1, 4])], []), "no outputs")


def test_duplicate_output_names_refused():
    refused(
        model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [1, 4])], [vi("y", F, [1, 4])] * 2),
        "'y' appear more than once",
    )


# ---- external data --------------------------------------------------------------------------------
def _external(tmp_path, info: dict[str, str], data: bytes = b"\0" * 16):
    (tmp_path / "w.bin").write_bytes(data)
    t = onnx.TensorProto(name="w", data_type=F, dims=[4], data_location=onnx.TensorProto.EXTERNAL)
    for k, v in {"location": "w.bin", **info}.items():
        t.external_data.add(key=k, value=v)
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])], [t])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def test_external_data_reads_within_range(tmp_path):
    prog = parse_onnx(_external(tmp_path, {"offset": "4", "length": "16"}, b"\1" * 4 + b"\0" * 16))
    assert prog.main.output_shapes()[0].lens == (4,)


@pytest.mark.parametrize(
    "info, match",
    [
        ({"offset": "-100"}, "offset -100 is negative"),
        ({"offset": str(2**62)}, "past the end"),
        ({"offset": "abc"}, "offset 'abc' is not an integer"),
        ({"length": "abc"}, "length 'abc' is not an integer"),
        ({"length": "-1"}, "length -1 is negative"),
        ({"offset": "8", "length": "16"}, "shorter than its declared offset 8 \\+ length 16"),
    ],
)
def test_bad_external_offsets_and_lengths_refused(tmp_path, info, match):
    refused(_external(tmp_path, info), match)


def test_external_data_folder_refused(tmp_path):
    path = _external(tmp_path, {"location": "sub"})
    (tmp_path / "sub").mkdir()
    refused(path, "'sub' is a folder; it must be a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_external_data_fifo_refused_without_blocking(tmp_path):
    path = _external(tmp_path, {"location": "pipe"})
    os.mkfifo(tmp_path / "pipe")
    refused(path, "'pipe' is a FIFO; it must be a regular file")


def test_external_data_missing_says_not_found(tmp_path):
    refused(_external(tmp_path, {"location": "nope.bin"}), "'nope.bin' not found")
