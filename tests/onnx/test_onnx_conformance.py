"""ONNX's node conformance cases (onnx.backend.test, ~1,900) through ReferenceBackend.

A case is *listed* by rule (compiler/onnx/conformance.py) when every op type is in supported_ops();
a listed case with a value type the IR lacks counts as a failure. At least 95% of the listed cases
must pass; the counts are printed (run with -s) and recorded in docs/onnx_conformance.md by
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


def test_at_least_95_percent_of_listed_cases_pass(report):
    print(
        f"\nONNX node conformance: passed {report.passed} / listed {report.listed} ({100 * report.pass_rate:.1f}%, "
        f"{len(report.rejected)} rejected for value types) / all {report.total} ({100 * report.overall_rate:.1f}%); "
        f"{report.specialized} passed with shape-like inputs frozen"
    )
    assert report.total > 1500
    assert report.listed > 1600
    worst = "; ".join(f"{k}: {v}" for k, v in list(report.failures.items())[:5])
    assert report.pass_rate >= 0.95, worst
    assert report.passed / report.total >= 0.85


def test_support_is_decided_by_rule(report):
    assert report.supported + len(report.rejected) + len(report.unsupported) == report.total
    assert report.listed == report.supported + len(report.rejected)
    assert not set(report.failures) & set(report.unsupported)
    assert all(not r.startswith("op ") for r in report.rejected.values())
    reasons = set(report.unsupported.values())
    assert any(r.startswith("op ") for r in reasons)
    assert all(r.split()[1] not in supported_ops() for r in reasons if r.startswith("op "))


def test_core_op_cases_pass(report):
    for name in (
        "test_abs",
        "test_conv_with_strides_padding",
        "test_gemm_all_attributes",
        "test_softmax_axis_1",
        "test_resize_upsample_scales_linear",
        "test_layer_normalization_4d_axis0",
        "test_einsum_batch_matmul",
        # ops beyond MIGraphX's first list: control flow, recurrent, detection, quantized, fused
        "test_if",
        "test_scan9_sum",
        "test_lstm_with_peepholes",
        "test_gru_seq_length",
        "test_rnn_seq_length",
        "test_nonmaxsuppression_two_batches",
        "test_roialign_aligned_true",
        "test_gridsample_bicubic",
        "test_qlinearmatmul_3D_int8_float32",
        "test_qlinearconv",
        "test_convinteger_with_padding",
        "test_attention_4d_gqa",
        "test_rotary_embedding",
        "test_sce_mean_weight_ii",
        # element types through ml_dtypes
        "test_cast_FLOAT_to_FLOAT8E4M3FNUZ",
        "test_quantizelinear_int4",
        "test_dequantizelinear_e5m2",
        "test_cast_FLOAT_to_FLOAT4E2M1",
    ):
        assert name not in report.failures and name not in report.unsupported, name


def test_unsupported_reason_names_the_op():
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Det", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    assert unsupported_reason(helper.make_model(g)) == "op Det"
    g2 = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])],
    )
    assert unsupported_reason(helper.make_model(g2)) == "element type COMPLEX64"
