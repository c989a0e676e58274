"""Validation after every pass runs no shape rule twice for the same objects: a shape the IR just
computed through the Module API, or one that passed with the very same submodules, is not
recomputed (an explorer re-trace validated each of yolov10n's ~700 instructions over and over),
while anything changed around the API is still recomputed and caught."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

import migx_explore.compiler.ir_checks as ir_checks
from migx_explore.compiler import Op, Program, Shape
from migx_explore.compiler.errors import ValidationError
from migx_explore.compiler.pass_infra import Pass, PassFailed, PassManager
from migx_explore.compiler.snapshot import snapshot_module

F32 = Shape.of("float32", (4, 6))


@pytest.fixture
def rule_calls(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = ir_checks.compute_shape

    def counting(op, shapes, mods):
        calls.append(op.name)
        return real(op, shapes, mods)

    monkeypatch.setattr(ir_checks, "compute_shape", counting)
    return calls


def _fused() -> tuple[Program, object]:
    """main: x -> relu -> pointwise{neg} -> return, the pointwise body in submodule `pw`."""
    p = Program()
    pw = p.create_module("pw")
    px = pw.add_parameter("x0", F32)
    pw.add_return([pw.add_instruction(Op("neg"), [px])])
    m = p.main
    x = m.add_parameter("x", F32)
    r = m.add_instruction(Op("relu"), [x])
    m.add_return([m.add_instruction(Op("pointwise"), [r], [pw])])
    return p, pw


def _body_to_half(pw) -> None:
    """Around the Module API, consistently: the body computes in half now, so the body itself is
    valid and only the pointwise's own shape rule (its output type) can tell."""
    for ins in pw:
        if not ins.is_return():
            ins._shape = Shape.of("float16", F32.lens)


def test_shapes_made_through_the_api_are_not_recomputed(rule_calls):
    p, _ = _fused()
    p.main.validate(submodule_stamp=snapshot_module)
    assert rule_calls == ["pointwise"]  # relu's shape was computed as it was inserted
    rule_calls.clear()
    p.main.validate(submodule_stamp=snapshot_module)
    assert rule_calls == []  # the pointwise passed with these very submodule snapshots


def test_a_submodule_changed_around_the_api_is_recomputed_when_read_directly(rule_calls):
    p, pw = _fused()
    p.main.validate(submodule_stamp=snapshot_module)
    _body_to_half(pw)
    pw.validate()  # the body is consistent
    with pytest.raises(ValidationError, match=r"pointwise .*stored shape"):
        p.main.validate()  # without a stamp: recomputed


@dataclass(frozen=True)
class HalfBody(Pass):
    name: ClassVar[str] = "test_half_body"

    def apply_module(self, module, ctx):
        if module.name == "pw":
            _body_to_half(module)
            return True
        return False


def test_a_pass_that_changes_a_submodule_around_the_api_is_caught():
    p, _ = _fused()
    p.main.validate(submodule_stamp=snapshot_module)  # the memo holds the pointwise
    with pytest.raises(PassFailed, match=r"test_half_body.*pointwise .*stored shape"):
        PassManager().run(p, [HalfBody()])
