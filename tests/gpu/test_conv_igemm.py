"""The implicit-GEMM convolution (gpu/codegen/conv_igemm.py): a half / bfloat16 convolution with
enough channels runs as one tensor-core kernel that gathers its column matrix from a channels-last
input while staging it, its epilogue (bias, activation, a residual) fused in, instead of an im2col
kernel writing 9x the input and a BLAS call. Which convolutions take it (the rule and its switch),
the layout lowering gives the input and weight (and that eliminate_contiguous keeps it), and, on
the fake backend and marked `gpu` on a device, outputs against the reference evaluator for strides,
padding, dilation, batches, ragged K and channel counts, and an input that is not channels-last."""

from __future__ import annotations

import math

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape
from migx_explore.gpu import compile_program, lower
from migx_explore.gpu.codegen.conv_igemm import implicit_gemm_wanted, krsc_strides
from migx_explore.gpu.pipelines import CompileOptions

BACKENDS = ["fake", pytest.param("device", marks=pytest.mark.gpu)]


def conv_net(
    n: int, c: int, hw: tuple[int, int], k: int, kernel: int, *, stride: int = 1, pad: int = 1, dilation: int = 1,
    dtype: str = "float16", epilogue: str = "bias_relu",
) -> Program:  # fmt: skip
    """relu(conv(x, W) + b) (epilogue "bias_relu"), conv(x, W) (""), or conv(x, W) + b + x
    ("residual": needs c == k and a shape-keeping convolution)."""
    rng = np.random.default_rng(n * 7 + c * 13 + k)
    p = Program()
    m = p.main

    def op(name: str, *args, **attrs):
        return m.add_instruction(Op(name, **attrs), list(args))

    x = m.add_parameter("x", Shape.of(dtype, [n, c, *hw]))
    w = m.add_literal((rng.standard_normal((k, c, kernel, kernel)) / math.sqrt(c * kernel * kernel)).astype(dtype))
    y = op("convolution", x, w, padding=[pad] * 4, stride=[stride] * 2, dilation=[dilation] * 2)
    lens = list(y.shape.lens)
    if epilogue:
        b = m.add_literal((rng.standard_normal(k) * 0.5).astype(dtype))
        y = op("add", y, op("broadcast", b, axis=1, out_lens=lens))
    if epilogue == "bias_relu":
        y = op("relu", y)
    elif epilogue == "residual":
        y = op("add", y, x)
    m.add_return([y])
    return p


CASES = {
    # (n, c, (h, w), k, kernel, options)
    "3x3": (1, 16, (12, 12), 32, 3, {}),
    "3x3_stride2_batch": (2, 24, (11, 9), 40, 3, {"stride": 2}),
    "1x1_stride2": (1, 64, (20, 20), 64, 1, {"stride": 2, "pad": 0}),
    "dilated": (1, 32, (16, 16), 48, 3, {"pad": 2, "dilation": 2}),
    "ragged_k_bf16": (1, 8, (13, 17), 24, 3, {"dtype": "bfloat16"}),  # K = 72: one short chunk
    "long_k_residual": (1, 128, (8, 8), 128, 3, {"epilogue": "residual"}),  # 18 chunks of K
    "5x5_no_epilogue": (1, 16, (10, 10), 16, 5, {"pad": 2, "epilogue": ""}),
}


def _run(program: Program, backend):
    rng = np.random.default_rng(3)
    feeds = {p.param_name: rng.standard_normal(p.shape.lens).astype(p.shape.type) for p in program.main.params()}
    want = np.asarray(evaluate(program, feeds)[0], np.float64)
    with compile_program(program, CompileOptions(precision="fp16"), backend=backend) as compiled:
        launched = [i.kernel for i in compiled.steps.info if i.kind != "blas"]
        blas = [i for i in compiled.steps.info if i.kind == "blas"]
        outs = {mode: np.asarray(compiled.run(feeds, mode=mode)[0], np.float64) for mode in ("eager", "graph")}
    return launched, blas, outs, want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_implicit_gemm_convolution_matches_the_reference(case, backend, request, monkeypatch):
    monkeypatch.setenv("MIGX_CONV_IGEMM", "all")
    n, c, hw, k, kernel, opts = CASES[case]
    launched, blas, outs, want = _run(conv_net(n, c, hw, k, kernel, **opts), request.getfixturevalue(backend))
    convs = [name for name in launched if name.startswith("conv_igemm_")]
    assert len(convs) == 1 and not blas, launched
    # the epilogue is in the convolution's kernel, and no im2col ran
    assert launched[-1].startswith("conv_igemm_") and not any("im2col" in name for name in launched), launched
    tol = 5e-2 if opts.get("dtype") == "bfloat16" else 1e-2
    scale = np.abs(want).max()
    for mode, got in outs.items():
        assert np.abs(got - want).max() <= tol * scale, f"{case} {mode}: {np.abs(got - want).max()} vs {scale}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_switched_off_the_convolution_is_im2col_and_a_gemm_again(backend, request, monkeypatch):
    monkeypatch.setenv("MIGX_CONV_IGEMM", "0")
    launched, _, outs, want = _run(conv_net(1, 16, (12, 12), 32, 3), request.getfixturevalue(backend))
    assert not any(name.startswith("conv_igemm_") for name in launched), launched
    assert any("im2col" in name for name in launched), launched  # then a GEMM: BLAS or gemm_mma
    for got in outs.values():
        assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()


