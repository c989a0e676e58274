"""KV-cache decoding (gpu/decode.py, migx_explore/decode.py): stale-output checks (every step's
logits in graph mode equal eager mode's), bucket programs, in-place cache, memory bounds. The
fake backend runs them in CI; the `gpu` ones run on the device."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.decode import decoder, generate
from migx_explore.gpu.decode import ShapeGraphs, bucket_for

PROMPT = [5, 17, 99, 3]


def _graph_equals_eager_each_step(dec, steps: int) -> None:
    """One decoder, each step run eagerly and then from its bucket's graph: the in-place append
    writes the same rows both times, so the logits must be identical; a graph that replayed a
    stale past length, token or cache would differ."""
    past = 0
    ids = np.array([PROMPT], np.int64)
    for k in range(steps):
        if past + ids.shape[1] > dec.max_len:  # cache full: a new generation over the stale rows
            past, ids = 0, np.array([PROMPT[::-1]], np.int64)
        eager = dec.step(ids, past, "eager")
        graph = dec.step(ids, past, "graph")
        np.testing.assert_array_equal(graph, eager, err_msg=f"step {k} (past length {past})")
        past += ids.shape[1]
        ids = np.array([[int(np.argmax(graph[0, -1])) if k % 3 else (k * 37) % 512]], np.int64)


def test_bucket_sizes():
    assert [bucket_for(n, 256) for n in (1, 16, 17, 128, 129, 256)] == [16, 16, 32, 128, 256, 256]
    assert bucket_for(37, 256, "exact") == 37
    with pytest.raises(Exception, match="cache holds 256"):
        bucket_for(257, 256)


def test_graph_equals_eager_every_step_200_steps_on_fake(fake):
    # A 64-row cache: 200 steps are four generations (prefill + 60 steps each), so later ones run
    # over rows a previous generation left behind.
    with decoder("gpt2_decode", target="gpu", backend=fake, max_len=64) as dec:
        _graph_equals_eager_each_step(dec, 200)
        stats = dec.memory()
    assert (stats.programs, stats.graphs, stats.compiles) == (4, 4, 4)  # prefill T=4; T=1 at 16, 32, 64
    assert stats.cache_bytes == 8 * 4 * 64 * 32 * 4 and stats.hits > 390


def test_gpu_generation_matches_reference_on_fake(fake):
    gpu = generate("gpt2_decode", PROMPT, 6, target="gpu", mode="graph", backend=fake)
    ref = generate("gpt2_decode", PROMPT, 6)
    assert gpu.tokens == ref.tokens
    for x, y in zip(gpu.logits, ref.logits):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)


def test_reference_decoder_matches_onnxruntime_over_a_bucket_boundary():
    import onnxruntime as ort

    from migx_explore.models import get_model

    sess = ort.InferenceSession(get_model("gpt2_decode").SerializeToString(), providers=["CPUExecutionProvider"])
    dec = decoder("gpt2_decode")
    feed = {
        "input_ids": np.array([list(range(14))], np.int64),
        **{f"past_{kv}_{i}": np.zeros((1, 4, 0, 32), np.float32) for i in range(4) for kv in ("key", "value")},
    }
    for past in (0, 14, 15, 16):  # buckets 16, 16, 16, 32
        ours = dec.step(feed["input_ids"], past)
        ref = sess.run(None, feed)
        np.testing.assert_allclose(ours, ref[0], rtol=2e-4, atol=2e-4, err_msg=f"past {past}")
        feed = {
            "input_ids": np.array([[past + 3]], np.int64),
            **{f"past_{kv}_{i}": ref[1 + 2 * i + (kv == "value")] for i in range(4) for kv in ("key", "value")},
        }


def test_shape_graphs_evicts_least_recently_used_and_reports():
    closed = []

    class Prog:
        def __init__(self, k):
            self.k = k
            from migx_explore.compiler.ir import Program

            self.program = Program()

        def close(self):
            closed.append(self.k)

        def memory(self):
            from migx_explore.gpu.passes.memory_coloring import MemoryStats

            return MemoryStats(1024, 2048, 1)

    cache = ShapeGraphs(max_programs=2)
    for k in ("a", "b", "a", "c"):
        cache.get(k, lambda k=k: Prog(k))
    stats = cache.stats()
    assert (stats.programs, stats.compiles, stats.hits, stats.evictions) == (2, 3, 1, 1)
    assert closed == ["b"]
    cache.close()
    assert sorted(closed) == ["a", "b", "c"] and cache.stats().programs == 0


def test_step_past_the_cache_is_refused(fake):
    with decoder("gpt2_decode", target="gpu", backend=fake, max_len=32) as dec:
        with pytest.raises(Exception, match="exceed the cache of 32"):
            dec.step(np.array([[1]]), 32)


@pytest.mark.gpu
def test_graph_equals_eager_every_step_200_steps(device):
    with decoder("gpt2_decode", target="gpu", backend=device) as dec:
        _graph_equals_eager_each_step(dec, 200)
        assert dec.memory().programs == 6  # prefill + buckets 16..256


@pytest.mark.gpu
def test_gpu_generation_matches_reference(device):
    gpu = generate("gpt2_decode", PROMPT, 40, target="gpu", mode="graph", backend=device)
    ref = generate("gpt2_decode", PROMPT, 40)
    assert gpu.tokens == ref.tokens
    for x, y in zip(gpu.logits, ref.logits):
        np.testing.assert_allclose(x, y, rtol=1e-3, atol=1e-3)
