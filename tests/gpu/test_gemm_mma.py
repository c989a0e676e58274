"""The generated tensor-core GEMM (gpu/codegen/gemm_mma.py): small half / bfloat16 products run as
one generated kernel with their whole epilogue (bias, erf-GELU, residual, a widening to float32)
instead of a BLAS call plus an epilogue kernel. Which GEMMs take it (the rule and its switch), the
plan for each layout, the sources compiling with nvcc where it is installed, and, on the fake
backend and marked `gpu` on a device, outputs against the reference evaluator for every path:
16-byte and element loads, a transposed weight, a batch with a broadcast weight, ragged sizes."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape
from migx_explore.gpu import compile_program
from migx_explore.gpu.codegen.gemm_mma import (
    GENERATED_MAX_MACS,
    generated_gemm_wanted,
    plan_mma_gemm,
)
from migx_explore.gpu.pipelines import CompileOptions

BACKENDS = ["fake", pytest.param("device", marks=pytest.mark.gpu)]


def linear(
    seq: int,
    d: int,
    n: int,
    dtype: str = "float16",
    *,
    epilogue: str = "gelu_erf",
    weight: str = "kn",
    batch: int = 0,
    widen: bool = False,
) -> Program:
    """epilogue(x · W) with x [batch?, seq, d]; weight "kn" ([d, n] literal), "nk" (the transpose
    of an [n, d] literal, as a Gemm with transB exports it) or "param" (a second input per batch);
    epilogue "" (none), "bias", "gelu_erf" (bias then BERT's erf-GELU) or "residual" (bias and
    the input added back, d == n); widen: the result converted to float32."""
    rng = np.random.default_rng(seq * 131 + d * 7 + n)
    p = Program()
    m = p.main

    def op(name: str, *args, **attrs):
        return m.add_instruction(Op(name, **attrs), list(args))

    lead = [batch] if batch else []
    out_lens = [*lead, seq, n]
    x = m.add_parameter("x", Shape.of(dtype, [*lead, seq, d]))
    if weight == "param":
        w = m.add_parameter("w", Shape.of(dtype, [*lead, d, n]))
    else:
        if weight == "kn":
            w = m.add_literal((rng.standard_normal((d, n)) / math.sqrt(d)).astype(dtype))
        else:
            wt = m.add_literal((rng.standard_normal((n, d)) / math.sqrt(d)).astype(dtype))
            w = op("transpose", wt, permutation=[1, 0])
        if batch:
            w = op("multibroadcast", w, out_lens=[batch, d, n])
    y = op("dot", x, w)
    if epilogue:
        b = m.add_literal((rng.standard_normal(n) * 0.5).astype(dtype))
        y = op("add", y, op("multibroadcast", b, out_lens=out_lens))
    if epilogue == "gelu_erf":

        def scalar(v: float):
            return op("multibroadcast", m.add_literal(np.array([v], dtype)), out_lens=out_lens)

        erf = op("erf", op("div", y, scalar(math.sqrt(2.0))))
        y = op("mul", op("mul", scalar(0.5), y), op("add", scalar(1.0), erf))
    elif epilogue == "residual":
        y = op("add", y, x)
    if widen:
        y = op("convert", y, target_type="float32")
    m.add_return([y])
    return p


def _run(program: Program, backend, precision: str = "fp16"):
    rng = np.random.default_rng(3)
    feeds = {p.param_name: rng.standard_normal(p.shape.lens).astype(p.shape.type) for p in program.main.params()}
    want = np.asarray(evaluate(program, feeds)[0], np.float64)
    with compile_program(program, CompileOptions(precision=precision), backend=backend) as compiled:
        gemms = [i for i in compiled.program.main if i.name == "gpu::gemm"]
        launched = [(i.kind, i.kernel) for i in compiled.steps.info]
        outs = {mode: np.asarray(compiled.run(feeds, mode=mode)[0], np.float64) for mode in ("eager", "graph")}
    return gemms, launched, outs, want


CASES = {
    # (seq, d, n, dtype, options): every staging path of the kernel
    "gpt2_qkv": (128, 128, 384, "float16", {}),
    "bert_fc1_bf16": (128, 256, 1024, "bfloat16", {}),
    "decode_row": (1, 64, 192, "float16", {"epilogue": "bias"}),
    "ragged_k_n": (77, 40, 100, "float16", {}),  # K and N not multiples of 8: element loads
    "transposed_weight": (96, 64, 128, "float16", {"weight": "nk"}),
    "residual": (64, 128, 128, "float16", {"epilogue": "residual"}),
    "widened": (32, 64, 48, "float16", {"epilogue": "", "widen": True}),
    "batched_params": (40, 32, 24, "float16", {"weight": "param", "batch": 3, "epilogue": ""}),
    "batch_broadcast_weight": (50, 64, 72, "bfloat16", {"batch": 2, "epilogue": "bias"}),
    # a convolution-sized K: many chunks through the pipeline
    "long_k": (128, 1152, 256, "float16", {"epilogue": "bias"}),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_gemm_matches_the_reference(case, backend, request, monkeypatch):
    monkeypatch.setenv("MIGX_GEMM_GEN", "all")
    seq, d, n, dtype, opts = CASES[case]
    gemms, launched, outs, want = _run(linear(seq, d, n, dtype, **opts), request.getfixturevalue(backend))
    assert gemms and all(g.op["kernel_symbol"].startswith("gemm_mma_") for g in gemms), [g.op for g in gemms]
    assert not any(kind == "blas" for kind, _ in launched), launched
    # the epilogue is in the GEMM's kernel: nothing launches after it
    assert launched[-1][1].startswith("gemm_mma_"), launched
    tol = 5e-2 if dtype == "bfloat16" else 1e-2
    for mode, got in outs.items():
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{case} {mode}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["gpt2_qkv", "transposed_weight", "residual"])
def test_weights_loaded_before_the_dependency_wait_give_the_same_product(case, backend, request, monkeypatch):
    """MIGX_GEMM_PREFETCH=1: the constant weight's first chunks load before kernel_wait()."""
    monkeypatch.setenv("MIGX_GEMM_GEN", "all")
    monkeypatch.setenv("MIGX_GEMM_PREFETCH", "1")
    seq, d, n, dtype, opts = CASES[case]
    _, launched, outs, want = _run(linear(seq, d, n, dtype, **opts), request.getfixturevalue(backend))
    assert launched[-1][1].startswith("gemm_mma_"), launched
    for mode, got in outs.items():
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2, err_msg=f"{case} {mode}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_switched_off_the_gemm_is_a_blas_call_again(backend, request, monkeypatch):
    monkeypatch.setenv("MIGX_GEMM_GEN", "0")
    gemms, launched, outs, want = _run(linear(64, 64, 64), request.getfixturevalue(backend))
    assert not gemms[0].op["kernel_symbol"]
    assert [kind for kind, _ in launched][:1] == ["blas"], launched
    for mode, got in outs.items():
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2, err_msg=mode)


