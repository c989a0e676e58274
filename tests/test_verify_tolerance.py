"""compiler/verify.py: MIGraphX's relative RMS check, per-type thresholds, allclose mode, and the
per-pass numeric column that uses them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from migx_explore.compiler import Op, Program, Shape
from migx_explore.compiler.pass_infra import PassManager, compare_outputs, make_numeric_config
from migx_explore.compiler.verify import (
    Tolerance,
    check_value,
    compute_type,
    program_compute_type,
    rms_range,
    rms_threshold,
    type_epsilon,
)


def test_rms_range_is_migraphx_formula():
    a = np.array([1.0, 2.0, 3.0, -4.0])
    b = np.array([1.0, 2.5, 3.0, -4.0])
    # sqrt(sum d^2) / (sqrt(n) * max(|a|max, |b|max)) = 0.5 / (2 * 4)
    assert rms_range(a, b) == pytest.approx(0.5 / 8)
    assert rms_range(b, a) == rms_range(a, b)
    assert rms_range(np.zeros(3), np.zeros(3)) == 0.0
    assert rms_range(np.zeros(3), np.zeros(4)) == math.inf


def test_non_finite_values_count_only_when_they_disagree():
    nan, inf = np.nan, np.inf
    assert rms_range(np.array([nan, 1.0, inf]), np.array([nan, 1.0, inf])) == 0.0
    assert rms_range(np.array([nan, 1.0]), np.array([0.0, 1.0])) == math.inf
    assert rms_range(np.array([inf, 1.0]), np.array([-inf, 1.0])) == math.inf


def test_thresholds_per_type():
    assert rms_threshold("float32") == pytest.approx(80 * np.finfo(np.float32).eps)
    assert rms_threshold("float16") == pytest.approx(80 * np.finfo(np.float16).eps)
    assert rms_threshold("float64") == pytest.approx(80 * np.finfo(np.float64).eps)
    assert rms_threshold("bfloat16") == 8e-2  # MIGraphX driver's 16-bit figure, not 80 eps = 0.625
    assert rms_threshold("int8") == 1e-1
    assert rms_threshold("fp8e4m3fn") == 2e-1
    assert type_epsilon("int64") == 0.0 and type_epsilon("bool") == 0.0


def test_compute_type_is_the_lowest_precision_present():
    assert compute_type(["float32", "int64"]) == "float32"
    assert compute_type(["float32", "float16"]) == "float16"
    assert compute_type(["float32", "bfloat16", "float16"]) == "bfloat16"
    assert compute_type(["float32", "uint8"]) == "float32"  # uint8 images alone are not int8 compute
    assert compute_type(["float32", "int8"], ["quant_dot"]) == "int8"
    assert compute_type(["int32"]) == "float32"


def test_program_compute_type_reads_every_instruction():
    p = Program()
    x = p.main.add_parameter("x", Shape.of("float32", [4]))
    h = p.main.add_instruction(Op("convert", target_type="float16"), [x])
    p.main.add_return([p.main.add_instruction(Op("convert", target_type="float32"), [h])])
    assert program_compute_type(p) == "float16"


def test_large_range_reassociation_passes_and_real_errors_fail():
    rng = np.random.default_rng(0)
    ref = rng.uniform(0, 720, 4096).astype(np.float32)  # YOLO-style pixel outputs
    reassociated = ref + rng.normal(0, 2e-4, ref.shape).astype(np.float32)  # max|err| ~1e-3
    assert np.abs(reassociated - ref).max() > 5e-4  # the old rtol 1e-4 / atol 1e-5 would fail this
    assert check_value(reassociated, ref).ok
    assert not check_value(ref * 1.01, ref).ok  # a 1% error
    flipped = ref.copy()
    flipped[:64] *= -1
    assert not check_value(flipped, ref).ok


def test_integer_values_must_match_exactly():
    a = np.array([1, 2, 3], np.int64)
    assert check_value(a, a).ok
    c = check_value(np.array([1, 2, 4], np.int64), a)
    assert not c.ok and c.threshold == 0.0
    assert check_value(np.array([1, 2, 4], np.int64), a, compute="float16").threshold == 0.0


def test_allclose_mode_and_fixed_rms():
    a, b = np.array([1.0, 2.0]), np.array([1.0, 2.001])
    assert not check_value(a, b, Tolerance(rtol=1e-4, atol=0)).ok
    assert check_value(a, b, Tolerance(rtol=1e-3, atol=0)).ok
    assert math.isnan(check_value(a, b, Tolerance(rtol=1e-3)).threshold)
    assert check_value(a, b, Tolerance(rms=1e-3)).ok and not check_value(a, b, Tolerance(rms=1e-5)).ok
    assert Tolerance(rtol=1e-4, atol=1e-5).describe() == "allclose rtol 0.0001, atol 1e-05"
    assert Tolerance().describe("float16").startswith("relative RMS <= 0.0781")


def test_shape_mismatch_is_a_failure_with_a_note():
    c = check_value(np.zeros(3), np.zeros(4))
    assert not c.ok and "shape" in c.note


def test_compare_outputs_reports_the_worst_output():
    ref = [np.ones(4), np.ones(4)]
    chk = compare_outputs([np.ones(4), np.array([1, 1, 1, 2.0])], ref)
    assert not chk.ok and chk.output == 1 and chk.rms > chk.threshold
    assert "output 1: rms" in chk.describe()
    legacy = compare_outputs([np.ones(4), np.ones(4) + 1e-3], ref, 1e-2, 1e-3)  # (rtol, atol) form
    assert legacy.ok and math.isnan(legacy.threshold)


def test_pass_manager_numeric_column_uses_the_rms_check():
    p = Program()
    x = p.main.add_parameter("x", Shape.of("float32", [64]))
    p.main.add_return([p.main.add_instruction(Op("mul"), [x, p.main.add_literal(np.full(64, 700, np.float32))])])

    def perturb(module):  # multiply by 700.0001: relative error 1.4e-7, below 80 eps
        ins = next(i for i in module if i.name == "mul")
        lit = module.add_literal(np.full(64, 700.0001, np.float32))
        module.replace_instruction(ins, ins.op, [ins.inputs[0], lit])
        return True

    from migx_explore.compiler.pass_infra import FunctionPass

    cfg = make_numeric_config(p)
    trace = PassManager(numeric=cfg).run(p, [FunctionPass(fn=perturb, label="perturb")])
    rec = trace.records[0]
    assert rec.numeric.ok and 0 < rec.numeric.rms < rec.numeric.threshold
    assert rec.numeric.as_dict()["threshold"] == pytest.approx(80 * np.finfo(np.float32).eps)


def test_a_pass_that_computes_in_fp16_is_judged_by_the_fp16_threshold():
    from migx_explore.session import Session

    src = """
    x = @param:x -> float_type, {4, 64}, {64, 1}
    @1 = exp(x) -> float_type, {4, 64}, {64, 1}
    @2 = @return(@1)
    """

    def to_half(module):  # what a quantize_fp16 stage does: compute exp in half, convert back
        e = next(i for i in module if i.name == "exp")
        h = module.insert_instruction(e, Op("convert", target_type="float16"), [e.inputs[0]])
        eh = module.insert_instruction(e, Op("exp"), [h])
        module.replace_all_uses(e, module.insert_instruction(e, Op("convert", target_type="float32"), [eh]))
        return True

    s = Session.from_text(src, include_backend=False)
    s.insert_pass(to_half, after="required.normalize_ops")
    rec = s.trace.find("to_half")
    assert rec.numeric.ok and rec.numeric.rms > rms_threshold("float32")  # fp32's threshold would fail it
    assert rec.numeric.threshold == pytest.approx(rms_threshold("float16"))
    assert "float16" in rec.numeric.tolerance


@pytest.mark.parametrize("precision", ["fp16", "bf16", "int8", "fp8"])
def test_precision_modes_pass_verify_with_their_own_thresholds(precision):
    from migx_explore.session import Session
    from migx_explore.verification import verify_session

    report = verify_session(Session.from_model("mlp", include_backend=False, precision=precision))
    assert report.ok, str(report)
    want = {"fp16": "(float16)", "bf16": "(bfloat16)", "int8": "(int8)", "fp8": "(float8e4m3fn)"}[precision]
    assert want in report.tolerance and "from quantize." in report.tolerance


def _same_float(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))


@pytest.mark.parametrize(
    "case", ["plain", "nan_inf", "transposed", "float64_view", "reshaped", "ints", "empty", "signed_zero", "float16"]
)
def test_check_value_figures_are_the_ones_each_scan_computes_alone(case):
    """check_value converts each side to float64 once for all its figures, and skips the NaN and
    inf masks where both sides are finite: the same numbers as rms_range and the elementwise
    errors computed each on its own."""
    from migx_explore.compiler.verify import Tolerance, check_value, rms_range

    rng = np.random.default_rng(7)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    a = (b + 1e-4 * rng.standard_normal((6, 5))).astype(np.float32)
    if case == "nan_inf":
        a[0, 0] = b[0, 0] = np.nan
        a[1, 1], b[1, 1] = np.inf, np.inf
        a[2, 2] = np.nan
    elif case == "transposed":
        a, b = np.ascontiguousarray(a.T).T, b
    elif case == "float64_view":
        a, b = a.astype(np.float64)[:, ::2], b.astype(np.float64)[:, ::2]
    elif case == "reshaped":
        a = a.reshape(30)
    elif case == "ints":
        a, b = (a * 10).astype(np.int64), (b * 10).astype(np.int64)
    elif case == "empty":
        a, b = a[:0], b[:0]
    elif case == "signed_zero":
        a[0], b[0] = -0.0, 0.0
        a[1] = b[1]
    elif case == "float16":
        a, b = a.astype(np.float16), b.astype(np.float16)
    for tol in (Tolerance(), Tolerance(rtol=1e-3, atol=1e-5)):
        got = check_value(a, b, tol)
        a64 = np.asarray(a, np.float64).reshape(b.shape)
        b64 = np.asarray(b, np.float64)
        same = (np.isnan(a64) & np.isnan(b64)) | (a64 == b64)
        with np.errstate(all="ignore"):
            err = np.nan_to_num(np.where(same, 0.0, np.abs(a64 - b64)), nan=np.inf)
            rel = np.nan_to_num(err / (np.abs(b64) + max(tol.atol or 0.0, 1e-30)), nan=np.inf)
        assert _same_float(got.rms, rms_range(a.reshape(b.shape), b))
        assert got.max_abs == float(err.max(initial=0.0)) and _same_float(got.max_rel, float(rel.max(initial=0.0)))
