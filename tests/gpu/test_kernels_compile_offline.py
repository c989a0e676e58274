"""Every kernel the generators write for a program compiles with the CUDA toolkit's nvcc, on a
machine with no GPU: the fake backend records each kernel's source and headers, and nvcc builds
PTX for sm_90 with the flags the CUDA runtime gives nvrtc. Catches a generator writing invalid
CUDA (a new op, a new dtype path) before anyone reaches a GPU; skips where nvcc is absent (CI)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc (CUDA toolkit) on PATH: cannot compile kernels offline")

# fuse_reduce wraps argmin/argmax with their pointwise producers and consumers (half and float)
ARG_FUSION = """
x = @param:x -> {dt}, {{3, 700}}
@1 = exp(x) -> {dt}, {{3, 700}}
@2 = neg(@1) -> {dt}, {{3, 700}}
@3 = {op}[axis=1](@2) -> int64_type, {{3, 1}}
@4 = convert[target_type=float32](@3) -> float_type, {{3, 1}}
@5 = neg(@4) -> float_type, {{3, 1}}
@6 = @return(@5)
"""


def _sources(program, options=None) -> dict[str, tuple[str, dict[str, str]]]:
    import migx_explore.gpu as gpu
    from migx_explore.gpu.runtime.fake import FakeBackend, FakeKernels

    seen: dict[str, tuple[str, dict[str, str]]] = {}

    class Recording(FakeKernels):
        def compiler_id(self) -> str:  # its own cache keys: kernels an earlier test built are compiled again
            return f"fakecc-recording-{id(self)}"

        def compile_source(self, name, source, headers, flags):
            seen[f"{name}_{len(seen)}"] = (source, dict(headers))
            return super().compile_source(name, source, headers, flags)

    gpu.compile(program, options, backend=FakeBackend(kernels=Recording))
    return seen


def _nvcc_all(sources: dict[str, tuple[str, dict[str, str]]], tmp_path: Path, arch: str = "sm_90") -> None:
    assert sources, "no kernel was compiled"
    failures = []
    for key, (source, headers) in sources.items():
        d = tmp_path / key
        d.mkdir(parents=True)
        (d / "k.cu").write_text(source)
        for name, text in headers.items():
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(text)
        r = subprocess.run(
            [
                NVCC,
                "-ptx",
                f"-arch={arch}",
                "-std=c++17",
                "-DMIGX_WARP_SIZE=32",
                "-I",
                str(d),
                "-o",
                str(d / "k.ptx"),
                str(d / "k.cu"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if r.returncode:
            failures.append(f"{key}: {r.stderr.strip()[:600]}")
        elif arch >= "sm_90":  # every entry waits for the grid before it (dependent launch is safe)
            ptx = (d / "k.ptx").read_text()
            for entry in ptx.split(".entry ")[1:]:
                if "griddepcontrol.wait" not in entry:
                    failures.append(f"{key}: entry {entry.split('(')[0]} has no griddepcontrol.wait")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("op", ["argmin", "argmax"])
@pytest.mark.parametrize("dt", ["float_type", "half_type"])
def test_fused_arg_reductions_compile(op, dt, tmp_path):
    from migx_explore.compiler import parse

    sources = _sources(parse(ARG_FUSION.format(op=op, dt=dt)))
    assert any(k.startswith(f"fused_reduce_{op}") for k in sources)
    _nvcc_all(sources, tmp_path)


@pytest.mark.parametrize("precision", ["fp16", "bf16", "int8", "fp8"])
def test_transformer_kernels_compile_at_each_precision(precision, tmp_path):
    from migx_explore import models
    from migx_explore.gpu.pipelines import CompileOptions

    sources = _sources(models.load("transformer"), CompileOptions(precision=precision))
    _nvcc_all(sources, tmp_path)


@pytest.fixture
def fresh_kernel_cache(tmp_path, monkeypatch):
    """An empty kernel cache, so every kernel of the program is compiled (and recorded) here even
    when an earlier test of the session built the same ones."""
    from migx_explore.gpu import kernel_cache

    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path / "kernel-cache"))
    kernel_cache.clear_memory_cache()


def _ort_quantized_programs():
    """Issue 24's quantized exports: an ORT QDQ ResNet with uint8 activations (int8 direct and
    im2col convolutions, int8 GEMMs, requantize pointwise kernels) and a QLinearMatMul whose
    K = 1101 is neither BLAS-aligned nor exact when widened to float16 (the tiled int32 kernel)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from qdq_models import image_batches, qlinear_matmul, quantize_qdq, resnet_like

    from migx_explore.compiler.onnx import parse_onnx

    pytest.importorskip("onnxruntime.quantization")
    yield "resnet_qdq_uint8", parse_onnx(quantize_qdq(resnet_like(), image_batches(4)))
    yield "qlinear_matmul_k1101", parse_onnx(qlinear_matmul((5, 1101), (1101, 6), per_channel=True, signed=False)[0])


