"""Replacement claims: replace_all_uses records "new computes old's value" while a pass runs (with
the matcher rule applying), nested passes' claims reach their parent, and bisect resolves chains
of replacements made inside one pass."""

from __future__ import annotations

import numpy as np

from migx_explore.bisect import _claims
from migx_explore.compiler import Op, parse
from migx_explore.compiler.ir import Replacement
from migx_explore.compiler.matcher import name
from migx_explore.compiler.pass_infra import FunctionPass, run_passes
from migx_explore.compiler.pattern_rewriter import find_matches, rule
from migx_explore.compiler.ref import evaluate

SRC = """
x = @param:x -> float_type, {4}, {1}
@1 = relu(x) -> float_type, {4}, {1}
@2 = neg(@1) -> float_type, {4}, {1}
@3 = @return(@2)
"""

CSE_SRC = """
x = @param:x -> float_type, {4}, {1}
@1 = exp(x) -> float_type, {4}, {1}
@2 = exp(x) -> float_type, {4}, {1}
@3 = add(@1,@2) -> float_type, {4}, {1}
@4 = @return(@3)
"""


def test_replace_all_uses_records_claims_only_while_a_pass_runs():
    p = parse(SRC)
    relu = next(i for i in p.main if i.name == "relu")
    p.main.replace(relu, Op("abs"), [relu.inputs[0]])  # outside a pass: nothing to record into
    assert p.replacement_log is None

    def swap(module):
        neg = next(i for i in module if i.name == "neg")
        module.replace(neg, Op("sub"), [neg.inputs[0], neg.inputs[0]])
        return True

    trace = run_passes(p, [FunctionPass(fn=swap, label="swap")])
    (r,) = trace.records[0].replacements
    assert r.old == 2 and p.main.return_instruction().inputs[0].id == r.new and r.rule == ""
    assert p.replacement_log is None  # the manager restores it


def test_rule_rewrites_name_their_rule_in_place_or_by_replacement():
    p = parse(SRC)

    def apply_in_place(module, r):
        module.replace_instruction(r.root, Op("abs"))

    def apply_replace(module, r):
        module.replace(r.root, Op("exp"), [r.root.inputs[0]])

    def fn(module):
        find_matches(module, rule("relu_to_abs", name("relu"), apply_in_place))
        find_matches(module, rule("neg_to_exp", name("neg"), apply_replace))
        return True

    reps = run_passes(p, [FunctionPass(fn=fn, label="two_rules")]).records[0].replacements
    assert [(r.old == r.new, r.rule) for r in reps] == [(True, "relu_to_abs"), (False, "neg_to_exp")]


def test_nested_pass_claims_reach_the_parent_record():
    from migx_explore.compiler.pass_infra import make_pass

    p = parse(CSE_SRC)
    trace = run_passes(p, [make_pass("optimize_module")])
    parent = trace.records[0]
    child_claims = [r for c in trace.children(parent) for r in c.replacements]
    assert child_claims and all(r in parent.replacements for r in child_claims)


def test_claims_follow_chains_and_skip_values_with_new_meaning():
    before = {1, 2, 3}
    reps = [Replacement(2, 10, "a"), Replacement(10, 11, "b"), Replacement(3, 3, "c")]
    claims = _claims([1, 11, 3, 12], before, reps)
    assert claims[11] == [(2, "b")]  # 11 replaced 10, which had replaced 2: it claims 2's value
    assert claims[1] == [(1, "")]  # kept: equals itself
    assert claims[3] == [(3, "c")]  # rewritten in place by rule c
    assert 12 not in claims  # created with a new meaning: compared with nothing


def test_cse_survivor_claims_the_duplicate():
    from migx_explore.compiler.pass_infra import make_pass

    p = parse(CSE_SRC)
    reps = run_passes(p, [make_pass("eliminate_common_subexpression")]).records[0].replacements
    assert [(r.old, r.new) for r in reps] == [(2, 1)]
    np.testing.assert_allclose(evaluate(p, {"x": np.zeros(4, np.float32)})[0], 2.0)
