"""The Session's three parts on their own: PipelineConfig (edits and identity), TraceCache (prefix
reuse, an error read off the trace, the deferred numeric check) and Cursor (position and view),
plus timings keyed by configuration identity."""

from __future__ import annotations

import pytest
from ir_samples import CHAIN

from migx_explore import pass_changes
from migx_explore.compiler.snapshot import snapshot
from migx_explore.gpu_bridge import TimingRun, session_timing
from migx_explore.session import Session, SessionError
from migx_explore.session_config import PipelineConfig
from migx_explore.session_cursor import Cursor
from migx_explore.session_trace import TraceCache


def _session(**kw) -> Session:
    return Session.from_text(CHAIN, include_backend=False, **kw)


def test_config_edits_bump_the_version_and_change_the_identity():
    cfg = PipelineConfig(include_backend=False)
    v0, id0 = cfg.version, cfg.identity()
    cfg.set_enabled("required.eliminate_identity#1", False)
    assert cfg.version > v0 and cfg.identity() != id0
    cfg.set_enabled("required.eliminate_identity#1", True)
    assert cfg.identity() == id0  # same passes, same options: same identity
    with pytest.raises(SessionError, match="no pass or pipeline 'nope'"):
        cfg.set_enabled("nope", False)


def test_custom_pipelines_with_one_label_get_distinct_identities():
    a, b = _session(), _session()
    a.insert_pass(lambda m: False, after="required.normalize_ops", name="mine")
    b.insert_pass(lambda m: False, after="required.normalize_ops", name="mine")
    assert a.config.label() == b.config.label()  # the label collides ...
    assert a.config.identity() != b.config.identity()  # ... the identity does not
    a.timings[a.config.identity()] = TimingRun(a.config.label(), "first")
    a.set_enabled("required.eliminate_identity#1", False)
    assert session_timing(a) is None  # another configuration: not timed yet
    a.set_enabled("required.eliminate_identity#1", True)
    assert session_timing(a) == "first"


def test_trace_cache_reuses_the_prefix_and_follows_the_config_version():
    s = _session()
    cache = TraceCache(s.initial, numeric=False)
    cfg = PipelineConfig(include_backend=False)
    t1 = cache.trace(cfg)
    assert cache.trace(cfg) is t1  # nothing changed: no re-trace
    cfg.set_enabled("required.eliminate_identity#1", False)
    t2 = cache.trace(cfg)
    assert t2 is not t1 and cache.last_retrace.first_run == "required.eliminate_identity#1"
    assert t2.records[0] is t1.records[0]  # the prefix's records are shared, not re-run


def test_error_is_read_off_the_current_trace_never_stale():
    s = _session()

    def broken(module):
        raise ValueError("boom")

    s.insert_pass(broken, after="required.normalize_ops")
    assert "boom" in s.trace.error
    s.config.remove("required.broken")
    assert s.trace.error is None  # the failing pass is gone, so is its error (no manual clearing)


def test_deferred_numeric_check_fills_in_one_pass_at_a_time():
    s = _session(defer_numeric=True)
    todo = s.traces.unchecked(s.trace)
    assert todo and all(r.numeric_pending for r in todo)  # attached, not run: reading r.numeric runs it
    s.goto(todo[0].index)
    assert s.traces.numeric_state(todo[0]) == "pending" and pass_changes.stats(s)["numeric_state"] == "pending"
    first = s.traces.check_next(s.trace)
    assert first is todo[0] and first.numeric.ok and s.traces.numeric_state(first) == "ok"
    while s.traces.check_next(s.trace) is not None:
        pass
    assert not s.traces.unchecked(s.trace)
    # results live on the cached records: a toggle later in the pipeline keeps them
    s.set_enabled("fusion", False)
    assert todo[0].numeric is not None and s.trace.records[todo[0].index] is todo[0]


def test_numeric_state_says_why_a_pass_is_not_checked():
    s = _session(numeric=False)
    changed = next(r for r in s.trace.top_level() if r.changed)
    noop = next(r for r in s.trace.top_level() if r.status == "ok" and not r.changed)
    assert s.traces.numeric_state(changed) == "off" and s.traces.numeric_state(noop) == "unchanged"


def test_cursor_navigates_a_trace_without_changing_it():
    s = _session()
    trace = s.trace
    c = Cursor()
    c.view.hide_unchanged = True
    rec = c.first_changed(trace)
    assert rec.changed and rec.index == c.visible(trace)[0]
    c.move(trace, 1)
    assert c.position == c.visible(trace)[1]
    with pytest.raises(SessionError, match="out of range"):
        c.goto(trace, 10_000)
    c.position = 0  # not visible under hide_unchanged (a no-op pass)
    c.snap_to_visible(trace)
    assert c.position == c.visible(trace)[0]


def test_session_is_a_facade_over_the_parts():
    s = _session()
    s.goto("required.eliminate_identity#1")
    assert s.position == s.cursor.position
    assert s.pipelines is s.config.pipelines and s.trace is s.traces.peek()
    a, b = s.snapshots("required.eliminate_identity#1")[1], s.snapshots("fusion.fuse_pointwise_reduce")[1]
    assert a is s.trace.find("required.eliminate_identity#1").after and a.text != b.text
    assert s.record(s.position) is s.current and s.snapshots(s.position) == s.snapshots()
    assert s.initial.text == snapshot(s.initial.to_program()).text
