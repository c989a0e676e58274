"""onnxruntime reference for the built-in gpt2_decode model (tests/decode)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from migx_explore.models import get_model


@functools.cache
def _session():
    import onnxruntime as ort

    return ort.InferenceSession(get_model("gpt2_decode").SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture
def onnxruntime_outputs():
    def run(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return _session().run(None, feed)

    return run
