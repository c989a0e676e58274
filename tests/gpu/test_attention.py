"""The fused attention kernel (group[tag=attention]) against the reference evaluator: without a
mask, with a padding mask, a causal -inf mask and a `where` mask, at odd sequence lengths (one
key, partial key tiles, more than four tiles), unusual head dims, a 3-D (headless) batch and
half precision. On the fake backend (lowering and buffers, emulated kernel) and, marked `gpu`,
on a device (the generated kernel itself)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape
from migx_explore.gpu import compile_program

BACKENDS = ["fake", pytest.param("device", marks=pytest.mark.gpu)]
MASKS = ("none", "padding", "causal", "where")


def attention_program(
    seq: int,
    mask: str,
    *,
    heads: int = 2,
    d: int = 64,
    dv: int | None = None,
    kv: int | None = None,
    dtype: str = "float32",
    guard: bool = False,
) -> Program:
    """scores = (q · kᵀ) · 1/sqrt(d) [+ mask], softmax, · v; kᵀ is a transpose view of k.
    guard: the exporters' where(isnan(p), 0, p) on the probabilities."""
    dv = dv or d
    n = kv or seq
    b = [1, heads] if heads else [2]
    nb = len(b)
    p = Program()
    m = p.main

    def op(name: str, *args, **attrs):
        return m.add_instruction(Op(name, **attrs), list(args))

    q = m.add_parameter("q", Shape.of(dtype, [*b, seq, d]))
    k = m.add_parameter("k", Shape.of(dtype, [*b, n, d]))
    v = m.add_parameter("v", Shape.of(dtype, [*b, n, dv]))
    kt = op("transpose", k, permutation=[*range(nb), nb + 1, nb])
    s_lens = [*b, seq, n]
    scale = m.add_literal(np.array([1 / math.sqrt(d)], dtype))
    s = op("mul", op("dot", q, kt), op("multibroadcast", scale, out_lens=s_lens))
    if mask == "padding":
        pm = m.add_parameter("pm", Shape.of(dtype, [1, n]))
        s = op("add", s, op("multibroadcast", pm, out_lens=s_lens))
    elif mask == "causal":
        tri = np.triu(np.full((seq, n), -np.inf, dtype), 1 + n - seq)
        s = op("add", s, op("multibroadcast", m.add_literal(tri), out_lens=s_lens))
    elif mask == "where":
        keep = m.add_parameter("keep", Shape.of("bool", s_lens))
        fill = op("multibroadcast", m.add_literal(np.array([-np.inf], dtype)), out_lens=s_lens)
        s = op("where", keep, s, fill)
    probs = op("softmax", s, axis=-1)
    if guard:
        zero = op("multibroadcast", m.add_literal(np.array([0], dtype)), out_lens=s_lens)
        probs = op("where", op("isnan", probs), zero, probs)
    m.add_return([op("dot", probs, v)])
    return p


