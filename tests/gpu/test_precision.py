"""Low-precision programs on the GPU target (issue 11): fp16 / bf16 / int8 / fp8 kernels and
GEMMs against the reference evaluator (which computes faithfully in the low precision), and the
built-in models compiled at each precision, eager and graph, within the issue's error budgets.

Fake-backend tests (CI) check the lowering decisions (int8 / fp8 GEMMs on BLAS in the TN layout,
the generated tiled kernel where BLAS cannot take them or refuses at finalize, never the host)
and run a few models through the emulation; `gpu`-marked tests run everything on the device."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from migx_explore import models
from migx_explore.compiler import evaluate
from migx_explore.compiler.inputs import random_inputs
from migx_explore.compiler.parser import parse
from migx_explore.compiler.pass_infra import PassManager
from migx_explore.gpu import compile_program, compile_program_ir
from migx_explore.gpu.codegen import gemm_kernel
from migx_explore.gpu.ops import inner_op
from migx_explore.gpu.pipelines import CompileOptions, gpu_pipelines

LIMITS = {"fp16": 1e-2, "bf16": 3e-2, "int8": 5e-2, "fp8": 8e-2}
# Per-tensor scales exceed the budget against fp32 even on the reference (tests/passes/test_quantize.py):
# there the GPU is compared with the reference at the same precision only.
# gpt2_decode fp8 too: 9.6e-2 on the reference (and 9.59e-2 on the H100).
# yolo_e2e int8 / fp8: its TopK re-ranks candidates once the scores are quantized, so the selected
# boxes differ from fp32 (on the reference too: 1.3e-1 / 4.6e-2 of the output range) — a discrete
# change no tolerance covers.
# bert_encoder / llama_decoder (random weights, per-tensor scales): the reference itself is 4.2e-2 to
# 5.0e-2 (bert int8), 1.4e-1 (bert fp8), 8.7e-2 (llama int8) and 3.1e-1 (llama fp8) from fp32.
PER_TENSOR_OVER_BUDGET = {
    ("mobilenet", "bf16"),
    ("mobilenet", "int8"),
    ("mobilenet", "fp8"),
    ("yolo", "int8"),
    ("yolo", "fp8"),
    ("gpt2_decode", "fp8"),
    ("yolo_e2e", "int8"),
    ("yolo_e2e", "fp8"),
    ("bert_encoder", "int8"),
    ("bert_encoder", "fp8"),
    ("llama_decoder", "int8"),
    ("llama_decoder", "fp8"),
}
# GPU against the reference at the same precision: summation order and fp16/bf16 rounding of
# intermediates differ; a flipped 8-bit rounding step downstream costs one quantization step.
# (mobilenet bf16 is 3.3e-2 from fp32 on the reference itself; the GPU lands as far the other way.)
SAME_PRECISION = {"fp16": 5e-3, "bf16": 5e-2, "int8": 2e-2, "fp8": 4e-2}


def rel_rms(got, want) -> float:
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.sqrt(np.mean((g - w) ** 2)) / max(np.sqrt(np.mean(w**2)), 1e-30))


def quantized_reference(name: str, precision: str, feed) -> list[np.ndarray]:
    """The reference evaluator on the program after the quantize stage and the target-independent
    pipelines (low-precision arithmetic as numpy / ml_dtypes does it)."""
    p = models.load(name)
    PassManager().run(p, gpu_pipelines(CompileOptions(precision=precision), include_backend=False, calibration=(feed,)))
    return evaluate(p, feed)


def check_precision(name: str, precision: str, backend, same_precision: bool = True) -> dict:
    """Eager and graph outputs against fp32 (the issue's budget) and, when `same_precision` or
    the budget is out of reach for per-tensor scales, against the reference at the same precision."""
    p = models.load(name)
    feed = random_inputs(p, seed=1)
    want32 = evaluate(p, feed)
    same_precision = same_precision or (name, precision) in PER_TENSOR_OVER_BUDGET
    want_q = quantized_reference(name, precision, feed) if same_precision else [None] * len(want32)
    opts = CompileOptions(precision=precision, calibration=(feed,))
    errs = {}
    with compile_program(p, opts, backend=backend) as c:
        assert not c.steps.host_ops, c.steps.host_ops
        for mode in ("eager", "graph"):
            got = c.run(feed, mode=mode)
            for g, w32, wq in zip(got, want32, want_q):
                assert np.all(np.isfinite(np.asarray(g, np.float64))), f"{name} {precision} {mode}: non-finite"
                e_q = rel_rms(g, wq) if wq is not None else float("nan")
                if wq is not None:
                    # Over budget, one flipped 8-bit rounding compounds through a deep net (an e4m3 step is
                    # 6%): there the GPU must stay closer to the same-precision reference than that
                    # reference is to fp32 (H100: mobilenet fp8 1.0e-1 vs 3.8e-1, yolo fp8 7.4e-2 vs 1.3e-1).
                    tol = SAME_PRECISION[precision]
                    if (name, precision) in PER_TENSOR_OVER_BUDGET:
                        tol = max(tol, 0.8 * rel_rms(wq, w32))
                    assert e_q <= tol, f"{name} {precision} {mode}: {e_q:.2e} vs reference (limit {tol:.2e})"
                e32 = rel_rms(g, w32)
                if (name, precision) not in PER_TENSOR_OVER_BUDGET:
                    assert e32 <= LIMITS[precision], f"{name} {precision} {mode}: {e32:.2e} vs fp32"
                errs[mode] = (e32, e_q)
    return errs


# ---- lowering decisions (no GPU) ---------------------------------------------------------------
def _lowered(name: str, precision: str, backend):
    p = models.load(name)
    feed = random_inputs(p, seed=0)
    return compile_program_ir(p, CompileOptions(precision=precision, calibration=(feed,)), backend=backend)


def _kinds(prog) -> list[tuple[str, str, str]]:
    out = []
    for ins in prog.main:
        if ins.name == "gpu::gemm":
            out.append(("gemm", ins.inputs[0].shape.type, ins.op["plan"]))
        elif ins.name in ("gpu::code_object", "gpu::host_op"):
            out.append((ins.name, inner_op(ins.op["op"]).name, ins.op.attrs.get("symbol_name", "")))
    return out


@pytest.mark.parametrize("precision,qtype", [("int8", "int8"), ("fp8", "float8e4m3fn")])
def test_quantized_gemms_go_to_blas_in_the_tn_layout(fake, precision, qtype):
    kinds = _kinds(_lowered("transformer", precision, fake))
    gemms = [k for k in kinds if k[0] == "gemm"]
    assert gemms and all(t == qtype and plan.startswith("TN ") for _, t, plan in gemms), gemms
    assert not [k for k in kinds if k[0] == "gpu::host_op"]


def test_fp8_without_fp8_blas_widens_to_a_half_gemm(fake):
    fake.quant_gemm_types = ("int8",)  # e.g. an sm_80 GPU, or hip-python (no fp8 GEMM binding)
    kinds = _kinds(_lowered("mlp", "fp8", fake))
    gemms = [k for k in kinds if k[0] == "gemm"]
    assert gemms and all(t == "float16" and plan.endswith("float16->float32") for _, t, plan in gemms), gemms
    assert not [k for k in kinds if k[0] == "gpu::host_op"]


def test_without_widening_the_generated_gemm_runs(fake, monkeypatch):
    from migx_explore.gpu.passes import lowering

    monkeypatch.setattr(lowering, "WIDEN_8BIT", False)
    fake.quant_gemm_types = ("int8",)
    kinds = _kinds(_lowered("mlp", "fp8", fake))
    tiled = [k for k in kinds if k[1] == "quant_dot"]
    assert tiled and all(k[2].startswith("gemm_tiled_float8e4m3fn") for k in tiled), kinds
    assert not [k for k in kinds if k[0] in ("gemm", "gpu::host_op")]
    check_precision("mlp", "fp8", fake)


@pytest.mark.parametrize("name", ["resnet_block", "mobilenet"])
def test_quantized_convolutions_are_device_ops(fake, name):
    kinds = _kinds(_lowered(name, "int8", fake))
    assert not [k for k in kinds if k[0] == "gpu::host_op"], kinds
    assert any(k[1] == "gpu::im2col" for k in kinds) and any(k[0] == "gemm" for k in kinds)


@pytest.mark.parametrize(
    "name,precision",
    [("mlp", p) for p in LIMITS]
    + [("resnet_block", "int8"), ("resnet_block", "fp8"), ("transformer", "fp16"), ("transformer", "int8")],
)
def test_models_at_each_precision_on_fake(fake, name, precision):
    check_precision(name, precision, fake)


def test_blas_refusal_falls_back_to_the_generated_gemm(fake):
    fake.refuse_gemm_types = ("int8", "float8e4m3fn")
    p = models.load("resnet_block")
    feed = random_inputs(p, seed=1)
    want = quantized_reference("resnet_block", "int8", feed)
    with compile_program(p, CompileOptions(precision="int8", calibration=(feed,)), backend=fake) as c:
        refused = [i for i in c.steps.info if "BLAS refused" in i.kernel]
        assert refused and all(i.kind == "kernel" and i.kernel.startswith("gemm_tiled_int8") for i in refused)
        assert rel_rms(c.run(feed, mode="graph")[0], want[0]) <= SAME_PRECISION["int8"]


def test_generated_gemm_source():
    from migx_explore.compiler.shape import Shape

    ks = gemm_kernel([Shape("int8", [2, 33, 45]), Shape("int8", [2, 45, 17]), Shape("int32", [2, 33, 17])])
    assert "__shared__ int sa[16][17]" in ks.source and "const signed char*" in ks.source
    assert ks.local_size == 256 and ks.global_size == 2 * 3 * 2 * 256  # batch x row tiles x col tiles
    ks8 = gemm_kernel([Shape("float8e4m3fn", [8, 16]), Shape("float8e4m3fn", [16, 4]), Shape("float32", [8, 4])])
    assert "__shared__ float sa" in ks8.source and "migx::fp8e4m3_t" in ks8.source


def test_hip_int8_gemm_call_shapes(tmp_path, monkeypatch):
    from migx_explore.gpu import kernel_cache
    from migx_explore.gpu.runtime.hip import HIP_R, HIPBLAS_R_6X, HipBackend

    from .fake_hip import FakeHip

    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))
    kernel_cache.clear_memory_cache()
    for version in ("10.0.0.0.1.2", "6.4.4.555.40"):
        fh = FakeHip(version)
        be = HipBackend(bindings=fh.modules())
        p = models.load("mlp")
        feed = random_inputs(p, seed=0)
        with compile_program(p, CompileOptions(precision="int8", calibration=(feed,)), backend=be) as c:
            c.run(feed)
        gemm = fh.named("hipblasGemmStridedBatchedEx")[0]
        if version.startswith("6."):
            assert (gemm["aType"], gemm["cType"], gemm["computeType"]) == (
                HIPBLAS_R_6X["int8"],
                HIPBLAS_R_6X["int32"],
                HIPBLAS_R_6X["int32"],
            )
        else:
            assert (gemm["aType"], gemm["cType"], gemm["computeType"]) == (HIP_R["int8"], HIP_R["int32"], 9)
        assert (gemm["transA"], gemm["transB"]) == (112, 111)  # TN


# ---- on the device -----------------------------------------------------------------------------
FP8_SWEEP = np.concatenate(
    [
        np.array(
            [
                0.0,
                -0.0,
                1.0,
                -1.5,
                448.0,
                -448.0,
                449.0,
                463.9,
                464.0,
                464.1,
                500.0,
                2.0**-9,
                2.0**-10,
                3 * 2.0**-10,
                2.0**-6,
                2.0**-7 * 1.0625,
                0.1,
                1e-8,
                np.inf,
                -np.inf,
                np.nan,
            ],
            np.float32,
        ),
        np.random.default_rng(0).standard_normal(4096).astype(np.float32) * np.float32(60.0),
        np.linspace(-0.02, 0.02, 999, dtype=np.float32),
    ]
)


def _convert_program(src: str, dst: str, n: int):
    return parse(f"""
        x = @param:x -> {src}, {{{n}}}
        c = convert[target_type={dst}](x) -> {dst}, {{{n}}}
        r = @return(c)
    """)


@pytest.mark.gpu
@pytest.mark.parametrize("low", ["fp8e4m3fn_type", "half_type", "bf16_type"])
def test_float_conversions_match_the_reference_bit_for_bit(device, low):
    """The GPU's narrowing convert is the reference's: round to nearest even as ml_dtypes does,
    after clamping finite values to the target's range (MIGraphX's convert; for e4m3fn also
    infinities, ONNX's saturating cast), so 464.1 and 1e6 become 448 in fp8 and 65504 in half."""
    x = FP8_SWEEP
    npd = {"fp8e4m3fn_type": ml_dtypes.float8_e4m3fn, "half_type": np.float16, "bf16_type": ml_dtypes.bfloat16}[low]
    program = _convert_program("float_type", low, x.size)
    want = np.asarray(evaluate(program, {"x": x})[0])
    with compile_program(program, backend=device) as c:
        got = np.asarray(c.run({"x": x})[0])
    bits = np.uint8 if npd == ml_dtypes.float8_e4m3fn else np.uint16
    same = got.view(bits) == want.view(bits)
    nan_both = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    bad = ~(same | nan_both)
    assert not bad.any(), list(zip(x[bad][:8], got[bad][:8], want[bad][:8]))
    in_range = np.isfinite(x) & (np.abs(x) <= float(ml_dtypes.finfo(npd).max))
    assert np.array_equal(want[in_range].view(bits), x[in_range].astype(npd).view(bits))  # ml_dtypes in range


LOW_OPS = """
    x = @param:x -> {t}, {{4, 384}}
    g = @param:g -> {t}, {{384}}
    s = softmax[axis=1](x) -> {t}, {{4, 384}}
    m = reduce_sum[axes={{1}}](x) -> {t}, {{4, 1}}
    n = reduce_mean[axes={{1}}](x) -> {t}, {{4, 1}}
    gb = multibroadcast[out_lens={{4, 384}}](g) -> {t}, {{4, 384}}, {{0, 1}}
    e = mul(x, gb) -> {t}, {{4, 384}}
    r = @return(s, m, n, e)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("t,rtol", [("half_type", 2e-3), ("bf16_type", 1.6e-2)])
def test_half_reductions_accumulate_in_float(device, t, rtol):
    p = parse(LOW_OPS.format(t=t))
    npd = np.float16 if t == "half_type" else ml_dtypes.bfloat16
    rng = np.random.default_rng(0)
    feed = {"x": (rng.standard_normal((4, 384)) + 4).astype(npd), "g": rng.standard_normal(384).astype(npd)}
    want = evaluate(p, feed)
    with compile_program(p, backend=device) as c:
        for got, w in zip(c.run(feed), want):
            # a half accumulator would be off by far more: 384 values near 4 sum to ~1536
            np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(w, np.float32), rtol=rtol, atol=rtol)


def _dot_program(t: str, out_t: str, a: tuple, b: tuple, op: str, b_t: bool) -> object:
    bl = (b[:-2] + (b[-1], b[-2])) if b_t else b
    lens = lambda s: "{" + ", ".join(map(str, s)) + "}"  # noqa: E731
    body = [f"a = @param:a -> {t}, {lens(a)}", f"b = @param:b -> {t}, {lens(bl)}"]
    bv = "b"
    if b_t:
        perm = list(range(len(b) - 2)) + [len(b) - 1, len(b) - 2]
        std = [int(np.prod(bl[k + 1 :])) for k in range(len(bl))]
        body.append(f"bt = transpose[permutation={lens(perm)}](b) -> {t}, {lens(b)}, {lens([std[k] for k in perm])}")
        bv = "bt"
    body.append(f"d = {op}(a, {bv}) -> {out_t}, {lens(a[:-1] + b[-1:])}")
    body.append("r = @return(d)")
    return parse("\n".join(body))


GEMM_CASES = [
    ((64, 256), (256, 128), False),
    ((33, 45), (45, 17), False),
    ((2, 32, 64), (2, 64, 48), True),
    ((128, 64), (64, 96), True),
]


@pytest.mark.gpu
@pytest.mark.parametrize("widen", [True, False])
@pytest.mark.parametrize("a,b,b_t", GEMM_CASES)
@pytest.mark.parametrize("t", ["int8", "fp8", "half", "bf16"])
def test_gemms_against_the_reference(device, t, a, b, b_t, widen, monkeypatch):
    from migx_explore.gpu.passes import lowering

    if not widen and t in ("half", "bf16"):
        pytest.skip("widening applies to 8-bit products only")
    monkeypatch.setattr(lowering, "WIDEN_8BIT", widen)  # False: the generated tiled kernel
    ir_t, npd, out_t, op = {
        "int8": ("int8_type", np.int8, "int32_type", "quant_dot"),
        "fp8": ("fp8e4m3fn_type", ml_dtypes.float8_e4m3fn, "float_type", "quant_dot"),
        "half": ("half_type", np.float16, "half_type", "dot"),
        "bf16": ("bf16_type", ml_dtypes.bfloat16, "bf16_type", "dot"),
    }[t]
    p = _dot_program(ir_t, out_t, a, b, op, b_t)
    rng = np.random.default_rng(1)
    shape_b = (b[:-2] + (b[-1], b[-2])) if b_t else b
    if t == "int8":
        feed = {"a": rng.integers(-128, 128, a).astype(np.int8), "b": rng.integers(-128, 128, shape_b).astype(np.int8)}
    else:
        feed = {"a": rng.standard_normal(a).astype(npd), "b": rng.standard_normal(shape_b).astype(npd)}
    want = evaluate(p, feed)[0]
    with compile_program(p, backend=device) as c:
        for mode in ("eager", "graph"):
            got = c.run(feed, mode=mode)[0]
            if t == "int8":
                np.testing.assert_array_equal(got, want)  # int32 accumulation is exact
            else:
                # fp8 products are exact in fp32 and the tiled kernel and the widened half GEMM sum them
                # in fp32; Hopper's fp8 tensor cores (cuBLASLt) accumulate with fewer bits: on the H100
                # we measured up to 2e-2 absolute (1e-3 relative) at k=256.
                native = any(i.kind == "blas" and "float8e4m3fn" in i.kernel for i in c.steps.info)
                tol = {"fp8": 2e-3 if native else 1e-5, "half": 2e-3, "bf16": 1.6e-2}[t]
                np.testing.assert_allclose(
                    np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol * np.sqrt(a[-1])
                )
        paths = [i.kernel for i in c.steps.info if i.kind in ("blas", "kernel")]
    print(t, a, b, b_t, paths)


# The explorer's scale models (issue 23) are not in the device sweep: yolov10n ends in TopK over 8,400
# anchors whose near-ties no tolerance describes (as yolo_e2e at fp8), and bilstm's 4,000-instruction
# unroll at every precision would take most of a device session; neither was run on a GPU yet.
ALL_MODELS = [n for n in models.list_models() if n not in ("yolov10n", "bilstm")]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ALL_MODELS)
@pytest.mark.parametrize("precision", list(LIMITS))
def test_models_at_each_precision_on_device(request, device, name, precision):
    if (name, precision) == ("yolo_e2e", "fp8"):
        # H100: 1.8e-1 from the fp8 reference. Its TopK chooses among scores that fp8 makes near-equal,
        # and the GPU's order of accumulation breaks those near-ties differently, so other boxes are
        # selected; the selection is discrete, no tolerance describes it.
        request.node.add_marker(
            pytest.mark.xfail(reason="fp8 TopK near-ties select different boxes than the reference", strict=False)
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        errs = check_precision(name, precision, device, same_precision=False)
    print(name, precision, {m: f"{e32:.2e}/{eq:.2e}" for m, (e32, eq) in errs.items()})