def test_float32_gemms_stay_blas_calls(fake, monkeypatch):
    """fp32 keeps cuBLAS (TF32 is off, and mma.sync has no float32 form)."""
    monkeypatch.setenv("MIGX_GEMM_GEN", "all")
    gemms, launched, _, _ = _run(linear(32, 32, 32, "float32"), fake, "fp32")
    assert not gemms[0].op["kernel_symbol"] and launched[0][0] == "blas", launched


def test_the_rule_takes_small_half_products_on_tensor_core_targets():
    def shapes(m, k, n, t="float16"):
        return [Shape.of(t, [m, k]), Shape.of(t, [k, n]), Shape.of(t, [m, n])]

    small, big = shapes(128, 128, 384), shapes(2048, 2048, 2048)
    assert plan_mma_gemm(big).macs > GENERATED_MAX_MACS >= plan_mma_gemm(small).macs
    assert generated_gemm_wanted(small, "sm_90", "auto") and not generated_gemm_wanted(big, "sm_90", "auto")
    assert generated_gemm_wanted(big, "sm_90", "all")
    # a decode step's single row keeps BLAS's GEMV by default (most of an mma tile would idle)
    assert not generated_gemm_wanted(shapes(1, 128, 384), "sm_90", "auto")
    assert generated_gemm_wanted(shapes(1, 128, 384), "sm_90", "all")
    # a long K (serial in each block) or element loads (N = 49: a ResNet stage's 7x7 positions)
    assert not generated_gemm_wanted(shapes(256, 2304, 64), "sm_90", "auto")
    assert not generated_gemm_wanted(shapes(256, 128, 49), "sm_90", "auto")
    assert generated_gemm_wanted(shapes(256, 128, 49), "sm_90", "all")
    assert generated_gemm_wanted(small, "sm_100", "auto")  # sm_100 is later than sm_90 (not "sm_1" < "sm_9")
    assert generated_gemm_wanted(small, "fake", "auto") and generated_gemm_wanted(small, None, "auto")
    for arch in ("sm_75", "gfx942"):  # no mma.sync: BLAS
        assert not generated_gemm_wanted(small, arch, "auto"), arch
    assert not generated_gemm_wanted(small, "sm_90", "0")
    assert not generated_gemm_wanted(shapes(8, 8, 8, "float32"), "sm_90", "all")
    assert not generated_gemm_wanted(
        [Shape.of("float16", [4, 8]), Shape.of("bfloat16", [8, 4]), Shape.of("float16", [4, 4])], "sm_90", "all"
    )