def test_int8_quantized_model_kernels_compile(tmp_path, fresh_kernel_cache):
    for name, program in _ort_quantized_programs():
        sources = _sources(program)
        text = "\n".join(src for src, _ in sources.values())
        assert "signed char" in text, name  # the quantized data stays 8-bit on the device
        if name == "qlinear_matmul_k1101":
            assert any(k.startswith("gemm_tiled_int8") for k in sources), list(sources)
        _nvcc_all(sources, tmp_path / name)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_hf_masked_decoder_kernels_compile(precision, tmp_path, fresh_kernel_cache):
    """The float32-min mask at fp16 / bf16: convert kernels clamp with migx::sat_float."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from hf_mask_models import llama_like_masked

    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.gpu.pipelines import CompileOptions

    sources = _sources(parse_onnx(llama_like_masked()), CompileOptions(precision=precision))
    assert any("migx::sat_float" in src for src, _ in sources.values())
    _nvcc_all(sources, tmp_path)


@pytest.mark.parametrize("arch", ["sm_90", "sm_75"])
@pytest.mark.parametrize(
    "dtype, mask, d",
    [("float16", "causal", 64), ("float16", "where", 32), ("bfloat16", "padding", 128), ("float16", "none", 16)],
)
def test_tensor_core_attention_compiles(dtype, mask, d, arch, tmp_path, fresh_kernel_cache, monkeypatch):
    """Half and bfloat16 attention groups take the mma kernel: mma.sync and ldmatrix on sm_90,
    the shuffle emulation of the same fragments below sm_80 (and on AMD)."""
    from migx_explore.gpu.codegen import attention_mma
    from tests.gpu.test_attention import attention_program

    monkeypatch.setattr(attention_mma, "MIN_WORK", 0)

    sources = _sources(attention_program(40, mask, d=d, dtype=dtype))
    mma = {k: v for k, v in sources.items() if k.startswith("attention_mma_")}
    assert mma, list(sources)
    _nvcc_all(mma, tmp_path, arch)
    if arch == "sm_90":
        ptx = "\n".join(p.read_text() for p in tmp_path.rglob("k.ptx"))
        assert "mma.sync.aligned.m16n8k16" in ptx and "ldmatrix.sync.aligned" in ptx


@pytest.mark.parametrize(
    "dtype, lens, k, largest",
    [
        ("float32", [1, 8400], 300, True),  # keys in shared memory, 1,024 threads
        ("float16", [2, 2100], 1, False),  # the narrowest sort, 576 threads
        ("bfloat16", [10000], 1500, True),  # keys recomputed from global memory (beside 2,048 winners)
        ("float32", [3000, 2], 2048, True),  # two sorted elements a thread, strided slices
        ("float16", [2, 8400], 300, True),  # spread over blocks: workspace, ticket and merge
        ("float32", [1, 3, 100000], 10, False),  # spread over 49 blocks a slice, three slices
    ],
)
def test_radix_topk_compiles(dtype, lens, k, largest, tmp_path, fresh_kernel_cache):
    """The radix top-k (gpu/codegen/topk.py): shared or global keys, one block or spread over
    several per slice, each sort (ranked runs, bitonic network), each float type."""
    from migx_explore.compiler import Program, make_op
    from migx_explore.compiler.shape import Shape

    p = Program()
    m = p.main
    axis = 0 if lens == [3000, 2] else len(lens) - 1
    x = m.add_parameter("x", Shape.of(dtype, lens))
    tk = m.add_instruction(make_op("topk", k=k, axis=axis, largest=largest), [x])
    m.add_return([m.add_instruction(make_op("get_tuple_elem", index=i), [tk]) for i in (0, 1)])
    sources = _sources(p)
    radix = {key: v for key, v in sources.items() if key.startswith("topk_radix_")}
    assert radix, list(sources)
    _nvcc_all(radix, tmp_path)


@pytest.mark.parametrize("dtype, mask, d, kv", [("float32", "where", 32, 128), ("float16", "causal", 80, 70)])
def test_decode_attention_compiles(dtype, mask, d, kv, tmp_path, fresh_kernel_cache):
    """One query row per head takes attention_decode.py's kernel (keys split across warps)."""
    from tests.gpu.test_attention import attention_program

    sources = _sources(attention_program(1, mask, d=d, kv=kv, dtype=dtype, guard=True))
    assert any(k.startswith("attention_") and "_decode" in k for k in sources), list(sources)
    _nvcc_all(sources, tmp_path)


def test_decode_step_kernels_compile(tmp_path, fresh_kernel_cache):
    """gpt2_decode's bucket program (T=1): the KV-cache appends inside the attention kernel."""
    from tests.passes.test_fuse_kv_append import bucket_program

    sources = _sources(bucket_program(1))
    assert any(k.startswith("kv_attention_") for k in sources), list(sources)
    _nvcc_all(sources, tmp_path)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_fused_gather_kernels_compile(precision, tmp_path, fresh_kernel_cache):
    """Kernels that read an input through a fused gather (gather_load.py): pointwise, the register
    row reduction with a second output, along a middle axis with 2-D indices, a layernorm."""
    from migx_explore import models
    from migx_explore.gpu.pipelines import CompileOptions
    from tests.gpu.test_gather_fusion import gather_programs

    # gpt2_decode: a layernorm reader turned fused_reduce, writing the gathered rows as well
    # half tables: the pointwise kernel reads its pairs of table elements as one 32-bit word
    programs = [*gather_programs(), *[(f"{n}_half", p) for n, p in gather_programs("half_type")]]
    for name, program in [*programs, ("gpt2_decode", models.load("gpt2_decode", P=3, T=1))]:
        sources = _sources(program, CompileOptions(precision=precision))
        fused = {k: v for k, v in sources.items() if re.search(r"long long g\d+ = \(long long\)p", v[0])}
        assert fused, (name, list(sources))
        _nvcc_all(fused, tmp_path / name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_squeeze_excite_reduction_kernels_compile(precision, tmp_path, fresh_kernel_cache):
    """The dynamic-batch CNN's squeeze-excite block fuses into one reduction whose row-shaped gate
    params come before the full-shaped input it reduces."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from dynamic_exports import dyn_batch_cnn

    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.gpu.pipelines import CompileOptions

    sources = _sources(parse_onnx(dyn_batch_cnn(), input_dims={"batch_size": 2}), CompileOptions(precision=precision))
    assert any(k.startswith("fused_reduce") for k in sources), list(sources)
    _nvcc_all(sources, tmp_path)
