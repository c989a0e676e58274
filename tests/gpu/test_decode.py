"""Decode loop and the per-shape graph cache (gpu/decode.py, migx_explore/decode.py): stale-output
checks (graph mode equals eager at every step), eviction and memory bounds. The fake backend runs
them in CI; the `gpu` ones run on the device."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.decode import generate
from migx_explore.gpu import compile_program
from migx_explore.gpu.decode import ShapeGraphs
from migx_explore.models import get_model
from migx_explore.models.gpt2_decode import decode_feed

BLOB = get_model("gpt2_decode").SerializeToString()
PROMPT = [5, 17, 99, 3]


def _compiler(backend):
    return lambda feed: compile_program(BLOB, backend=backend,
                                        input_dims={k: list(np.shape(v)) for k, v in feed.items()})


def _same_steps(a, b, exact: bool):
    assert a.tokens == b.tokens
    for k, (x, y) in enumerate(zip(a.logits, b.logits)):
        if exact:
            np.testing.assert_array_equal(x, y, err_msg=f"step {k}")
        else:
            np.testing.assert_allclose(x, y, rtol=1e-3, atol=1e-3, err_msg=f"step {k}")


def test_generate_graph_equals_eager_and_reference_on_fake(fake):
    graph = generate("gpt2_decode", PROMPT, 4, target="gpu", mode="graph", backend=fake)
    eager = generate("gpt2_decode", PROMPT, 4, target="gpu", mode="eager", backend=fake)
    _same_steps(graph, eager, exact=True)
    _same_steps(graph, generate("gpt2_decode", PROMPT, 4), exact=False)
    assert graph.stats.programs == 4 and graph.stats.graphs == 4  # prefill + 3 decode shapes


def test_replayed_graph_reads_each_steps_new_inputs_on_fake(fake):
    cache = ShapeGraphs(_compiler(fake))
    try:
        for step in range(6):  # one shape, new values every step: a stale graph would repeat step 0
            feed = decode_feed(past=3, new=1, seed=step)
            eager = cache.program(feed).run(feed, mode="eager")
            graph = cache.run(feed, mode="graph")
            for a, b in zip(graph, eager):
                np.testing.assert_array_equal(a, b)
        assert cache.compiles == 1 and cache.memory().graphs == 1
    finally:
        cache.close()


def test_shape_cache_evicts_least_recently_used_and_bounds_memory(fake):
    cache = ShapeGraphs(_compiler(fake), max_programs=2)
    try:
        feeds = [decode_feed(past=p, new=1) for p in (1, 2, 1, 3)]
        for f in feeds:
            cache.run(f, mode="graph")
        stats = cache.memory()
        assert (stats.programs, stats.compiles, stats.hits, stats.evictions) == (2, 3, 1, 1)
        assert 0 < stats.device_bytes < 2 * 8 * 2**20
        assert "2 programs (2 with graphs)" in str(stats)
    finally:
        cache.close()
    assert cache.memory().programs == 0


def test_generate_on_the_reference_evaluator_matches_the_model():
    from migx_explore.compiler import evaluate
    from migx_explore.models import load

    out = generate("gpt2_decode", PROMPT, 3)
    feed = {"input_ids": np.array([PROMPT], np.int64),
            **{k: np.zeros((1, 4, 0, 32), np.float32) for k in decode_feed(0, 1) if k.startswith("past_")}}
    prefill = evaluate(load("gpt2_decode", feed=feed), feed)
    assert out.tokens[0] == int(np.argmax(prefill[0][0, -1]))
    assert out.stats is None


@pytest.mark.gpu
def test_generate_graph_equals_eager_every_step(device):
    graph = generate("gpt2_decode", PROMPT, 12, target="gpu", mode="graph", backend=device)
    eager = generate("gpt2_decode", PROMPT, 12, target="gpu", mode="eager", backend=device)
    _same_steps(graph, eager, exact=True)
    _same_steps(graph, generate("gpt2_decode", PROMPT, 12), exact=False)


@pytest.mark.gpu
def test_200_graph_replays_equal_eager(device):
    cache = ShapeGraphs(_compiler(device))
    try:
        for step in range(200):
            feed = decode_feed(past=127, new=1, seed=step)
            eager = cache.program(feed).run(feed, mode="eager")
            graph = cache.run(feed, mode="graph")
            for a, b in zip(graph, eager):
                np.testing.assert_array_equal(a, b, err_msg=f"step {step}")
        assert cache.compiles == 1
    finally:
        cache.close()
