"""kv_cache_bucket: the dynamic decoder -> a static bucket program with a runtime past length and
an in-place cache append (IR text and numerics against onnxruntime)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate, print_program
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.kv_cache import kv_cache_bucket
from migx_explore.models import load
from migx_explore.models.gpt2_decode import decode_feed

MAX_LEN = 64


def _feed(past: int, new: int) -> dict[str, np.ndarray]:
    f = decode_feed(past, new)
    out = {"input_ids": f["input_ids"], "past_len": np.array([past], np.int64)}
    for k, v in f.items():
        if k.startswith("past_"):
            cache = np.full((1, 4, MAX_LEN, 32), 7.0, np.float32)  # stale rows: masked, never read as keys
            cache[:, :, :past] = v
            out[f"cache_{k}"] = cache
    return out


def test_bucket_program_ir_shows_the_view_and_the_in_place_append():
    text = print_program(kv_cache_bucket(load("gpt2_decode", P=(0, MAX_LEN - 1), T=1), 32, MAX_LEN))
    assert "cache_past_key_0 = @param:cache_past_key_0 -> float32, {1, 4, 64, 32}" in text
    assert "past_len = @param:past_len -> int64, {1}" in text
    assert "concat_past_present[axis=2](" in text and "slice[axes={2},starts={0},ends={32}](" in text
    assert "dimensions_of" not in text and "range" not in text and "dynamic" not in text
    assert "concat[axis=2]" not in text  # no copy of the past


@pytest.mark.parametrize(("past", "new", "bucket"), [(0, 16, 16), (20, 1, 32), (31, 1, 32), (40, 1, 64)])
def test_bucket_program_matches_onnxruntime(past, new, bucket, onnxruntime_outputs):
    program = kv_cache_bucket(load("gpt2_decode", P=(0, MAX_LEN - new), T=new), bucket, MAX_LEN, return_cache=True)
    feed = _feed(past, new)
    ours = evaluate(program, feed)
    ref = onnxruntime_outputs(decode_feed(past, new))
    np.testing.assert_allclose(ours[0], ref[0], rtol=2e-4, atol=2e-4)
    names = program.output_names
    for k, name in enumerate(names[1:], 1):  # the caches hold the presents in rows 0..past+new-1
        np.testing.assert_allclose(ours[k][:, :, : past + new], ref[names.index(name)], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(ours[k][:, :, past + new :], 7.0)


def test_bucket_refuses_a_program_without_a_dynamic_past():
    with pytest.raises(MigxError, match="no dynamic past inputs"):
        kv_cache_bucket(load("gpt2_decode", P=3, T=1), 16, MAX_LEN)
