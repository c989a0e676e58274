"""Pass manager instrumentation, toggles, spec round trip, ordering constraints, matcher DSL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from ir_samples import IDENTITY_AND_DEAD

from migx_explore.compiler import Op, parse
from migx_explore.compiler import matcher as mt
from migx_explore.compiler import pattern_rewriter as rw
from migx_explore.compiler.pass_infra import (
    FunctionPass,
    Pass,
    PassFailed,
    PassManager,
    build_pipelines,
    check_order,
    format_spec,
    make_numeric_config,
    make_pass,
    parse_spec,
    pipeline,
    spec_from_pipelines,
    write_trace,
)
from migx_explore.compiler.passes.dead_code_elimination import DeadCodeElimination
from migx_explore.compiler.passes.eliminate_identity import EliminateIdentity

SRC = IDENTITY_AND_DEAD


def test_trace_records_diffs_noops_and_times():
    p = parse(SRC)
    tr = PassManager().run(p, [EliminateIdentity(), DeadCodeElimination(), DeadCodeElimination()])
    names = [r.path for r in tr]
    assert names == ["passes.eliminate_identity", "passes.dead_code_elimination#1", "passes.dead_code_elimination#2"]
    assert tr.records[0].changed and tr.records[1].changed and tr.records[2].noop
    assert all(r.time_s >= 0 for r in tr)
    assert tr.records[1].diff.removed and tr.final.total_instructions() == 3


def test_write_trace_numbered_files_and_index(tmp_path):
    p = parse(SRC)
    tr = PassManager().run(p, [EliminateIdentity(), DeadCodeElimination(), DeadCodeElimination()])
    files = write_trace(tr, str(tmp_path))
    names = sorted(f.name for f in tmp_path.iterdir())
    assert names == [
        "000_input.txt",
        "001_passes.eliminate_identity.txt",
        "002_passes.dead_code_elimination#1.txt",
        "index.json",
    ]
    index = json.loads((tmp_path / "index.json").read_text())
    assert [e["noop"] for e in index["passes"]] == [False, False, True]
    assert index["passes"][2]["file"] is None and len(files) == 4


@dataclass(frozen=True)
class DropUse(Pass):
    """Deliberately broken: rewires a user without telling the use list."""

    name: ClassVar[str] = "test_drop_use"

    def apply_module(self, module, ctx):
        for ins in module:
            if ins.name == "relu":
                ins._inputs = [module.get_parameter("x")]
        return True


@dataclass(frozen=True)
class BreakShape(Pass):
    name: ClassVar[str] = "test_break_shape"

    def apply_module(self, module, ctx):
        for ins in module:
            if ins.name == "neg":
                ins._shape = ins.shape.with_lens((5,))
        return True


@pytest.mark.parametrize("bad, msg", [(DropUse(), "use list names"), (BreakShape(), "stored shape")])
def test_broken_pass_is_caught_naming_pass_and_instruction(bad, msg):
    p = parse(SRC)
    before = str(p)
    with pytest.raises(PassFailed) as ei:
        PassManager().run(p, [bad])
    err = str(ei.value)
    assert bad.name in err and msg in err and "#" in err  # names the instruction by stable id
    assert str(p) == before  # restored to the last good snapshot
    assert ei.value.trace.final.text == before


def _relu_to_abs(m) -> None:
    """Every relu of `m` made an abs, through the Module API."""
    for ins in m:
        if ins.name == "relu":
            m.replace_instruction(ins, Op("abs"))


def test_pass_that_lies_about_changes_is_caught():
    def sneaky(m):
        _relu_to_abs(m)
        return False

    with pytest.raises(PassFailed, match="reported no change"):
        PassManager().run(parse(SRC), [FunctionPass(fn=sneaky, label="sneaky")])


def test_trusting_version_counters_records_the_same_diffs_for_api_passes():
    def relu_to_abs(m):
        _relu_to_abs(m)
        return True

    def run(trust: bool):
        passes = [FunctionPass(fn=relu_to_abs, label="relu_to_abs"), EliminateIdentity(), DeadCodeElimination()]
        return PassManager(validate=False, trust_versions=trust).run(parse(SRC), passes)

    reread, trusted = run(False), run(True)
    assert [r.diff.summary() for r in trusted] == [r.diff.summary() for r in reread]
    assert [r.diff.changed for r in trusted] == [r.diff.changed for r in reread]
    assert trusted.records[0].changed and trusted.final.text == reread.final.text


def test_only_the_re_read_sees_a_change_made_behind_the_module_api():
    # What trust_versions gives up (a plain compile, which validates nothing per pass either):
    # a pass that writes an instruction's fields directly leaves the version counter as it was.
    seen = {}
    for trust in (False, True):
        rec = PassManager(validate=False, trust_versions=trust).run(parse(SRC), [BreakShape()]).records[0]
        seen[trust] = rec.changed
    assert seen == {False: True, True: False}


def test_numeric_check_flags_a_pass_that_changes_results():
    def break_math(m):
        for ins in m:
            if ins.name == "relu":
                m.replace_instruction(ins, Op("neg"))

    p = parse(SRC)
    tr = PassManager(numeric=make_numeric_config(p)).run(
        p, [EliminateIdentity(), FunctionPass(fn=break_math, label="break_math")]
    )
    assert tr.records[0].numeric.ok
    bad = tr.first_numeric_failure()
    assert bad is not None and bad.name == "break_math" and bad.numeric.max_abs > 0


def test_nested_passes_show_as_children():
    @dataclass(frozen=True)
    class Composite(Pass):
        name: ClassVar[str] = "test_composite"

        def apply_program(self, program, ctx):
            ctx.run_pass(EliminateIdentity())
            ctx.run_pass(DeadCodeElimination())
            return None

    tr = PassManager().run(parse(SRC), [Composite()])
    top = tr.records[0]
    assert [tr.records[i].path for i in top.children] == [
        "passes.test_composite/eliminate_identity",
        "passes.test_composite/dead_code_elimination",
    ]
    assert top.changed and tr.records[1].depth == 1


def test_disabled_entries_stay_visible():
    pl = pipeline("p", [EliminateIdentity(), DeadCodeElimination()])
    pl.entries[0].enabled = False
    pl.entries[0].reason = "off for the test"
    tr = PassManager().run(parse(SRC), [pl])
    assert tr.records[0].status == "disabled" and tr.records[0].reason == "off for the test"
    assert not tr.records[0].changed


def test_spec_round_trip_and_errors():
    s = "required,optimize_rewrite{-fuse_horizontal,simplify_reshapes#2(depth=3)},fusion,-rewrite_gelu"
    assert format_spec(parse_spec(s)) == s
    from migx_explore.gpu.pipelines import gpu_pipelines

    catalog = gpu_pipelines()
    pls = build_pipelines("required{-eliminate_identity#2},optimize_rewrite,fusion", catalog)
    assert [p.name for p in pls] == ["required", "optimize_rewrite", "fusion"]
    assert [e.enabled for e in pls[0].entries if e.name == "eliminate_identity"] == [True, False]
    assert spec_from_pipelines(pls, catalog) == "required{-eliminate_identity#2},optimize_rewrite,fusion"
    with pytest.raises(Exception, match="unknown pipeline or pass 'fuson'"):
        build_pipelines("fuson", catalog)
    with pytest.raises(Exception, match="has no pass 'nope'"):
        build_pipelines("fusion{-nope}", catalog)


def test_ordering_rule_warns_when_broken():
    @dataclass(frozen=True)
    class Needy(Pass):
        name: ClassVar[str] = "test_needy"
        requires: ClassVar[tuple[str, ...]] = ("eliminate_identity",)

        def apply_module(self, module, ctx):
            return False

    ok = pipeline("p", [EliminateIdentity(), Needy()])
    assert check_order([ok]) == []
    bad = pipeline("p", [EliminateIdentity(), Needy()])
    bad.entries[0].enabled = False
    warns = check_order([bad])
    assert len(warns) == 1 and "requires eliminate_identity" in str(warns[0])
    late = pipeline("p", [EliminateIdentity(), DeadCodeElimination()])
    assert check_order([late]) == []
    late.entries[0].final = True
    assert [w.constraint for w in check_order([late])] == ["final"]


def test_make_pass_lists_known_names():
    with pytest.raises(Exception, match="known passes: .*dead_code_elimination"):
        make_pass("no_such_pass")


# ---- matcher ------------------------------------------------------------------------------------
MUL_CONST = """
x = @param:x -> float_type, {4}, {1}
@1 = @literal{1, 1, 1, 1} -> float_type, {4}, {1}
@2 = mul(@1,x) -> float_type, {4}, {1}
@3 = relu(@2) -> float_type, {4}, {1}
@4 = mul(@3,@3) -> float_type, {4}, {1}
@5 = @return(@4)
"""


def _mul_one_rule():
    m = mt.name("mul")(mt.either_arg(0, 1)(mt.has_value(1.0).bind("one"), mt.any_().bind("x")))

    def apply(module, r):
        module.replace_all_uses(r.root, r["x"])

    return rw.rule("mul_one", m, apply)


def test_find_matches_applies_and_records():
    p = parse(MUL_CONST)
    records = []
    n = rw.PatternRewriter(records).find_matches(p.main, _mul_one_rule())
    assert n == 1 and records[0].rule == "mul_one" and dict(records[0].bound)["one"] is not None
    relu = next(i for i in p.main if i.name == "relu")
    assert relu.inputs[0].is_param()


def test_near_misses_explain_why():
    p = parse(MUL_CONST)
    misses = rw.near_misses(p.main, _mul_one_rule())
    assert len(misses) == 1 and misses[0].op == "mul" and "neither input order" in misses[0].reason
    refusing = rw.rule(
        "mul_one_refused", _mul_one_rule().pattern(), lambda m, r: None, check=lambda m, r: "weights not constant"
    )
    reasons = [x.reason for x in rw.near_misses(p.main, refusing)]
    assert "refused: weights not constant" in reasons


def test_matcher_combinators():
    p = parse(MUL_CONST)
    ins = {i.name: i for i in p.main}
    relu = ins["relu"]
    assert mt.name("relu")(mt.arg(0)(mt.name("mul")), mt.used_once()).match(relu)
    assert not mt.none_of(mt.name("relu")).match(relu)
    assert mt.any_of(mt.name("add"), mt.name("relu")).match(relu)
    assert mt.skip("relu")(mt.name("mul")).match(relu)
    ok, reason, _ = mt.name("relu")(mt.arg(0)(mt.name("add"))).explain(relu)
    assert not ok and reason == "arg 0 of relu: expected add, got mul"
    assert mt.is_constant().match(ins["@literal"]) and not mt.is_constant().match(relu)
    assert mt.standard_shape().match(relu) and not mt.broadcast_shape().match(relu)


def test_repeat_while_changes_stops_at_fixpoint():
    calls = []
    assert rw.repeat_while_changes(5, lambda: calls.append(1) or len(calls) < 3) == 2  # changed twice, then stable
    assert len(calls) == 3


def test_numeric_config_uses_fixed_inputs():
    p = parse(SRC)
    a, b = make_numeric_config(p, seed=7), make_numeric_config(p, seed=7)
    np.testing.assert_array_equal(a.inputs["x"], b.inputs["x"])


def test_numeric_config_pickles_without_its_cache_and_still_checks():
    """Sweeps ship the config to Dask workers: the cached incremental evaluator (it holds a lock)
    stays behind and the copy rebuilds it on its first check."""
    import pickle

    p = parse(SRC)
    cfg = make_numeric_config(p)
    assert "evaluator" in cfg.cache
    copy = pickle.loads(pickle.dumps(cfg))
    assert copy.cache == {} and "evaluator" in cfg.cache
    np.testing.assert_array_equal(copy.inputs["x"], cfg.inputs["x"])
    tr = PassManager(numeric=copy).run(parse(SRC), [EliminateIdentity()])
    assert tr.records[0].numeric.ok and "evaluator" in copy.cache


def test_each_pass_run_records_through_its_own_rewriter():
    """The manager hands each run a rewriter recording into that run's record: a nested pass's
    rule applications land on the child, not on the composite that ran it; a pass applied by hand
    (no context) rewrites the same and records nothing anywhere."""
    from migx_explore.compiler.pass_infra import FunctionPass, rewriter_of, run_passes
    from migx_explore.compiler.passes.rewrite import as_pass

    inner = as_pass(_mul_one_rule(), "mul_one_pass")
    outer = FunctionPass(fn=lambda module, ctx: ctx.run_pass(inner), label="outer")
    trace = run_passes(parse(MUL_CONST), [outer])
    by_name = {r.name: r for r in trace.records}
    assert [m.rule for m in by_name["mul_one_pass"].matches] == ["mul_one"]
    assert by_name["outer"].matches == []
    p = parse(MUL_CONST)
    assert inner.apply_module(p.main, None) and rewriter_of(None).records is None
