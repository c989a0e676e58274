"""Numeric bisect on the GPU: read back every value, find the first instruction that diverges."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore import models
from migx_explore.bisect import first_gpu_divergence
from migx_explore.compiler.inputs import random_inputs
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
    compiled.backend.memory.copy("h2d", addr, junk.ctypes.data, junk.nbytes, compiled.stream)
    compiled.backend.streams.sync(compiled.stream)
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


# ---- the planted-bug suite through the backend (tests/planted_bugs.py) ----------------------------
def _planted_through_backend(bug):
    from migx_explore.bisect import numeric_bisect

    s = Session(bug.build(), name=bug.name, include_backend=True)
    s.insert_pass(bug.as_pass(), after=bug.after)
    d = numeric_bisect(s)
    assert d is not None and d.pass_path.endswith("." + bug.name), d
    assert (d.instruction_id, d.counterpart_id) == (bug.ids["culprit"], bug.ids["replaced"]), d.describe()
    return s


def _bugs():
    from tests.planted_bugs import planted_bugs

    return planted_bugs()


@pytest.mark.parametrize("bug", _bugs(), ids=lambda b: b.name)
def test_planted_bugs_survive_lowering_on_the_fake_backend(bug):
    s = _planted_through_backend(bug)
    compiled = CompiledProgram(s.final().to_program(), FakeBackend())
    try:
        cfg = s.traces.numeric_config()
        compiled.run({k: v for k, v in cfg.inputs.items() if k in compiled.inputs}, mode="eager")
    finally:
        compiled.close()


@pytest.mark.gpu
@pytest.mark.parametrize("bug", _bugs(), ids=lambda b: b.name)
def test_planted_bugs_on_the_gpu(bug, device):
    """verify --gpu --bisect, as an API: bisect names the planted pass and replacement; the GPU
    run shows the bug against the unoptimized program's outputs, while every GPU value agrees
    with the reference evaluator on the compiled program (the kernels are not to blame)."""
    from migx_explore.compiler.verify import check_outputs

    s = _planted_through_backend(bug)
    cfg = s.traces.numeric_config()
    compiled = CompiledProgram(s.final().to_program(), device)
    try:
        feeds = {k: v for k, v in cfg.inputs.items() if k in compiled.inputs}
        outs = [np.asarray(o) for o in compiled.run(feeds, mode="eager")]
        assert not check_outputs(outs, cfg.reference).ok, "the planted bug does not show on the GPU"
        d = first_gpu_divergence(compiled, feeds)
        assert d is None, d.describe()
    finally:
        compiled.close()
