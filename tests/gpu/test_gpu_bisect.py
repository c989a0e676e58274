"""Numeric bisect on the GPU: read back every value, find the first instruction that diverges."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore import models
from migx_explore.bisect import first_gpu_divergence
from migx_explore.compiler.ref import random_inputs
from migx_explore.gpu.executor import CompiledProgram
from migx_explore.gpu.runtime.fake import FakeBackend
from migx_explore.session import Session


def _compiled(backend=None):
    s = Session.from_model("mlp", numeric=False)
    return CompiledProgram(s.final().to_program(), backend), random_inputs(models.load("mlp"), seed=1)


def _plant_bug(compiled) -> int:
    """Overwrite the first weight buffer on the device; returns the id of its first consumer."""
    main = compiled.program.main
    lit = next(i for i in main if i.name == "hip::hip_copy_literal" and i.shape.elements() > 100)
    addr = compiled.state.addresses[lit.id]
    junk = np.full(lit.shape.elements(), 7.0, dtype=np.float32)
    compiled.backend.copy("h2d", addr, junk.ctypes.data, junk.nbytes, compiled.stream)
    compiled.backend.stream_sync(compiled.stream)
    user = next(u for u in main if lit in u.inputs and not u.op.has("view"))
    return user.id


def test_clean_program_has_no_divergence_on_the_fake_backend():
    compiled, feeds = _compiled(FakeBackend())
    assert first_gpu_divergence(compiled, feeds) is None


def test_planted_device_corruption_is_located_on_the_fake_backend():
    compiled, feeds = _compiled(FakeBackend())
    culprit = _plant_bug(compiled)
    d = first_gpu_divergence(compiled, feeds)
    assert d is not None and d.instruction_id == culprit and d.max_abs > 0


@pytest.mark.gpu
def test_gpu_values_agree_then_planted_corruption_is_found():
    compiled, feeds = _compiled()
    try:
        assert first_gpu_divergence(compiled, feeds) is None
        culprit = _plant_bug(compiled)
        d = first_gpu_divergence(compiled, feeds)
        assert d is not None and d.instruction_id == culprit
    finally:
        compiled.close()
