"""The pass manager's instrumentations (compiler/pass_infra/instrumentation.py): hook order, a new
per-pass figure as one class, a check that fails a pass, timing that leaves instrumentation out,
and the numeric check usable on its own."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import pytest
from ir_samples import IDENTITY_AND_DEAD

from migx_explore.compiler import parse
from migx_explore.compiler.pass_infra import (
    NumericChecks,
    Pass,
    PassCheckFailed,
    PassFailed,
    PassInstrumentation,
    PassManager,
    PassRun,
    Snapshots,
    Timing,
    make_numeric_config,
)
from migx_explore.compiler.passes.dead_code_elimination import DeadCodeElimination
from migx_explore.compiler.passes.eliminate_identity import EliminateIdentity

SRC = IDENTITY_AND_DEAD


@dataclass(frozen=True)
class Both(Pass):
    """A composite: its two steps run nested."""

    name: ClassVar[str] = "test_both"

    def apply_program(self, program, ctx) -> bool:
        return ctx.run_passes([EliminateIdentity(), DeadCodeElimination()])


class InstructionCount(PassInstrumentation):
    """The whole of a new per-pass figure."""

    def after_pass(self, run: PassRun) -> None:
        run.record.figures["instructions"] = run.record.after.total_instructions()


class Log(PassInstrumentation):
    def __init__(self, tag: str, events: list[str]):
        self.tag, self.events = tag, events

    def before_pass(self, run: PassRun) -> None:
        self.events.append(f"{self.tag}>{run.record.name}")

    def after_pass(self, run: PassRun) -> None:
        self.events.append(f"{self.tag}<{run.record.name}")

    def after_pass_failed(self, run: PassRun) -> None:
        self.events.append(f"{self.tag}!{run.record.name}")

    def pass_skipped(self, run: PassRun) -> None:
        self.events.append(f"{self.tag}-{run.record.name}")


def test_a_new_figure_is_one_class_and_reaches_the_index():
    tr = PassManager(instrumentations=[InstructionCount()]).run(parse(SRC), [Both()])
    assert [r.figures["instructions"] for r in tr] == [3, 4, 3]  # the parent (record 0), then its steps
    assert tr.records[1].summary()["figures"] == {"instructions": 4}
    assert "figures" not in PassManager().run(parse(SRC), [EliminateIdentity()]).records[0].summary()


def test_hooks_nest_like_mlir_before_outermost_first_after_innermost_first():
    events: list[str] = []
    pm = PassManager(instrumentations=[Log("a", events), Log("b", events)])
    pm.run(parse(SRC), [Both()])
    assert events == [
        "a>test_both",
        "b>test_both",
        "a>eliminate_identity",
        "b>eliminate_identity",
        "b<eliminate_identity",
        "a<eliminate_identity",
        "a>dead_code_elimination",
        "b>dead_code_elimination",
        "b<dead_code_elimination",
        "a<dead_code_elimination",
        "b<test_both",
        "a<test_both",
    ]


def test_a_user_instrumentation_sees_snapshots_and_the_callback_sees_its_figure():
    seen = []
    pm = PassManager(instrumentations=[InstructionCount()], on_record=lambda r: seen.append(dict(r.figures)))
    pm.run(parse(SRC), [EliminateIdentity()])
    assert seen == [{"instructions": 4}]
    names = [type(i).__name__ for i in pm.instrumentations()]
    assert names[-2:] == ["Snapshots", "Timing"] and names[:2] == ["RecordCallback", "InstructionCount"]


def test_a_check_that_raises_fails_the_pass_and_restores_the_program():
    class NoRelu(PassInstrumentation):
        def after_pass(self, run: PassRun) -> None:
            if any(i.name == "relu" for m in run.program.get_modules() for i in m):
                raise PassCheckFailed(f"pass {run.record.path} kept a relu")

    events: list[str] = []
    p = parse(SRC)
    with pytest.raises(PassFailed, match="kept a relu") as err:
        PassManager(instrumentations=[Log("log", events), NoRelu()]).run(p, [EliminateIdentity()])
    assert err.value.record.status == "failed" and err.value.record.after is None
    assert events == ["log>eliminate_identity", "log!eliminate_identity"]
    assert any(i.name == "identity" for i in p.main)  # back to the state before the pass


def test_a_failing_nested_pass_reaches_the_parent_as_a_nested_failure():
    @dataclass(frozen=True)
    class Boom(Pass):
        name: ClassVar[str] = "test_boom"

        def apply_module(self, module, ctx) -> bool:
            raise RuntimeError("boom")

    @dataclass(frozen=True)
    class Outer(Pass):
        name: ClassVar[str] = "test_outer"

        def apply_program(self, program, ctx) -> bool:
            return ctx.run_pass(Boom())

    nested = []

    class Nested(PassInstrumentation):
        def after_pass_failed(self, run: PassRun) -> None:
            nested.append((run.record.name, run.nested_failure))

    with pytest.raises(PassFailed, match="test_outer/test_boom raised RuntimeError: boom"):
        PassManager(instrumentations=[Nested()]).run(parse(SRC), [Outer()])
    assert nested == [("test_boom", False), ("test_outer", True)]


def test_disabled_entries_reach_pass_skipped():
    from migx_explore.compiler.pass_infra import disabled, pipeline

    events: list[str] = []
    pl = pipeline("p", [disabled(EliminateIdentity(), "off"), DeadCodeElimination()])
    tr = PassManager(instrumentations=[Log("l", events)]).run(parse(SRC), [pl])
    assert events[0] == "l-eliminate_identity" and tr.records[0].status == "disabled"
    assert tr.records[0].diff is not None and tr.records[0].diff.is_noop


def test_timing_leaves_out_the_instrumentation_of_nested_passes():
    class Slow(PassInstrumentation):
        def after_pass(self, run: PassRun) -> None:
            time.sleep(0.05)

    tr = PassManager(instrumentations=[Slow()]).run(parse(SRC), [Both()])
    parent = tr.records[0]
    assert parent.name == "test_both" and parent.time_s < 0.05  # two nested sleeps (0.1 s) left out


def test_numeric_checks_work_alone_as_an_instrumentation():
    p = parse(SRC)
    cfg = make_numeric_config(p)
    alone = PassManager(instrumentations=[NumericChecks(cfg)]).run(parse(SRC), [EliminateIdentity()])
    built_in = PassManager(numeric=make_numeric_config(p)).run(parse(SRC), [EliminateIdentity()])
    assert alone.records[0].numeric.ok and built_in.records[0].numeric.ok
    assert alone.records[0].numeric.max_abs == built_in.records[0].numeric.max_abs == 0.0


def test_the_standard_list_is_made_per_run_from_the_managers_settings():
    pm = PassManager(validate=False)
    assert [type(i) for i in pm.instrumentations()][-2:] == [Snapshots, Timing]
    assert "Validation" not in [type(i).__name__ for i in pm.instrumentations()]
    pm.validate = True
    assert "Validation" in [type(i).__name__ for i in pm.instrumentations()]
