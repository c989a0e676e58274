"""Single-query attention (attention_decode.py: a decode step's one query row per head, its keys
split across the block's warps) against the reference evaluator: every mask kind, key counts that
leave a warp a partial tile or no tile at all, more than one tile per warp, odd head dims, half
precision and the NaN guard on a row that sees no key. On the fake backend (the kernel is picked)
and, marked `gpu`, on a device (the generated kernel itself)."""

from __future__ import annotations

import pytest

from tests.gpu.test_attention import MASKS, attention_program, check

BACKENDS = ["fake", pytest.param("device", marks=pytest.mark.gpu)]


def decode_check(program, backend, **kw) -> None:
    check(program, backend, **kw)
    from migx_explore.gpu import compile_program

    with compile_program(program, backend=backend) as compiled:
        kernels = [i.op["symbol_name"] for i in compiled.program.main if i.name == "gpu::code_object"]
        assert any(k.endswith("_decode_kernel") for k in kernels), kernels


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("kv", [9, 100, 128, 300])
def test_decode_attention_matches_reference(kv, mask, backend, request):
    decode_check(attention_program(1, mask, kv=kv, heads=4, d=32), request.getfixturevalue(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_attention_odd_head_dims(backend, request):
    decode_check(attention_program(1, "causal", d=80, dv=48, kv=70), request.getfixturevalue(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_attention_without_a_head_axis(backend, request):
    decode_check(attention_program(1, "padding", heads=0, d=32, kv=33), request.getfixturevalue(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_attention_in_half_precision(backend, request):
    decode_check(
        attention_program(1, "where", d=40, kv=200, dtype="float16"),
        request.getfixturevalue(backend),
        rtol=2e-2,
        atol=2e-2,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_attention_guarded_row_with_no_key_gives_zero(backend, request):
    decode_check(
        attention_program(1, "where", d=32, kv=150, guard=True), request.getfixturevalue(backend), masked_rows=1
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_kernel_off_keeps_the_flash_kernel(backend, request, monkeypatch):
    from migx_explore.gpu.codegen import attention

    monkeypatch.setattr(attention, "USE_DECODE_KERNEL", False)
    program = attention_program(1, "causal", kv=40, d=32)
    check(program, request.getfixturevalue(backend))
    from migx_explore.gpu import compile_program

    with compile_program(program, backend=request.getfixturevalue(backend)) as compiled:
        kernels = [i.op["symbol_name"] for i in compiled.program.main if i.name == "gpu::code_object"]
        assert not any(k.endswith("_decode_kernel") for k in kernels), kernels
