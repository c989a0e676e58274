"""The planted-bug suite: numeric bisect names the pass and the replacement for each of ten bugs
(tests/planted_bugs.py), and the correct pipelines report nothing."""

from __future__ import annotations

import pytest

from migx_explore.bisect import numeric_bisect
from migx_explore.compiler.pass_infra import make_numeric_config
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
    s.traces.set_numeric_config(make_numeric_config(s.initial.to_program(), rtol=1e-4, atol=1e-5))
    d = numeric_bisect(s)
    assert (d.instruction_id, d.counterpart_id) == (bug.ids["culprit"], bug.ids["replaced"])


def _conv_bias_scale_program():
    import numpy as np

    from migx_explore.compiler import Op, Program, Shape

    rng = np.random.default_rng(0)
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [1, 2, 5, 5]))
    w = m.add_literal(rng.standard_normal((3, 2, 1, 1)).astype(np.float32))
    conv = m.add_instruction(Op("convolution"), [x, w])
    bias = m.add_instruction(Op("broadcast", axis=1, out_lens=[1, 3, 5, 5]), [m.add_literal(np.ones(3, np.float32))])
    scale = m.add_literal(np.full((1, 3, 5, 5), 2.0, np.float32))
    y = m.add_instruction(Op("mul"), [m.add_instruction(Op("add"), [conv, bias]), scale])
    m.add_return([m.add_instruction(Op("relu"), [y])])
    return p


def test_new_meaning_values_are_not_compared_with_their_origin():
    """A correct batch-norm-style fold (conv + b) * s -> conv(x, w s) + b s creates a bias-free
    conv whose origin is the old conv (same shape, different value by design). The same pass also
    carries a real bug further down: bisect must name the bug, not the bias-free conv."""
    import numpy as np

    from migx_explore.compiler import Op

    seen = {}

    def fold_and_bug(module):
        mul = next(i for i in module if i.name == "mul")
        add, scale = mul.inputs
        conv, bias = add.inputs
        x, w = conv.inputs
        s = float(scale.literal.data.reshape(-1)[0])
        with module.program.provenance([mul, add, conv], rule="fold_scale_into_conv"):
            w2 = module.add_literal((w.literal.data * s).astype(np.float32))
            bias_free = module.insert_instruction(mul, Op("convolution"), [x, w2])  # new meaning: no claim
            b2 = module.insert_instruction(mul, Op("mul"), [bias, scale])
            folded = module.insert_instruction(mul, Op("add"), [bias_free, b2])
            module.replace_all_uses(mul, folded)
        relu = next(i for i in module if i.name == "relu")
        wrong = module.insert_instruction(relu, Op("neg"), [folded])  # the planted bug
        module.replace_all_uses(relu, wrong)
        seen.update(bias_free=bias_free.id, conv=conv.id, culprit=wrong.id, replaced=relu.id)
        return True

    s = Session(_conv_bias_scale_program(), include_backend=False)
    s.insert_pass(fold_and_bug, after="required.normalize_ops")
    d = numeric_bisect(s)
    assert d.instruction_id != seen["bias_free"]
    assert (d.instruction_id, d.counterpart_id) == (seen["culprit"], seen["replaced"]), d.describe()


def test_rule_names_are_reported_for_rule_rewrites():
    from migx_explore.compiler import Op
    from migx_explore.compiler.matcher import name
    from migx_explore.compiler.pattern_rewriter import rule

    def bad_apply(module, r):  # "exp(x) -> x + 1" as if it were exact
        one = module.add_literal(__import__("numpy").ones(r.root.shape.lens, "float32"))
        module.replace(r.root, Op("add"), [r.root.inputs[0], one])

    s = Session.from_text(SRC_EXP, include_backend=False)
    s.insert_pass(rule("exp_is_linear", name("exp"), bad_apply), after="required.normalize_ops", name="linearize")
    d = numeric_bisect(s)
    assert d.pass_path == "required.linearize" and d.rule == "exp_is_linear"
    assert "rule exp_is_linear" in d.describe() and d.replaced


SRC_EXP = """
x = @param:x -> float_type, {2, 8}, {8, 1}
@1 = relu(x) -> float_type, {2, 8}, {8, 1}
@2 = exp(@1) -> float_type, {2, 8}, {8, 1}
@3 = @return(@2)
"""


def test_error_amplified_downstream_is_reported_as_such():
    """A change below tolerance (1e-6 relative on values ~1000) that a cancellation amplifies:
    no instruction breaks tolerance on reference inputs, so the report says the error was
    amplified instead of blaming the subtraction."""
    import numpy as np

    from migx_explore.compiler import Op, Program, Shape

    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [64]))
    a = m.add_instruction(Op("add"), [x, m.add_literal(np.full(64, 1000, np.float32))])
    m.add_return([m.add_instruction(Op("sub"), [a, m.add_literal(np.full(64, 1000, np.float32))])])

    def nudge(module):
        add = next(i for i in module if i.name == "add")
        module.replace_instruction(add, add.op, [add.inputs[0], module.add_literal(np.full(64, 1000.001, np.float32))])
        return True

    s = Session(p, include_backend=False)
    s.insert_pass(nudge, after="required.normalize_ops")
    d = numeric_bisect(s)
    assert d.pass_path == "required.nudge" and "sub" in d.label
    assert d.note == "error amplified from its inputs" and d.note in d.describe()
