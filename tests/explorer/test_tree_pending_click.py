"""A click on a pass the background trace has not reached yet goes there (it did nothing: the
row had no record index yet, and a click soon after a load looked lost in the browser)."""

from __future__ import annotations

from migx_explore.session import Session
from migx_explore.widgets import queries
from migx_explore.widgets._common import ErrorBox
from migx_explore.widgets.explorer import explore
from migx_explore.widgets.tree import PipelineTree


def test_click_on_a_pass_not_traced_yet_goes_by_path():
    s = Session.from_model("mlp", numeric=False)
    s.first_changed()  # traced this far only, as a load leaves it before the background trace
    rows = queries.tree_rows(s, so_far=True)
    pending = [r for r in rows if r.kind == "pass" and r.index is None and r.status == "tracing"]
    assert pending, "every pass traced already: nothing to test"
    picked: list = []
    tree = PipelineTree(ErrorBox(), lambda *_a: None, picked.append, lambda *_a: None)
    tree.update(rows, s.position)
    tree.goto_button(pending[-1].path).click()
    assert picked == [pending[-1].path]
    traced = next(r for r in rows if r.index is not None and r.kind == "pass")
    tree.goto_button(traced.path).click()
    assert picked[-1] == traced.index


def test_explorer_goes_to_a_pass_by_its_path():
    ex = explore("mlp", numeric=False)
    last = [r for r in queries.tree_rows(ex.session) if r.kind == "pass"][-1]
    ex.goto(last.path)  # what the tree calls for a row not traced yet
    assert ex.session.current.path == last.path
