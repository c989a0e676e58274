"""Session: stepping, toggling with prefix-cached re-tracing, user passes, errors (no browser)."""

from __future__ import annotations

import numpy as np
import pytest
from ir_samples import CHAIN

from migx_explore import pass_changes
from migx_explore.compiler import Op
from migx_explore.compiler import matcher as mt
from migx_explore.compiler import pattern_rewriter as rw
from migx_explore.session import Session, SessionError

SRC = CHAIN


def _session(**kw):
    return Session.from_text(SRC, include_backend=False, **kw)


def test_steps_follow_the_five_pipelines_in_order():
    s = _session()
    tops = [r.path for r in s.trace.top_level()]
    assert tops[0] == "dynamic_shapes.split_single_dyn_dim"
    assert [p.split(".")[0] for p in tops] == sorted(
        [p.split(".")[0] for p in tops], key=["dynamic_shapes", "required", "optimize_rewrite", "fusion"].index
    )
    s.first()
    first = s.current.index
    s.step()
    assert s.current.index > first and s.current.depth == 0
    s.back()
    assert s.current.index == first
    s.last()
    assert s.current.path == tops[-1]


def test_goto_and_diff():
    s = _session()
    r = s.goto("required.eliminate_identity#1")
    assert r.changed and s.diff().removed
    assert pass_changes.stats(s)["removed"] == 1
    with pytest.raises(SessionError, match="no pass 'nope'"):
        s.goto("nope")


def test_toggle_recomputes_only_from_the_first_affected_entry():
    s = _session()
    s.run()
    n_top = len(s.trace.top_level())
    s.disable("required.eliminate_identity#1")
    s.run()
    info = s.traces.last_retrace
    assert info.first_run == "required.eliminate_identity#1"
    assert info.reused == 4 + 2  # dynamic_shapes (4 entries) + required's first two
    # the rest re-ran until the program was the one the first trace had at that point (a later
    # eliminate_identity removed what the disabled one left): from there on it is that trace's
    assert info.reused + info.ran + info.rejoined == n_top and info.rejoined > 0
    rec = s.trace.find("required.eliminate_identity#1")
    assert rec.status == "disabled"
    # toggling back reuses the prefix, runs the pass, and finds the first trace's program
    s.enable("required.eliminate_identity#1")
    s.run()
    assert (s.traces.last_retrace.reused, s.traces.last_retrace.ran) == (6, 1)


def test_hide_unchanged_and_nested_view():
    s = _session()
    s.cursor.view.hide_unchanged = True
    vis = s.visible()
    assert vis and all(s.trace.records[i].changed for i in vis)


def test_insert_user_rule_and_function_pass():
    s = _session()

    def neg_exp(module, r):
        module.replace(r.root, Op("recip"), [module.insert_instruction(r.root, Op("exp"), [r["x"]])])

    rule = rw.rule(
        "exp_neg_to_recip_exp", mt.name("exp")(mt.arg(0)(mt.name("neg")(mt.arg(0)(mt.any_().bind("x"))))), neg_exp
    )
    # before fusion: afterwards exp/neg live inside bypass pointwise submodules
    path = s.insert_pass(rule, after="optimize_rewrite.propagate_precision")
    assert path == "optimize_rewrite.exp_neg_to_recip_exp"
    rec = s.trace.find(path)
    assert rec.user and rec.changed and rec.matches and rec.numeric.ok


def test_error_in_user_pass_is_reported_with_its_name():
    s = _session()

    def broken(module):
        raise ValueError("boom")

    s.insert_pass(broken, after="required.normalize_ops")
    s.run()
    assert s.trace.error and "required.broken" in s.trace.error and "boom" in s.trace.error
    failed = s.trace.records[s.trace.failed_index]
    assert failed.status == "failed"


def test_numeric_check_runs_per_pass():
    s = _session()
    changed = [r for r in s.trace.top_level() if r.changed]
    assert changed and all(r.numeric is not None and r.numeric.ok for r in changed)


def test_mode_eager_runs_pr_4770s_short_optimize_rewrite():
    s = _session()
    s.config.set_mode("eager")
    recs = [r.name for r in s.trace.top_level() if r.pipeline == "optimize_rewrite"]
    assert recs == [
        "optimize_module",
        "dead_code_elimination",
        "rewrite_reduce",
        "rewrite_topk",
        "dead_code_elimination",
    ]


def test_mode_eager_of_the_may_catalogue_skips_optimize_rewrite():
    from migx_explore.compiler.parser import parse
    from migx_explore.gpu.pipelines import CompileOptions

    s = Session(parse(CHAIN), options=CompileOptions(migraphx="2026-05"), include_backend=False)
    s.config.set_mode("eager")
    recs = [r for r in s.trace.top_level() if r.pipeline == "optimize_rewrite"]
    assert recs and all(r.status == "disabled" for r in recs)


def test_spec_reflects_toggles():
    s = _session()
    s.disable("required.eliminate_identity#2")
    assert "required{-eliminate_identity#2}" in s.config.spec()


def test_final_program_evaluates_like_the_input():
    s = _session()
    from migx_explore.compiler import evaluate

    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    np.testing.assert_allclose(evaluate(s.final().to_program(), {"x": x})[0], np.exp(-np.maximum(x, 0)), rtol=1e-6)


def test_rule_pass_does_not_rematch_what_a_rewrite_left_dead():
    s = _session()
    rule = rw.rule("relu_to_abs", mt.name("relu"), lambda m, r: m.replace(r.root, Op("abs"), list(r.root.inputs)))
    path = s.insert_pass(rule, after="optimize_rewrite.propagate_precision")
    rec = s.trace.find(path)
    assert len(rec.matches) == 1  # the replaced relu stays until DCE but is not matched again


def test_feature_state_is_keyed_by_its_class_and_forgotten_by_invalidate():
    from migx_explore.config_compare import VariantTraces, variants

    s = _session()
    held = variants(s)
    assert isinstance(held, VariantTraces) and s.state(VariantTraces) is held and variants(s) is held
    assert s.state(dict) is not held  # another owner, another object
    s.invalidate()
    assert variants(s) is not held
