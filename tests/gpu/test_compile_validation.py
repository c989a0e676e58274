"""A compile validates its result once, as a MIGraphX release build does (per-pass validation is
a debug-build check there); MIGX_VALIDATE_PASSES=1 validates after every pass and names the pass.
The explorer's traces always validate after every pass."""

from __future__ import annotations

import pytest

from migx_explore import gpu, models
from migx_explore.compiler.errors import MigxError, ValidationError
from migx_explore.compiler.ir import Module
from migx_explore.gpu.runtime.fake import FakeBackend


def _break_modules(monkeypatch, after: int) -> list[int]:
    """Module.validate fails from its `after`-th call on (a pass that left a broken module)."""
    calls = [0]
    real = Module.validate

    def validate(self, **kw):
        calls[0] += 1
        if calls[0] > after:
            raise ValidationError("instruction @7: planted break")
        return real(self, **kw)

    monkeypatch.setattr(Module, "validate", validate)
    return calls


def test_a_compile_validates_its_result_once(monkeypatch):
    monkeypatch.delenv("MIGX_VALIDATE_PASSES", raising=False)
    calls = _break_modules(monkeypatch, after=10**9)
    program = gpu.lower(models.load("mlp"), backend=FakeBackend())
    assert calls[0] == len(program.get_modules())  # once per module, at the end


def test_a_broken_result_is_one_clear_error(monkeypatch):
    monkeypatch.delenv("MIGX_VALIDATE_PASSES", raising=False)
    _break_modules(monkeypatch, after=0)
    with pytest.raises(
        MigxError, match=r"compiled program is invalid: instruction @7: planted break.*MIGX_VALIDATE_PASSES=1"
    ):
        gpu.lower(models.load("mlp"), backend=FakeBackend())


def test_validate_passes_names_the_pass(monkeypatch):
    monkeypatch.setenv("MIGX_VALIDATE_PASSES", "1")
    _break_modules(monkeypatch, after=0)
    with pytest.raises(MigxError, match=r"pass \S+ left an invalid module"):
        gpu.lower(models.load("mlp"), backend=FakeBackend())
