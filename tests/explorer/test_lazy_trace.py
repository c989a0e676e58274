"""Lazy, incremental tracing (issue 23): stepping runs the pipelines only as far as the pass it
lands on, the whole trace is the same as an eager one, a toggle re-runs from the first affected
pass only when asked, and the explorer shows its first graph before the rest is traced."""

from __future__ import annotations

from ir_samples import CHAIN

from migx_explore.compiler.printer import print_program
from migx_explore.session import Session

IDENT = "required.eliminate_identity#1"


def _session(**kw) -> Session:
    return Session.from_text(CHAIN, include_backend=False, numeric=False, **kw)


def _shape(trace) -> list[tuple]:
    return [(r.path, r.status, r.changed, r.depth) for r in trace.records]


def test_stepping_traces_only_as_far_as_the_pass_shown():
    eager = _session().run()
    s = _session()
    rec = s.first_changed()
    so_far = s.trace_so_far
    assert not s.trace_complete and rec.changed
    assert rec.index < len(so_far.records) < len(eager.records)
    assert _shape(so_far) == _shape(eager)[: len(so_far.records)]  # a prefix of the same trace
    s.step()
    assert s.current.path == eager.records[s.position].path
    assert s.run() is s.trace_so_far and s.trace_complete  # the rest, on demand
    assert _shape(s.trace) == _shape(eager)
    assert print_program(s.final().to_program()) == print_program(eager.final.to_program())


def test_goto_a_path_runs_until_it_is_found():
    total = len(_session().run().records)
    s = _session()
    s.goto(IDENT)
    assert s.current.path == IDENT and not s.trace_complete
    assert len(s.trace_so_far.records) < total


def test_a_toggle_re_traces_lazily_from_the_first_affected_pass():
    s = _session()
    s.run()
    s.goto(IDENT)
    s.set_enabled("fusion", False)
    s.goto(IDENT)  # before the toggled pipeline: nothing runs again
    assert s.traces.last_retrace.ran == 0 and s.traces.last_retrace.first_run.startswith("fusion.")
    s.last()  # the end: from the first fusion entry on
    assert s.traces.last_retrace.ran == sum(1 for r in s.trace.top_level() if r.pipeline == "fusion")
    assert all(r.status == "disabled" for r in s.trace.top_level() if r.pipeline == "fusion")


def test_the_explorer_draws_first_and_traces_the_rest_in_the_background():
    from migx_explore.widgets import queries
    from migx_explore.widgets.explorer import Explorer

    total = len(_session().run().records)
    ex = Explorer(_session())
    assert ex.last_load["passes_traced"] < total  # the first graph came from a prefix
    assert ex.views.drawn("diff").startswith("<svg")
    assert ex.wait(60) and ex.session.trace_complete
    rows = queries.tree_rows(ex.session, so_far=True)
    assert not [r for r in rows if r.status == "tracing"]  # the tree filled in
    assert "tracing" not in ex.status.value and "instructions" in ex.status.value


def test_rows_of_a_partial_trace_say_tracing():
    from migx_explore.widgets import queries

    s = _session()
    s.first_changed()
    rows = queries.tree_rows(s, so_far=True)
    waiting = [r for r in rows if r.status == "tracing"]
    assert waiting and all(r.css_state == "migx-tracing" for r in waiting)
    assert not s.trace_complete  # asking for rows so far traced nothing more


def test_prefetch_draws_the_next_and_the_previous_pass():
    from migx_explore.widgets import content

    s = _session()
    s.run()  # prefetching draws traced passes only
    s.goto(IDENT)
    s.step()  # a pass with passes on both sides
    vis = s.cursor.visible(s.trace_so_far)
    k = vis.index(s.position)
    cache = content.SvgCache()
    nxt = content.prefetch_next(s, "diff", cache)
    assert nxt == vis[k + 1]
    for *_, fut in list(cache._pending):
        fut.result(60)
    for index in (vis[k + 1], vis[k - 1]):
        before, after, key, _make = content.graph_job(s, index, "diff", {})
        assert cache.get(before, after, key, lambda: "drawn on the click").startswith("<svg")
    assert cache.misses == 0 and cache.hits == 2
