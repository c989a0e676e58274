"""What a notebook user prints is short and readable: Session, snapshots, diffs and pass records
have one-line reprs without addresses and an HTML table for the notebook; goto suggests close
names."""

from __future__ import annotations

import re

import pytest

from migx_explore.session import Session, SessionError


@pytest.fixture(scope="module")
def s() -> Session:
    s = Session.from_model("resnet_block")
    s.goto("fusion.fuse_pointwise_reduce")
    return s


def test_reprs_are_one_short_line_without_addresses(s: Session) -> None:
    for obj in (s, s.diff(), s.before(), s.after(), s.record()):
        text = repr(obj)
        assert "\n" not in text and len(text) < 200, text
        assert not re.search(r"0x[0-9a-f]{6,}", text), text
    assert repr(s.diff()) == f"<SnapshotDiff: {s.diff().summary()}>"
    assert "fusion.fuse_pointwise_reduce" in repr(s.record()) and "fusion.fuse_pointwise_reduce" in repr(s)
    assert f"{s.before().total_instructions()} instructions" in repr(s.before())


def test_notebook_tables(s: Session) -> None:
    for obj in (s, s.diff(), s.before(), s.record()):
        html = obj._repr_html_()
        assert html.startswith("<div class='migx-repr'>") and "<table>" in html
        assert not re.search(r"0x[0-9a-f]{6,}", html)
    assert "pointwise" in s.diff()._repr_html_()  # the ops the pass added, by name


def test_option_values_show_by_name() -> None:
    from migx_explore.compiler.reprs import short_value

    def one_launch():  # noqa: ANN202 - a stand-in for a pass option that is a function
        return 1

    assert short_value(one_launch).endswith("one_launch") and "0x" not in short_value(one_launch)


def test_goto_suggests_close_names(s: Session) -> None:
    with pytest.raises(SessionError, match=r"did you mean fusion\.fuse_pointwise_reduce"):
        s.goto("fusion.fuse_pointwse_reduce")
    with pytest.raises(SessionError, match=r"did you mean fusion\.fuse_pointwise_reduce"):
        s.goto("fuse_pointwise_reduc")