def test_lowering_lays_input_and_weight_out_for_it_and_the_copy_stays(fake, monkeypatch):
    """The NCHW input gets one channels-last copy and the weight a [co][r][s][c] literal; the
    backend's eliminate_contiguous must not read the input in place again (the direct kernel
    would run the convolution then)."""
    monkeypatch.setenv("MIGX_CONV_IGEMM", "all")
    program = lower(conv_net(1, 16, (12, 12), 32, 3), CompileOptions(precision="fp16"), backend=fake)
    convs = [i for i in program.main if i.name == "gpu::code_object" and i.op["symbol_name"].startswith("conv_igemm")]
    assert len(convs) == 1
    x, w = (i.shape for i in convs[0].inputs[:2])
    assert x.strides[1] == 1 and list(x.strides) == [12 * 12 * 16, 1, 12 * 16, 16], x
    assert list(w.strides) == krsc_strides(w.lens), w
    copies = [i for i in program.main if i.name == "gpu::code_object" and i.op["symbol_name"].startswith("contiguous")]
    assert len(copies) == 1


def test_channels_last_models_need_no_copy_before_the_convolution(fake, monkeypatch):
    monkeypatch.setenv("MIGX_CONV_IGEMM", "all")
    options = CompileOptions(precision="fp16", convolution_layout="channels_last")
    program = lower(conv_net(1, 16, (12, 12), 32, 3), options, backend=fake)
    names = [i.op["symbol_name"] for i in program.main if i.name == "gpu::code_object"]
    assert any(n.startswith("conv_igemm") for n in names) and not any("im2col" in n for n in names), names


def _shapes(c: int, hw: int, k: int, kernel: int, dtype: str = "float16"):
    x = Shape(dtype, [1, c, hw, hw], [hw * hw * c, 1, hw * c, c])
    w = Shape(dtype, [k, c, kernel, kernel], krsc_strides([k, c, kernel, kernel]))
    out = Shape(dtype, [1, k, hw, hw])
    return x, w, out


def test_the_rule_takes_half_convolutions_with_channels_and_blocks_on_tensor_core_targets():
    conv = Op("convolution", padding=[1, 1, 1, 1], stride=[1, 1], dilation=[1, 1])
    yolo = _shapes(64, 40, 64, 3)  # 100 blocks of 16 x 64, 5.9e7 multiply-adds
    assert implicit_gemm_wanted(conv, *yolo, "sm_90", "auto")
    assert implicit_gemm_wanted(conv, *yolo, "fake", "auto")
    assert not implicit_gemm_wanted(conv, *yolo, "sm_75", "auto")  # no mma.sync: im2col + BLAS
    assert not implicit_gemm_wanted(conv, *yolo, "sm_90", "0")
    vae = _shapes(64, 128, 64, 3)  # 6e8 multiply-adds: cuBLASLt's GEMM is faster than this one
    assert not implicit_gemm_wanted(conv, *vae, "sm_90", "auto")
    assert implicit_gemm_wanted(conv, *vae, "sm_90", "all")
    assert not implicit_gemm_wanted(conv, *_shapes(64, 256, 3, 3), "sm_90", "auto")  # 3 output channels
    assert implicit_gemm_wanted(conv, *_shapes(64, 256, 3, 3), "sm_90", "all")
    assert not implicit_gemm_wanted(conv, *_shapes(256, 7, 256, 3), "sm_90", "auto")  # 4 blocks, K = 2304
    assert not implicit_gemm_wanted(conv, *_shapes(12, 64, 64, 3), "sm_90", "all")  # C % 8 != 0
    fp32 = _shapes(64, 64, 64, 3, "float32")
    assert not implicit_gemm_wanted(conv, *fp32, "sm_90", "all")
    grouped = Op("convolution", padding=[1, 1, 1, 1], stride=[1, 1], dilation=[1, 1], group=2)
    assert not implicit_gemm_wanted(grouped, *_shapes(64, 64, 64, 3), "sm_90", "all")