def test_plan_spreads_small_products_and_picks_each_operands_layout():
    gpt2 = plan_mma_gemm(
        [Shape.of("float16", [128, 128]), Shape.of("float16", [128, 384]), Shape.of("float16", [128, 384])]
    )
    assert (gpt2.bm, gpt2.bn, gpt2.bk) == (16, 32, 64) and gpt2.blocks == 96
    assert gpt2.a_vec and gpt2.b_vec and gpt2.b_kmajor
    big = plan_mma_gemm(
        [Shape.of("float16", [1024, 512]), Shape.of("float16", [512, 1024]), Shape.of("float16", [1024, 1024])]
    )
    assert (big.bm, big.bn) == (64, 64)
    transposed = Shape("float16", [64, 96], [1, 64])  # a [96, 64] weight seen as [64, 96]
    nk = plan_mma_gemm([Shape.of("float16", [32, 64]), transposed, Shape.of("float16", [32, 96])])
    assert not nk.b_kmajor and nk.b_vec
    ragged = plan_mma_gemm(
        [Shape.of("float16", [7, 40]), Shape.of("float16", [40, 100]), Shape.of("float16", [7, 100])]
    )
    assert ragged.a_vec and not ragged.b_vec and ragged.bk == 48


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="no nvcc (CUDA toolkit) on PATH: cannot compile kernels offline")
@pytest.mark.parametrize("prefetch", ["0", "1"])
def test_every_case_compiles_with_nvcc_to_tensor_core_code(prefetch, tmp_path: Path, monkeypatch):
    from tests.gpu.test_kernels_compile_offline import _nvcc_all, _sources

    monkeypatch.setenv("MIGX_GEMM_GEN", "all")
    monkeypatch.setenv("MIGX_GEMM_PREFETCH", prefetch)
    sources = {}
    for case, (seq, d, n, dtype, opts) in CASES.items():
        recorded = _sources(linear(seq, d, n, dtype, **opts), CompileOptions(precision="fp16"))
        sources.update({f"{case}_{k}": v for k, v in recorded.items() if k.startswith("gemm_mma_")})
    assert len(sources) >= len(CASES)
    _nvcc_all(sources, tmp_path)  # also: every entry waits for its predecessor (griddepcontrol.wait)
    for key in sources:
        assert "mma.sync.aligned.m16n8k16" in (tmp_path / key / "k.ptx").read_text(), key


@pytest.mark.parametrize(
    "m, k, n", [(16, 4096, 32), (128, 1024, 256), (128, 256, 1024), (1024, 512, 1024), (64, 96, 40)]
)
def test_static_shared_memory_fits_48_kb(m, k, n):
    """Static shared memory above 48 KB does not compile (ptxas), which nvcc -ptx alone does not
    catch: the pipeline depth is sized from the arrays the kernel declares."""
    import re

    from migx_explore.gpu.codegen.gemm_mma import mma_gemm_kernel

    for b in (Shape.of("float16", [k, n]), Shape("float16", [k, n], [1, k])):
        src = mma_gemm_kernel([Shape.of("float16", [m, k]), b, Shape.of("float16", [m, n])]).source
        arrays = re.findall(r"__shared__ __align__\(16\) unsigned short \w+((?:\[\d+\])+);", src)
        total = sum(2 * math.prod(int(d) for d in re.findall(r"\d+", dims)) for dims in arrays)
        assert len(arrays) == 2 and total <= 48 * 1024, (m, k, n, b.strides, total)


def test_offsets_past_two_to_the_31_are_computed_in_64_bits(tmp_path: Path):
    """A batch of 4096 1024x1024 products spans 2^32 elements: the tile corners and the output
    offsets are widened before they are multiplied (and the source still compiles)."""
    from migx_explore.gpu.codegen.gemm_mma import mma_gemm_kernel

    big = [Shape.of("float16", [4096, 1024, 1024])] * 3
    src = mma_gemm_kernel(big).source
    assert "((long long)row0) * 1024" in src and "((long long)i) * 1024" in src
    small = mma_gemm_kernel([Shape.of("float16", [64, 64])] * 3).source
    assert "(long long)" not in small
    if NVCC is not None:
        from tests.gpu.test_kernels_compile_offline import _nvcc_all

        header = (Path(__file__).parents[2] / "migx_explore" / "gpu" / "kernels" / "migx.hpp").read_text()
        _nvcc_all({"big": (src, {"migx.hpp": header})}, tmp_path)
