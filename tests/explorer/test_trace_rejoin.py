"""A re-trace rejoins an earlier trace once it reaches the very program that trace had after the
same entry, with the same entries to come (session_trace.TraceCache._rejoin): toggling a pass back
on re-runs that pass only, and a toggle made before costs one entry. What it gives must be what a
fresh trace of the same configuration gives."""

from __future__ import annotations

import pytest

from migx_explore.session import Session

PASSES = ["optimize_rewrite.optimize_module", "fusion.fuse_pointwise_reduce", "required.simplify_reshapes"]


@pytest.fixture(scope="module")
def session() -> Session:
    s = Session.from_model("resnet18", numeric=False)
    s.run()
    return s


def _fresh(disabled: str | None) -> list[str]:
    s = Session.from_model("resnet18", numeric=False)
    if disabled:
        s.disable(disabled)
    return _texts(s)


def _texts(s: Session) -> list[str]:
    s.run()
    return [r.after.text if r.after is not None else "" for r in s.trace.top_level()]


@pytest.mark.parametrize("path", PASSES)
def test_a_toggle_and_its_undo_give_what_fresh_traces_give(session, path):
    session.disable(path)
    assert _texts(session) == _fresh(path)
    session.enable(path)
    after_undo = _texts(session)
    info = session.traces.last_retrace
    assert info.ran == 1 and info.rejoined > 0, info  # only the pass itself ran again
    assert after_undo == _fresh(None)
    session.disable(path)  # the same toggle again: one entry, then the earlier disabled trace
    again = _texts(session)
    assert session.traces.last_retrace.ran == 1 and again == _fresh(path)
    session.enable(path)
    session.run()


def test_a_later_entry_that_differs_is_run_not_taken(session):
    first, later = "optimize_rewrite.optimize_module", "fusion.fuse_pointwise_reduce"
    session.disable(first)
    session.run()
    session.enable(first)
    session.disable(later)  # the earlier traces all ran `later`: none may be taken past it
    got = _texts(session)
    session.enable(later)
    session.run()
    s = Session.from_model("resnet18", numeric=False)
    s.disable(later)
    assert got == _texts(s)


def test_rejoined_records_keep_their_numeric_checks():
    """The records taken from an earlier trace are that trace's: their numeric results hold (the
    programs are the same), pending ones run when read."""
    s = Session.from_model("resnet18")
    s.run()
    path = "fusion.fuse_pointwise_reduce"
    s.disable(path)
    s.run()
    s.enable(path)
    s.run()
    assert s.traces.last_retrace.rejoined > 0
    checked = [r for r in s.trace.top_level() if r.changed and r.after is not None]
    assert checked and all(r.numeric is not None and r.numeric.ok for r in checked)
