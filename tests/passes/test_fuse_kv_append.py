"""fuse_kv_append: a decode step's two KV-cache appends join its single-query attention group
(group[tag=kv_attention] returning (attention, cache_k', cache_v')). On the built-in gpt2_decode
bucket programs: the decode step (T=1) fuses every layer and evaluates exactly as before, the
prefill (T=4) keeps its appends, a cache read elsewhere keeps them; on the fake backend the step
runs with one kernel per layer where three ran (tests/gpu/test_decode.py checks the cache writes
over many steps)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.kv_cache import kv_cache_bucket
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.models import load

MAX_LEN, BUCKET = 64, 32


def bucket_program(new: int, return_cache: bool = False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dynamic = load("gpt2_decode", P=(0, MAX_LEN - new), T=new)
    return kv_cache_bucket(dynamic, BUCKET, MAX_LEN, return_cache=return_cache)


def feeds(program, past: int, new: int) -> dict:
    rng = np.random.default_rng(past)
    out = {"input_ids": rng.integers(0, 512, (1, new)).astype(np.int64), "past_len": np.array([past], np.int64)}
    for p in program.main.params():
        if p.param_name.startswith("cache_"):
            out[p.param_name] = rng.standard_normal(p.shape.lens).astype(np.float32)
    return out


def fused_pipeline(program):
    passes = [make_pass("fuse_attention", max_head_dim=128), make_pass("dead_code_elimination")]
    run_passes(program, passes)
    before = [i.name for i in program.main]
    run_passes(program, [make_pass("fuse_kv_append"), make_pass("dead_code_elimination")])
    return before, program


def test_decode_step_appends_join_the_attention_and_compute_the_same():
    program = bucket_program(1, return_cache=False)
    f = feeds(program, 20, 1)
    want = evaluate(program, f)
    before, fused = fused_pipeline(program)
    names = [i.name for i in fused.main]
    assert before.count("concat_past_present") == 8 and "concat_past_present" not in names
    groups = [i for i in fused.main if i.name == "group"]
    assert [g.op["tag"] for g in groups] == ["kv_attention"] * 4
    for g in groups:  # the caches are the group's last results, updated in place on the GPU
        sub = g.module_inputs[0]
        assert [o.name for o in sub.output_instructions()][1:] == ["concat_past_present"] * 2
        assert len(g.shape.sub_shapes) == 3
    for got, w in zip(evaluate(fused, f), want):
        np.testing.assert_array_equal(got, w)


def test_prefill_keeps_its_appends():
    _, fused = fused_pipeline(bucket_program(4))
    assert [i.name for i in fused.main].count("concat_past_present") == 8
    assert all(g.op["tag"] == "attention" for g in fused.main if g.name == "group")


def test_returned_caches_keep_their_appends():
    """The reference decoder returns the updated caches: the appends have another user."""
    _, fused = fused_pipeline(bucket_program(1, return_cache=True))
    assert [i.name for i in fused.main].count("concat_past_present") == 8


def test_fake_backend_step_writes_caches_with_one_kernel_per_layer():
    from migx_explore.gpu import compile_program
    from migx_explore.gpu.runtime.fake import FakeBackend

    program = bucket_program(1)
    f = feeds(program, 20, 1)
    want = evaluate(bucket_program(1, return_cache=True), f)
    with compile_program(program, backend=FakeBackend()) as compiled:
        kernels = [i.kernel for i in compiled.steps.info]
        assert sum(k.startswith("kv_attention_") for k in kernels) == 4
        assert not any(k.startswith("concat_past_present") for k in kernels)
        # 37: the token ids' convert and both embeddings' gathers run inside the position add
        # (fuse_ops' gather fusion; the position row through a broadcast of its index)
        assert len(kernels) == 37, kernels
        for mode in ("eager", "graph"):
            got = compiled.run(f, mode=mode)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("past", [0, 31])
def test_append_at_the_ends_of_the_bucket(past):
    program = bucket_program(1)
    f = feeds(program, past, 1)
    want = evaluate(program, f)
    _, fused = fused_pipeline(bucket_program(1))
    for got, w in zip(evaluate(fused, f), want):
        np.testing.assert_array_equal(got, w)
