"""The planted-bug suite: numeric bisect names the pass and the replacement for each of ten bugs
(tests/planted_bugs.py), and the correct pipelines report nothing."""

from __future__ import annotations

import pytest

from migx_explore.bisect import numeric_bisect
from migx_explore.compiler.passes import make_numeric_config
from migx_explore.session import Session
from tests.planted_bugs import planted_bugs

BUGS = planted_bugs()


def planted_session(bug, *, include_backend: bool = False) -> Session:
    s = Session(bug.build(), name=bug.name, include_backend=include_backend)
    s.insert_pass(bug.as_pass(), after=bug.after)
    return s


def test_ten_distinct_planted_bugs():
    assert len({b.name for b in BUGS}) == len(BUGS) >= 10


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_bisect_names_the_planted_pass_and_replacement(bug):
    s = planted_session(bug)
    d = numeric_bisect(s)
    pipeline = bug.after.split(".")[0]
    assert d is not None, "the planted bug went unnoticed"
    assert d.pass_path == f"{pipeline}.{bug.name}", d.describe()
    assert (d.instruction_id, d.counterpart_id) == (bug.ids["culprit"], bug.ids["replaced"]), d.describe()
    assert d.rms > d.threshold
    assert bug.name in d.describe() and f"#{bug.ids['culprit']}" in d.describe()


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_the_same_programs_pass_without_the_bug(bug):
    s = Session(bug.build(), name=bug.name, include_backend=False)
    assert s.trace.first_numeric_failure() is None
    assert numeric_bisect(s) is None


def test_allclose_mode_finds_the_same_culprit():
    bug = BUGS[0]
    s = planted_session(bug)
    s._numeric_base = make_numeric_config(s.initial.to_program(), rtol=1e-4, atol=1e-5)
    d = numeric_bisect(s)
    assert (d.instruction_id, d.counterpart_id) == (bug.ids["culprit"], bug.ids["replaced"])
