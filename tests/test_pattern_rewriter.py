"""The rewrite protocol (compiler/pattern_rewriter.py) and the rewrite pass (compiler/passes/rewrite.py)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import Op, Program, evaluate, parse
from migx_explore.compiler import matcher as mt
from migx_explore.compiler import pattern_rewriter as rw
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.passes.rewrite import RewritePass, as_pass

SRC = """
x = @param:x -> float_type, {4}, {1}
@1 = neg(x) -> float_type, {4}, {1}
@2 = neg(@1) -> float_type, {4}, {1}
@3 = exp(@2) -> float_type, {4}, {1}
@4 = neg(@3) -> float_type, {4}, {1}
@5 = @return(@4)
"""

X = mt.any_().bind("x")
NEG_NEG = mt.name("neg")(mt.arg(0)(mt.name("neg")(mt.arg(0)(X))))


class CountingRule(rw.Rule):
    """x (neg(neg(x)) -> x)"""

    name = "neg_neg"

    def __init__(self):
        self.checks = 0
        self.plans: list[object] = []

    def pattern(self):
        return NEG_NEG

    def check(self, module, match):
        self.checks += 1
        return ("plan", match["x"].id)

    def rewrite(self, module, match, plan):
        self.plans.append(plan)
        rw.replace_value(module, match.root, match["x"])


def test_check_runs_once_per_match_and_rewrite_gets_its_plan():
    p = parse(SRC)
    rule = CountingRule()
    assert rw.find_matches(p.main, rule) == 1
    assert rule.checks == 1 and rule.plans == [("plan", p.main.params()[0].id)]


def test_a_str_from_check_is_a_reason_shown_as_near_miss():
    p = parse(SRC)
    refusing = rw.rule("neg_neg", NEG_NEG, "x", check=lambda m, r: "not today")
    assert rw.find_matches(p.main, refusing) == 0
    assert "refused: not today" in [n.reason for n in rw.near_misses(p.main, refusing)]
    assert rw.matches(p.main, refusing) == []


def test_table_rows_print_pattern_and_target():
    r = rw.row("exp_to_recip", mt.name("exp")(mt.arg(0)(X)), rw.to("recip", rw.to("exp", "x")))
    assert repr(r) == "<TableRule exp_to_recip: all_of(name(exp), arg(0)(any.bind(x))) -> recip(exp(x))>"
    assert "neg_neg" in repr(CountingRule()) and "neg(neg(x)) -> x" in repr(CountingRule())


def test_rewrite_pass_runs_rules_to_a_fixpoint_and_keeps_numerics():
    p = parse(SRC)
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    want = evaluate(p, {"x": x})[0]
    neg_neg = rw.rule("neg_neg", NEG_NEG, "x")
    pass_ = RewritePass((neg_neg,), label="fold_negs", dead_code_elimination=True)
    trace = run_passes(p, [pass_])
    assert [i.name for i in p.main] == ["@param", "exp", "neg", "@return"]
    assert trace.records[0].name == "fold_negs" and len(trace.records[0].matches) == 1
    np.testing.assert_allclose(evaluate(p, {"x": x})[0], want)


def test_rewrite_pass_options_are_fields():
    p = make_pass("rewrite", max_iterations=2)
    assert isinstance(p, RewritePass) and p.describe() == "rewrite{max_iterations=2}"
    assert as_pass(rw.rule("a", NEG_NEG, "x")).describe() == "a"
    with pytest.raises(MigxError, match="not a rewrite rule"):
        RewritePass(("nope",))


def test_repeat_while_changes_counts_changing_runs():
    assert rw.repeat_while_changes(5, lambda: False) == 0
    assert rw.repeat_while_changes(3, lambda: True) == 3


def test_root_filters_say_which_ops_a_pattern_can_start_at():
    neg = Op("neg")
    assert mt.root_filter(mt.any_()) is None
    assert mt.root_filter(NEG_NEG)(neg) and not mt.root_filter(mt.name("exp"))(neg)
    pw = mt.root_filter(mt.pointwise()(mt.nargs(1)).bind("p"))
    assert pw(neg) and not pw(Op("transpose", permutation=[0]))
    either = mt.root_filter(mt.any_of(mt.name("exp"), mt.pointwise()))
    assert either(neg) and either(Op("exp")) and not either(Op("transpose", permutation=[0]))
    assert mt.root_filter(mt.any_of(mt.name("exp"), mt.any_())) is None  # one side does not say


def test_find_matches_tries_a_rule_only_on_the_roots_its_filter_allows():
    p = parse(SRC)
    seen: list[str] = []
    spy = mt.pred("spy", lambda ins: seen.append(ins.name) or False)
    assert rw.find_matches(p.main, rw.rule("spy", mt.on_root_ops(spy, lambda op: op.name == "neg"), "x")) == 0
    assert seen == ["neg", "neg", "neg"]  # neither the param nor exp
    seen.clear()
    assert rw.find_matches(p.main, rw.rule("spy_all", spy, "x")) == 0
    assert seen == ["@param", "neg", "neg", "exp", "neg"]  # no filter: every root but @return


def test_has_value_compares_every_element_and_keeps_the_answer_for_the_sweep():
    p = Program()
    m = p.main
    same = m.add_literal(np.full((3, 3), 2.0, np.float32))
    first_only = m.add_literal(np.array([2.0, 2.0, 5.0], np.float32))
    cache: dict = {}
    twos = mt.has_value(2.0)
    assert twos.match(same, cache) is not None and twos.match(first_only, cache) is None
    assert mt.has_value(5.0).match(first_only, cache) is None  # the first element settles it
    assert twos.match(same, cache) is not None and mt.has_value(3.5, rtol=0.5).match(first_only, cache)


def test_a_quiet_sweep_is_not_repeated_until_the_module_changes():
    from migx_explore.compiler.passes.rewrite import sweep

    p = parse(SRC)
    tried: list[int] = []
    spy = rw.rule("spy", mt.pred("spy", lambda ins: tried.append(ins.id) or False), "x")
    rules = (spy,)
    assert not sweep(p.main, rules, skip_if_quiet=True) and len(tried) == 5
    assert not sweep(p.main, rules, skip_if_quiet=True) and len(tried) == 5  # nothing changed: skipped
    assert not sweep(p.main, rules) and len(tried) == 10  # without the flag it always runs
    assert not sweep(p.main, (spy,), skip_if_quiet=True) and len(tried) == 15  # another rules object
    exp = next(i for i in p.main if i.name == "exp")
    p.main.replace_instruction(exp, Op("abs"))
    assert not sweep(p.main, rules, skip_if_quiet=True) and len(tried) == 20  # the module changed
    neg_neg = (rw.rule("neg_neg", NEG_NEG, "x"),)
    assert sweep(p.main, neg_neg, skip_if_quiet=True)  # a sweep that changes is not remembered as quiet
    assert not sweep(p.main, neg_neg, skip_if_quiet=True)


def test_a_quiet_sweep_runs_again_when_a_submodule_it_reaches_changes():
    from ir_samples import FUSED

    from migx_explore.compiler.passes.rewrite import sweep

    p = parse(FUSED)
    tried: list[int] = []
    rules = (rw.rule("spy", mt.pred("spy", lambda ins: tried.append(ins.id) or False), "x"),)
    sweep(p.main, rules, skip_if_quiet=True)
    n = len(tried)
    sweep(p.main, rules, skip_if_quiet=True)
    assert len(tried) == n
    sub = p.modules["main:pointwise0"]
    mul = next(i for i in sub if i.name == "mul")
    sub.replace_instruction(mul, Op("add"))  # the fused body changed, main did not
    sweep(p.main, rules, skip_if_quiet=True)
    assert len(tried) == 2 * n