def conv_chain(dtype: str = "float16") -> Program:
    """relu(conv2(relu(conv1(x) + b1)) + b2), both implicit-GEMM convolutions (16 and 32 channels
    over 64 x 64 pixels), the second reading the first one's output."""
    rng = np.random.default_rng(5)
    p = Program()
    m = p.main

    def op(name: str, *args, **attrs):
        return m.add_instruction(Op(name, **attrs), list(args))

    y = m.add_parameter("x", Shape.of(dtype, [1, 16, 64, 64]))
    for cin, cout in ((16, 32), (32, 32)):
        w = m.add_literal((rng.standard_normal((cout, cin, 3, 3)) / math.sqrt(cin * 9)).astype(dtype))
        y = op("convolution", y, w, padding=[1] * 4, stride=[1, 1], dilation=[1, 1])
        b = m.add_literal((rng.standard_normal(cout) * 0.5).astype(dtype))
        y = op("relu", op("add", y, op("broadcast", b, axis=1, out_lens=list(y.shape.lens))))
    m.add_return([y])
    return p


def test_a_convolution_writes_channels_last_for_the_next_so_one_copy_runs(fake, monkeypatch):
    """Under the default rule the model input (standard) is copied channels-last once, the first
    convolution writes its output channels-last because the second reads it, the relu between
    keeps that layout, and the program output is standard again without a copy."""
    monkeypatch.delenv("MIGX_CONV_IGEMM", raising=False)
    program = lower(conv_chain(), CompileOptions(precision="fp16"), backend=fake)
    names = [i.op["symbol_name"] for i in program.main if i.name == "gpu::code_object"]
    assert sum(n.startswith("conv_igemm") for n in names) == 2, names
    assert sum(n.startswith("contiguous") for n in names) == 1 and names[0].startswith("contiguous"), names
    assert program.main.return_instruction().inputs[0].shape.standard()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_channels_last_chain_matches_the_reference(backend, request, monkeypatch):
    monkeypatch.delenv("MIGX_CONV_IGEMM", raising=False)
    launched, _, outs, want = _run(conv_chain(), request.getfixturevalue(backend))
    assert any(name.startswith("conv_igemm_") for name in launched), launched
    for mode, got in outs.items():
        assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max(), mode


def test_compile_mode_eager_keeps_im2col_and_blas(fake, monkeypatch):
    """Eager mode compiles for speed (MIGraphX PR #4770): no tensor-core kernel per convolution
    shape, so no implicit GEMM and no channels-last layout for it either."""
    monkeypatch.delenv("MIGX_CONV_IGEMM", raising=False)
    program = lower(conv_chain(), CompileOptions(precision="fp16", mode="eager"), backend=fake)
    names = [i.op["symbol_name"] for i in program.main if i.name == "gpu::code_object"]
    assert not any(n.startswith(("conv_igemm", "contiguous")) for n in names), names
    assert sum("im2col" in n for n in names) == 2, names


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["3x3_stride2_batch", "ragged_k_bf16", "long_k_residual"])
def test_the_element_path_for_unaligned_buffers_gives_the_same_convolution(case, backend, request, monkeypatch):
    """The run-time alignment test made false: every chunk through the element loads."""
    from migx_explore.gpu.codegen import gemm_mma

    monkeypatch.setenv("MIGX_CONV_IGEMM", "all")
    monkeypatch.setattr(gemm_mma, "aligned", lambda pointers: "false")
    n, c, hw, k, kernel, opts = CASES[case]
    launched, _, outs, want = _run(conv_net(n, c, hw, k, kernel, **opts), request.getfixturevalue(backend))
    assert any(name.startswith("conv_igemm_") for name in launched), launched
    tol = 5e-2 if opts.get("dtype") == "bfloat16" else 1e-2
    for mode, got in outs.items():
        assert np.abs(got - want).max() <= tol * np.abs(want).max(), f"{case} {mode}"
