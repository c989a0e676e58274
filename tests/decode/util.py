"""Feeds and onnxruntime references for the built-in gpt2_decode model."""

from __future__ import annotations

import functools

import numpy as np

from migx_explore.models import get_model
from migx_explore.models.gpt2_decode import D_MODEL, HEADS, LAYERS, VOCAB

DH = D_MODEL // HEADS


def decode_feed(past: int, new: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + 1000 * past + new)
    feed = {"input_ids": rng.integers(0, VOCAB, (1, new)).astype(np.int64)}
    for i in range(LAYERS):
        for kv in ("key", "value"):
            feed[f"past_{kv}_{i}"] = rng.standard_normal((1, HEADS, past, DH)).astype(np.float32)
    return feed


@functools.cache
def _ort():
    import onnxruntime as ort

    return ort.InferenceSession(get_model("gpt2_decode").SerializeToString(), providers=["CPUExecutionProvider"])


def onnxruntime_outputs(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    return _ort().run(None, feed)
