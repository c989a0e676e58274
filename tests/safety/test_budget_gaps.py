"""Issue 40 items 7 and 8: budgets count arithmetic, not only instructions; a spec, a pass option,
a tolerance or a memory budget outside what it takes is one line naming it."""

from __future__ import annotations

import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from migx_explore.cli import main
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.limits import WorkBudgetError, memory_budget
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.pass_infra import build_pipelines
from migx_explore.compiler.pass_infra.spec import parse_spec
from migx_explore.compiler.ref import evaluate
from migx_explore.compiler.verify import Tolerance
from migx_explore.session import Session

F = TensorProto.FLOAT
vi = helper.make_tensor_value_info
N = 256


def matmul_loop(trips: int) -> onnx.ModelProto:
    """A Loop whose body is one N x N MatMul: a few instructions per iteration, N^3 multiply-adds."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("MatMul", ["v_in", "w"], ["v_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("v_in", F, [N, N])],
        [vi("c_out", TensorProto.BOOL, []), vi("v_out", F, [N, N])],
        [numpy_helper.from_array(np.eye(N, dtype=np.float32), "w")],
    )
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "M"), numpy_helper.from_array(np.array(True), "c")]
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "c", "x"], ["y"], body=body, name="matmuls")],
        "main",
        [vi("x", F, [N, N])],
        [vi("y", F, [N, N])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_a_loop_of_large_matmuls_stops_on_arithmetic(monkeypatch):
    # 1K units of work allow 1,000 instructions and 10^8 multiply-adds: under 20 iterations here,
    # far below the instruction count that alone would allow ~300 iterations
    monkeypatch.setenv("MIGX_EXPLORE_WORK_BUDGET", "1K")
    prog = parse_onnx(matmul_loop(10**9))
    t = time.perf_counter()
    with pytest.raises(WorkBudgetError, match=r"arithmetic operations, at module .*dot.*--work-budget"):
        evaluate(prog, {"x": np.ones((N, N), np.float32)})
    assert time.perf_counter() - t < 30


def test_a_loop_of_matmuls_within_the_budget_runs(monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_WORK_BUDGET", "1K")
    x = np.ones((N, N), np.float32)
    np.testing.assert_array_equal(evaluate(parse_onnx(matmul_loop(3)), {"x": x})[0], x)


def test_a_huge_spec_is_refused_before_parsing(capsys):
    spec = "fusion{" + "-fuse_pointwise," * 750_000 + "}"  # 11.7 MB
    t = time.perf_counter()
    with pytest.raises(MigxError, match="more than a spec needs"):
        parse_spec(spec)
    assert time.perf_counter() - t < 10


@pytest.mark.parametrize(
    "value,takes",
    [
        ("9" * 5000, "at most 1024"),
        ("-1", "an integer in [1, "),
        ("0", "an integer in [1, "),
        ("nan", "an integer in [1, "),
        ("inf", "an integer in [1, "),
        ("x", "an integer in [1, "),
        ('"1024"', "an integer in [1, "),
        ("__import__('os').system('true')", "unexpected"),
        ("1024)(x", "unbalanced"),
        ("true", "an integer in [1, "),
    ],
)
def test_a_bad_option_value_is_one_line_naming_pass_and_option(capsys, value, takes):
    spec = f"fusion{{fuse_pointwise_reduce(split_size={value})}}"
    catalog = Session.from_model("mlp", numeric=False).config.catalog
    with pytest.raises(MigxError) as e:
        build_pipelines(spec, catalog)
    msg = str(e.value)
    assert "fuse_pointwise_reduce" in msg and "split_size" in msg and takes in msg, msg
    assert "\n" not in msg
    capsys.readouterr()
    assert main(["trace", "mlp", "--spec", spec, "--out", "t-never-written", "-q"]) == 2
    assert "split_size" in capsys.readouterr().err


@pytest.mark.parametrize(
    "spec,bad",
    [
        ("fusion{fuse_pointwise_reduce(enable_multi_output=1)}", "takes true or false"),
        ("optimize_rewrite{simplify_reshapes(depth=1000)}", "an integer in [1, 64]"),
        ("fuse_pointwise_reduce(split_size=-5)", "an integer in [1, "),
        ("capture_arguments(ins_names=7)", "a list of at most"),
    ],
)
def test_every_option_kind_is_checked(spec, bad):
    catalog = Session.from_model("mlp", numeric=False).config.catalog
    with pytest.raises(MigxError, match=bad.replace("[", r"\[")):
        build_pipelines(spec, catalog)


def test_good_option_values_still_build():
    catalog = Session.from_model("mlp", numeric=False).config.catalog
    pls = build_pipelines("fusion{fuse_pointwise_reduce(split_size=1024,enable_multi_output=false)}", catalog)
    (entry,) = [e for pl in pls for e in pl.entries if e.name == "fuse_pointwise_reduce"]
    assert entry.pass_.split_size == 1024 and entry.pass_.enable_multi_output is False


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "-inf"])
def test_a_tolerance_that_checks_nothing_is_refused(capsys, value):
    capsys.readouterr()
    assert main(["verify", "mlp", f"--rms-tol={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--rms-tol" in err[0], err
    with pytest.raises(MigxError, match="--atol"):
        Tolerance(atol=float(value))


@pytest.mark.parametrize("value", ["0", "-5G", "nan", "inf"])
def test_a_memory_budget_of_nothing_is_refused(monkeypatch, value):
    monkeypatch.setenv("MIGX_EXPLORE_MEMORY_BUDGET", value)
    with pytest.raises(MigxError, match="MIGX_EXPLORE_MEMORY_BUDGET"):
        memory_budget()
