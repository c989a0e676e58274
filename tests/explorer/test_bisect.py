"""Numeric bisect (pass + first diverging instruction) and delta debugging over toggles."""

from __future__ import annotations

from migx_explore.bisect import ddmin, numeric_bisect, perf_bisect
from migx_explore.compiler import Op
from migx_explore.session import Session
from migx_explore.stats import launch_count

SRC = """
x = @param:x -> float_type, {2, 8}, {8, 1}
y = @param:y -> float_type, {2, 8}, {8, 1}
@2 = add(x,y) -> float_type, {2, 8}, {8, 1}
@3 = relu(@2) -> float_type, {2, 8}, {8, 1}
@4 = mul(@3,y) -> float_type, {2, 8}, {8, 1}
@5 = exp(@4) -> float_type, {2, 8}, {8, 1}
@6 = @return(@5)
"""


def test_planted_numeric_bug_is_found_with_its_instruction():
    s = Session.from_text(SRC, include_backend=False)

    def planted_bug(module):
        for ins in module:
            if ins.name == "mul":
                module.replace_instruction(ins, Op("sub"))  # keeps the stable id
        return True

    s.insert_pass(planted_bug, after="required.normalize_ops")
    mul_id = next(i.id for i in s.initial.to_program().main if i.name == "mul")
    d = numeric_bisect(s)
    assert d is not None and d.pass_path == "required.planted_bug"
    assert d.instruction_id == mul_id and "sub" in d.label and d.max_abs > 0


def test_correct_pipeline_has_nothing_to_bisect():
    assert numeric_bisect(Session.from_text(SRC, include_backend=False)) is None


def test_ddmin_finds_the_minimal_culprit_set():
    items = list("abcdefgh")
    assert ddmin(items, lambda s: "c" in s and "f" in s) == ["c", "f"]
    assert ddmin(items, lambda s: "e" in s) == ["e"]


def test_perf_bisect_finds_a_planted_slow_pass():
    s = Session.from_text(SRC, include_backend=False)

    def slow(module):
        # planted regression: two redundant copies after the last kernel (same values, +2 launches)
        ret = module.return_instruction()
        out = ret.inputs[0]
        a = module.insert_instruction(ret, Op("contiguous"), [out])
        b = module.insert_instruction(ret, Op("contiguous"), [a])
        module.replace_return([b])
        return True

    s.insert_pass(slow, after="fusion.fuse_concat")
    s.disable("fusion.slow")
    # the bad configuration has the culprit plus two harmless toggles
    toggles = {"fusion.slow": True, "required.eliminate_identity#1": False, "optimize_rewrite.rewrite_gelu": False}
    res = perf_bisect(s, toggles, lambda sess: launch_count(sess.final()))
    assert res.culprits == ["fusion.slow"]
    assert res.bad == res.good + 2
    assert s.trace.find("fusion.slow").status == "disabled"  # session restored
