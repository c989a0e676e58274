"""A linear layer on window-partitioned tokens (Swin: reshape, transpose, reshape, MatMul with a
2-D weight) is one GEMM over all tokens. Read in place, the partition's batch axes have no one
stride, so BLAS took 64 host-looped calls per projection (745 us of Swin's 845 us fp16 graph on an
H200); eliminate_contiguous now keeps the copy, and the weight broadcast over the batch folds the
batch into the rows (blas_plan.fold_broadcast_batch)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.gpu import compile as gpu_compile
from migx_explore.gpu import lower
from migx_explore.gpu.pipelines import CompileOptions

GRID, WINDOW, CHANNELS, OUT = 28, 7, 16, 48
WINDOWS = (GRID // WINDOW) ** 2


def _window_linear() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    side = GRID // WINDOW
    inits = [
        numpy_helper.from_array(rng.standard_normal((CHANNELS, OUT)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([1, side, WINDOW, side, WINDOW, CHANNELS], np.int64), "grid"),
        numpy_helper.from_array(np.array([WINDOWS, WINDOW * WINDOW, CHANNELS], np.int64), "windows"),
    ]
    nodes = [
        helper.make_node("Relu", ["x"], ["act"]),
        helper.make_node("Reshape", ["act", "grid"], ["split"]),
        helper.make_node("Transpose", ["split"], ["part"], perm=[0, 1, 3, 2, 4, 5]),
        helper.make_node("Reshape", ["part", "windows"], ["tokens"]),
        helper.make_node("MatMul", ["tokens", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "window_linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, GRID, GRID, CHANNELS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [WINDOWS, WINDOW * WINDOW, OUT])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_window_partition_linear_is_one_gemm_over_all_tokens(fake, precision):
    program = lower(_window_linear(), CompileOptions(precision=precision), backend=fake)
    gemms = [i for i in program.main if i.name == "gpu::gemm"]
    assert len(gemms) == 1
    plan = gemms[0].op["plan"]
    assert "calls" not in plan and f"n={GRID * GRID}" in plan and "batch=1" in plan, plan


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_window_partition_linear_matches_the_reference(fake, precision):
    model = _window_linear()
    x = np.random.default_rng(1).standard_normal((1, GRID, GRID, CHANNELS)).astype(np.float32)
    want = np.asarray(evaluate(parse_onnx(model), {"x": x})[0])
    tol = 1e-5 if precision == "fp32" else 2e-2
    with gpu_compile(model, CompileOptions(precision=precision), backend=fake) as compiled:
        for mode in ("eager", "graph"):
            got = np.asarray(compiled.run({"x": x}, mode=mode)[0], dtype=np.float32)
            assert np.abs(got - want).max() <= tol * np.abs(want).max(), mode