def feeds_for(program, seed: int = 0, masked_rows: int = 0) -> dict:
    """Random inputs; with a `keep` mask, the first `masked_rows` query rows see no key."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in program.main.params():
        name, lens = p.param_name, p.shape.lens
        if name == "pm":  # padding: the last quarter of the keys is masked with a large negative value
            m = np.zeros(lens, np.float32)
            m[..., lens[-1] - lens[-1] // 4 :] = -1e9
            out[name] = m
        elif name == "keep":  # random keep pattern, never a fully masked row
            keep = rng.random(lens) < 0.7
            keep[..., 0] = True
            keep[..., :masked_rows, :] = False
            out[name] = keep
        else:
            out[name] = rng.standard_normal(lens).astype(np.float32)
        if p.shape.type == "float16":
            out[name] = out[name].astype(np.float16)
        elif p.shape.type == "bfloat16":
            out[name] = out[name].astype(ml_dtypes.bfloat16)
    return out


def check(
    program, backend, *, rtol=1e-4, atol=1e-5, fused: bool = True, kernel: str = "attention_", masked_rows: int = 0
) -> None:
    feeds = feeds_for(program, masked_rows=masked_rows)
    want = evaluate(program, feeds)[0]
    with compile_program(program, backend=backend) as compiled:
        kernels = [i.op["symbol_name"] for i in compiled.program.main if i.name == "gpu::code_object"]
        assert any(k.startswith(kernel) for k in kernels) == fused, kernels
        assert not compiled.steps.host_ops
        for mode in ("eager", "graph"):
            got = compiled.run(feeds, mode=mode)[0]
            np.testing.assert_allclose(
                got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, err_msg=mode
            )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("seq, kv", [(1, 9), (17, 17), (127, 127), (130, 130)])
def test_attention_matches_reference(seq, kv, mask, backend, request):
    check(attention_program(seq, mask, kv=kv), request.getfixturevalue(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_key_attention_is_simplified_before_fusion(backend, request):
    """softmax over one key is 1: optimize_module folds it, so no attention kernel is left."""
    check(attention_program(1, "none"), request.getfixturevalue(backend), fused=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_odd_head_dims_and_more_keys_than_queries(backend, request):
    check(attention_program(5, "causal", d=80, dv=48, kv=70), request.getfixturevalue(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_without_a_head_axis(backend, request):
    check(attention_program(33, "padding", heads=0, d=32), request.getfixturevalue(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_in_half_precision(backend, request):
    check(
        attention_program(40, "causal", d=32, dtype="float16"), request.getfixturevalue(backend), rtol=2e-2, atol=2e-2
    )


@pytest.fixture
def mma_at_any_size(monkeypatch):
    """The tensor-core kernel for these small test problems too (attention_mma.MIN_WORK)."""
    from migx_explore.gpu.codegen import attention_mma

    monkeypatch.setattr(attention_mma, "MIN_WORK", 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("seq, kv, d, dv", [(9, 9, 16, 16), (130, 130, 64, 64), (17, 70, 128, 32), (64, 200, 32, 64)])
def test_tensor_core_attention_matches_reference(seq, kv, d, dv, mask, dtype, backend, request, mma_at_any_size):
    """Head dims multiples of 16 at half and bfloat16 take the mma kernel: partial query and key
    tiles, more keys than one tile, d != dv. The reference is float arithmetic on the rounded
    inputs; the kernel rounds the probabilities to the input type before P·V."""
    tol = 2e-2 if dtype == "float16" else 6e-2
    check(
        attention_program(seq, mask, d=d, dv=dv, kv=kv, dtype=dtype),
        request.getfixturevalue(backend),
        rtol=tol,
        atol=tol,
        kernel="attention_mma_",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_core_attention_without_a_head_axis(backend, request, mma_at_any_size):
    check(
        attention_program(33, "padding", heads=0, d=32, dtype="float16"),
        request.getfixturevalue(backend),
        rtol=2e-2,
        atol=2e-2,
        kernel="attention_mma_",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_half_attention_with_odd_head_dims_keeps_the_scalar_kernel(backend, request):
    check(
        attention_program(20, "causal", d=24, dv=40, dtype="float16"),
        request.getfixturevalue(backend),
        rtol=2e-2,
        atol=2e-2,
        kernel="attention_2x",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_small_half_attention_keeps_the_scalar_kernel(backend, request):
    """Under attention_mma.MIN_WORK multiply-adds (2 heads x 40 x 40 x 32) the scalar kernel runs."""
    check(
        attention_program(40, "causal", d=32, dtype="float16"),
        request.getfixturevalue(backend),
        rtol=2e-2,
        atol=2e-2,
        kernel="attention_2x",
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_core_attention_guarded_rows_with_no_key_give_zero(dtype, backend, request, mma_at_any_size):
    """The IsNaN guard of the sdpa exports: three query rows see no key and give 0, not NaN."""
    tol = 2e-2 if dtype == "float16" else 6e-2
    check(
        attention_program(70, "where", d=32, dtype=dtype, guard=True),
        request.getfixturevalue(backend),
        rtol=tol,
        atol=tol,
        kernel="attention_mma_",
        masked_rows=3,
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("splits", [1, 2, 4])
@pytest.mark.parametrize(
    "mask, guard, masked_rows", [("causal", False, 0), ("where", True, 5), ("where", False, 3), ("padding", True, 0)]
)
@pytest.mark.parametrize("seq, kv, d", [(40, 40, 32), (33, 200, 64), (20, 17, 128), (130, 130, 64)])
def test_tensor_core_attention_key_splits_merge(
    seq, kv, d, mask, guard, masked_rows, splits, backend, request, mma_at_any_size, monkeypatch
):
    """With the keys split between 2 or 4 warps of a query tile, the block merges the warps'
    partial softmax: the same result as one warp over every key, including splits with no key
    left (17 keys over 4 splits), rows with no unmasked key (0 under the guard, NaN without) and
    splits whose own keys are all masked (causal rows near the top)."""
    from migx_explore.gpu.codegen import attention_mma

    monkeypatch.setattr(attention_mma, "KEY_SPLITS", splits)
    check(
        attention_program(seq, mask, d=d, kv=kv, dtype="float16", guard=guard),
        request.getfixturevalue(backend),
        rtol=2e-2,
        atol=2e-2,
        kernel="attention_mma_",
        masked_rows=masked_rows,
    )


def test_key_splits_fill_the_gpu_only_for_few_query_tiles():
    from migx_explore.gpu.codegen.attention_mma import key_splits

    assert key_splits(32, 128) == 4  # bert/gpt2-sized layers: 4 heads x 8 tiles
    assert key_splits(384, 512) == 2  # 12 heads x 512 rows
    assert key_splits(4096, 2048) == 1  # enough blocks sharing K/V tiles to fill the GPU
    assert key_splits(8, 40) == 2  # each split keeps at least 16 keys
    assert key_splits(8, 20) == 1


@pytest.mark.parametrize("d, dv", [(16, 16), (32, 64), (64, 64), (128, 32), (128, 128)])
def test_key_tiles_are_whole_mma_steps_and_fit_shared_memory(d, dv):
    """Every split's key tile is a multiple of 16 keys (the P·V loop's step; a 24-key tile once
    dropped keys 16..23 of each split) and the K/V tiles fit the shared memory."""
    from migx_explore.gpu.codegen import attention_mma as am

    for row_tiles in (1, 8, 18, 32, 80, 81, 384, 1024):
        for n in (1, 16, 17, 33, 100, 130, 197, 512, 4096):
            splits, bn = am._split_and_key_tile(row_tiles, n, d, dv)
            assert bn % 16 == 0 and bn >= 16, (row_tiles, n, splits, bn)
            assert am._kv_bytes(splits, bn, d, dv) <= am.MAX_SHARED_BYTES
