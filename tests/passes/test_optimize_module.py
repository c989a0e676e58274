"""optimize_module: the nested fixpoint, run under the PassManager, recorded as children."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler.parser import parse
from migx_explore.compiler.pass_infra import PassManager, make_numeric_config
from migx_explore.compiler.passes.optimize_module import OptimizeModule
from migx_explore.compiler.testing import assert_same_outputs

TEXT = """
    x = @param:x -> float_type, {2, 3}
    a = @literal{1, 2, 3} -> float_type, {3}
    one = @literal{1} -> float_type, {1}
    two = @literal{2} -> float_type, {1}
    ab = broadcast[axis=1,out_lens={2, 3}](a) -> float_type, {2, 3}, {0, 1}
    ob = multibroadcast[out_lens={2, 3}](one) -> float_type, {2, 3}, {0, 0}
    tb = multibroadcast[out_lens={2, 3}](two) -> float_type, {2, 3}, {0, 0}
    t1 = transpose[permutation={1, 0}](x) -> float_type, {3, 2}, {1, 3}
    t2 = transpose[permutation={1, 0}](t1) -> float_type, {2, 3}
    m = mul(t2,ob) -> float_type, {2, 3}
    s = sub(m,ab) -> float_type, {2, 3}
    d = div(s,tb) -> float_type, {2, 3}
    c1 = convert[target_type=half](d) -> half_type, {2, 3}
    c2 = convert[target_type=float](c1) -> float_type, {2, 3}
    e1 = exp(c2) -> float_type, {2, 3}
    e2 = exp(c2) -> float_type, {2, 3}
    y = add(e1,e2) -> float_type, {2, 3}
    r = @return(y)
"""


def test_optimize_module_records_nested_passes_as_children():
    p = parse(TEXT)
    original = parse(TEXT)
    # removing the fp16 round trip only drops an fp16 rounding (~5e-4 relative)
    trace = PassManager(numeric=make_numeric_config(p, rtol=2e-3, atol=1e-3)).run(p, [OptimizeModule()])
    top = trace.records[0]
    assert top.name == "optimize_module" and top.changed and top.numeric.ok
    kids = [trace.records[i] for i in top.children]
    names = [k.name for k in kids]
    # inner loop order, then the tail of the outer loop
    assert names[:4] == ["simplify_reshapes", "eliminate_convert", "dead_code_elimination", "simplify_algebra"]
    tail = names[names.index("eliminate_common_subexpression") :][:4]
    assert tail == [
        "eliminate_common_subexpression",
        "dead_code_elimination",
        "propagate_constant",
        "dead_code_elimination",
    ]
    assert all(k.depth == 1 and k.parent == top.index for k in kids)
    assert kids[0].path == "passes.optimize_module/simplify_reshapes"
    assert any(k.name == "simplify_algebra" and k.matches for k in kids)
    assert any(k.name == "propagate_constant" and k.changed for k in kids)
    assert_same_outputs(original, p, rtol=2e-3, atol=1e-3)


def test_optimize_module_reaches_the_expected_program():
    p = parse(TEXT)
    PassManager().run(p, [OptimizeModule()])
    ops = [i.name for i in p.main if not i.is_builtin()]
    # transposes cancel, x*1 and the convert pair vanish, x - a / 2 folds to x * 0.5 + (-a * 0.5), exp is CSE'd
    assert "transpose" not in ops and "convert" not in ops and "div" not in ops and "sub" not in ops
    assert ops.count("exp") == 1
    lits = [i.literal.data for i in p.main if i.is_literal() and i.outputs]
    assert any(np.allclose(v, [-0.5, -1.0, -1.5]) for v in lits)


def test_optimize_module_second_run_changes_nothing():
    p = parse(TEXT)
    PassManager().run(p, [OptimizeModule()])
    trace = PassManager().run(p, [OptimizeModule()])
    assert not trace.records[0].changed
