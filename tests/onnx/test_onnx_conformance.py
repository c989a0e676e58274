"""ONNX's node conformance cases (onnx.backend.test, ~1,900) through ReferenceBackend.

A case is *supported* by rule (compiler/onnx/conformance.py): every op type in supported_ops(),
and only tensor inputs/outputs/initializers of IR element types. At least 85% of the supported
cases must pass; the counts are printed (run with -s) and recorded in docs/onnx_conformance.md by
benchmarks/onnx_conformance.py."""

from __future__ import annotations

import os

import pytest

from migx_explore.compiler.onnx import supported_ops
from migx_explore.compiler.onnx.conformance import run_suite, unsupported_reason

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report():
    return run_suite(processes=min(os.cpu_count() or 1, 4))


def test_at_least_85_percent_of_supported_cases_pass(report):
    print(f"\nONNX node conformance: passed {report.passed} / supported {report.supported} / all {report.total} "
          f"({100 * report.pass_rate:.1f}%; {report.specialized} passed with shape-like inputs frozen)")
    assert report.total > 1500
    assert report.supported > 1000
    worst = "; ".join(f"{k}: {v}" for k, v in list(report.failures.items())[:5])
    assert report.pass_rate >= 0.85, worst


def test_support_is_decided_by_rule(report):
    assert report.supported + len(report.unsupported) == report.total
    assert not set(report.failures) & set(report.unsupported)
    reasons = set(report.unsupported.values())
    assert any(r.startswith("op ") for r in reasons) and any(r.startswith("element type") for r in reasons)
    assert all(r.split()[1] not in supported_ops() for r in reasons if r.startswith("op "))


def test_core_op_cases_pass(report):
    for name in ("test_abs", "test_conv_with_strides_padding", "test_gemm_all_attributes", "test_softmax_axis_1",
                 "test_resize_upsample_scales_linear", "test_layer_normalization_4d_axis0", "test_einsum_batch_matmul"):
        assert name not in report.failures and name not in report.unsupported, name


def test_unsupported_reason_names_the_op():
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Unique", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    assert unsupported_reason(helper.make_model(g)) == "op Unique"
    g2 = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                           [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])],
                           [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])])
    assert unsupported_reason(helper.make_model(g2)) == "element type COMPLEX64"
