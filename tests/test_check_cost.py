"""What the per-pass numeric check skips (issue 43 part 2): snapshot records shared between
versions, the evaluator's entries for unchanged records, the program patched from the snapshot
before (compiler/snapshot_mirror.py), and per-output comparisons kept. Each skip must leave the
numbers as a full evaluation computes them, and a pass that changes numbers must still fail."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore import models
from migx_explore.compiler import evaluate
from migx_explore.compiler.inputs import model_inputs
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import make_numeric_config
from migx_explore.compiler.pass_infra.numerics import compare_program_outputs
from migx_explore.compiler.ref import with_buffer_params
from migx_explore.compiler.ref_incremental import IncrementalEvaluator
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.snapshot import snapshot, structure_key
from migx_explore.compiler.snapshot_mirror import ProgramMirror
from migx_explore.session import Session
from migx_explore.session_trace import numeric_check


def _chain() -> Program:
    """x -> dot(x, w) -> relu -> exp -> add(exp, relu) -> tanh."""
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [4, 8]))
    w = m.add_literal(np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32))
    a = m.add_instruction(Op("dot"), [x, w])
    b = m.add_instruction(Op("relu"), [a])
    c = m.add_instruction(Op("exp"), [b])
    d = m.add_instruction(Op("add"), [c, b])
    m.add_return([m.add_instruction(Op("tanh"), [d])])
    return p


FEED = {"x": np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)}


def _named(p: Program, name: str):
    return next(i for i in p.main if i.name == name)


def test_records_a_change_left_alone_are_shared_between_snapshots():
    p = _chain()
    before = snapshot(p)
    ins = _named(p, "exp")
    p.main.replace_instruction(ins, Op("sigmoid"), list(ins.inputs))
    after = snapshot(p)
    old, new = before.module().by_id, after.module().by_id
    changed = [i for i in new if new[i] is not old.get(i)]
    assert changed == [ins.id]  # every other record is the very object of the snapshot before


def test_a_changed_instruction_recomputes_only_it_and_what_depends_on_it(monkeypatch):
    p = _chain()
    ev = IncrementalEvaluator(FEED)
    ev.evaluate_snapshot(snapshot(p))
    ins = _named(p, "exp")
    p.main.replace_instruction(ins, Op("sigmoid"), list(ins.inputs))
    snap = snapshot(p)
    keyed = []
    key = IncrementalEvaluator._key
    monkeypatch.setattr(IncrementalEvaluator, "_key", lambda self, i, *a: keyed.append(i.name) or key(self, i, *a))
    out = ev.evaluate_snapshot(snap)
    # sigmoid, add and tanh run; x, w, dot and relu keep their values without a key being built
    assert (ev.last.computed, ev.last.reused) == (3, 2)
    assert keyed == ["sigmoid", "add", "tanh"]
    full = evaluate(snap.to_program(), FEED)
    assert all(np.array_equal(a, b) for a, b in zip(out, full))


def test_a_deliberately_wrong_rewrite_is_still_caught():
    p = _chain()
    cfg = make_numeric_config(p, FEED)
    first = numeric_check(cfg, snapshot(p))
    assert first.ok
    ins = _named(p, "relu")  # relu -> abs: the same shape, other numbers
    p.main.replace_instruction(ins, Op("abs"), list(ins.inputs))
    wrong = numeric_check(cfg, snapshot(p))
    assert not wrong.ok and wrong.max_abs > 0.1
    ev = cfg.cache["evaluator"]
    assert ev.last.computed == 4  # abs and everything after it, on the values it computes now


def test_outputs_a_pass_left_alone_keep_their_comparison_and_changed_ones_are_compared():
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [4, 8]))
    a = m.add_instruction(Op("exp"), [x])
    b = m.add_instruction(Op("tanh"), [x])
    m.add_return([a, b])
    cfg = make_numeric_config(p, FEED)
    assert numeric_check(cfg, snapshot(p)).ok
    m.replace_instruction(b, Op("sigmoid"), [x])  # the second output goes wrong, the first stays
    res = numeric_check(cfg, snapshot(p))
    assert not res.ok and res.output == 1
    outs = IncrementalEvaluator(FEED).evaluate(p)
    assert compare_program_outputs(p, outs, cfg).output == 1  # fresh arrays: compared anew, same answer


@pytest.mark.parametrize("model", ["resnet_block", "bert_encoder"])
def test_the_mirror_is_the_snapshot_and_its_values_are_a_full_evaluation(model):
    program = models.load(model)
    feed = model_inputs(program, 0)
    s = Session(program, numeric=False)
    ev = IncrementalEvaluator(feed)
    mirror = ProgramMirror()
    checked = 0
    for r in s.trace.top_level():
        if not r.changed or r.after is None:
            continue
        q = r.after.to_program()
        mirrored = mirror.update(r.after)
        assert structure_key(mirrored) == structure_key(q)
        assert {n: [i.id for i in m] for n, m in mirrored.modules.items()} == {
            n: [i.id for i in m] for n, m in q.modules.items()
        }
        ours = ev.evaluate_snapshot(r.after)
        full = evaluate(q, with_buffer_params(q, feed))
        # same numbers; a layout change may move the last bits, and the full evaluation folds each
        # batch norm into its convolution's weights (compiler/ref_fold.py), which moves them too
        for a, b in zip(ours, full):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        checked += 1
    assert checked > 5


def _lowering(model: str):
    s = Session(models.load(model), numeric=False)
    return next(r for r in s.trace.top_level() if r.path.endswith(".lowering"))


def test_a_convolution_lowered_to_im2col_and_gemm_is_not_recomputed(monkeypatch):
    rec = _lowering("resnet_block")
    feed = model_inputs(rec.before.to_program(), 0)
    ev = IncrementalEvaluator(feed)
    ev.evaluate_snapshot(rec.before)
    ran = []
    compute = IncrementalEvaluator._compute
    monkeypatch.setattr(IncrementalEvaluator, "_compute", lambda self, i, *a: ran.append(i) or compute(self, i, *a))
    out = ev.evaluate_snapshot(rec.after)
    gemms = [i for i in ev._mirror.program.main if i.name == "gpu::gemm"]
    assert gemms and not [i for i in ran if i.name == "gpu::gemm"]
    # nor the columns only those GEMMs read, nor the buffers they write
    assert not [i for i in ran if i.name == "gpu::precompile_op" and "im2col" in str(i.op)]
    q = rec.after.to_program()
    full = evaluate(q, with_buffer_params(q, feed))
    assert all(np.array_equal(a, b) for a, b in zip(out, full))  # the very bits, not close ones


def test_a_lowered_gemm_on_other_weights_is_recomputed_and_caught():
    rec = _lowering("resnet_block")
    cfg = make_numeric_config(rec.before.to_program(), model_inputs(rec.before.to_program(), 0))
    assert numeric_check(cfg, rec.before).ok and numeric_check(cfg, rec.after).ok
    q = rec.after.to_program()
    gemm = next(i for i in q.main if i.name == "gpu::gemm" and i.inputs[0].name == "multibroadcast")
    reshape = gemm.inputs[0].inputs[0]
    w = reshape.inputs[0]
    other = q.main.add_literal(w.literal.data[::-1].copy(), before=reshape)  # the same shape, other filters
    q.main.replace_instruction(reshape, reshape.op, [other])
    res = numeric_check(cfg, snapshot(q))
    assert not res.ok  # keyed on the weights it reads: computed anew, and wrong


@pytest.mark.parametrize("tol", [{}, {"rtol": 1e-5, "atol": 1e-6}])
def test_an_output_that_is_the_reference_array_checks_as_a_full_comparison_would(tol):
    from migx_explore.compiler.verify import Tolerance, check_value

    t = Tolerance(**tol)
    a = np.array([1.0, np.nan, np.inf, -0.0, 3.5], np.float32)
    assert check_value(a, a, t) == check_value(a, a.copy(), t)  # the shortcut, and the scan
    i = np.array([1, 2, 3], np.int64)
    assert check_value(i, i, t) == check_value(i, i.copy(), t)


def test_an_output_recomputed_to_the_same_bits_keeps_its_comparison(monkeypatch):
    from migx_explore.compiler import verify

    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [4, 8]))
    a, b = m.add_instruction(Op("exp"), [x]), m.add_instruction(Op("tanh"), [x])
    out = m.add_instruction(Op("add"), [a, b])
    m.add_return([out, m.add_instruction(Op("sigmoid"), [x])])
    cfg = make_numeric_config(p, FEED)
    first = numeric_check(cfg, snapshot(p))
    m.replace_instruction(out, Op("add"), [b, a])  # another key, a new array, the same bits
    compared = []
    scan = verify.check_value
    monkeypatch.setattr(verify, "check_value", lambda *a, **k: compared.append(a) or scan(*a, **k))
    again = numeric_check(cfg, snapshot(p))
    assert cfg.cache["evaluator"].last.computed == 1 and not compared  # computed, not compared
    assert again == first
    s = next(i for i in m if i.name == "sigmoid")
    m.replace_instruction(s, Op("relu"), [x])  # the other output changes: only it is compared
    wrong = numeric_check(cfg, snapshot(p))
    assert len(compared) == 1 and not wrong.ok and wrong.output == 1


def test_the_version_before_is_freed_without_the_garbage_collector():
    import gc
    import weakref

    p = _chain()
    ev = IncrementalEvaluator(FEED)
    ev.evaluate(p)
    ins = _named(p, "exp")
    gone = weakref.ref(ev._by_id[ins.id][1])
    p.main.replace_instruction(ins, Op("sigmoid"), list(ins.inputs))
    gc.disable()  # its values must not wait for a collection: the next version's land on fresh pages
    try:
        ev.evaluate(p)
        assert gone() is None
    finally:
        gc.enable()


def test_an_unchanged_kernel_on_a_buffer_nothing_reads_is_not_keyed_again(monkeypatch):
    s = Session(models.load("resnet_block"), numeric=False)
    rec = [r for r in s.trace.top_level() if r.changed and r.after is not None][-1]
    ev = IncrementalEvaluator(model_inputs(s.trace.initial.to_program(), 0))
    ev.evaluate_snapshot(rec.after)
    assert ev.last.unread > 0  # the output buffers the kernels write, never read
    keyed = []
    key = IncrementalEvaluator._key
    monkeypatch.setattr(IncrementalEvaluator, "_key", lambda self, i, *a: keyed.append(i) or key(self, i, *a))
    first = ev.evaluate_snapshot(rec.after)
    assert not [i for i in keyed if i.module.name == "main"]  # neither the buffers nor their kernels
    q = rec.after.to_program()
    full = evaluate(q, with_buffer_params(q, model_inputs(q, 0)))
    assert all(np.array_equal(a, b) for a, b in zip(first, full))
