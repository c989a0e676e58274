"""The incremental evaluator behind the per-pass numeric check (compiler/ref_incremental.py) and
the check that tracing leaves pending until someone reads `record.numeric` (issue 43)."""

from __future__ import annotations

import numpy as np

from migx_explore import models
from migx_explore.compiler import evaluate
from migx_explore.compiler.inputs import model_inputs
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.ref import with_buffer_params
from migx_explore.compiler.ref_incremental import IncrementalEvaluator
from migx_explore.compiler.shape import Shape
from migx_explore.session import Session


def chain(c_op: str = "exp", b_as_max: bool = False) -> Program:
    """x -> dot(x, w) -> relu -> c_op -> add(c, b)."""
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [4, 8]))
    w = m.add_literal(np.full((8, 8), 0.5, np.float32))
    a = m.add_instruction(Op("dot"), [x, w])
    if b_as_max:
        b = m.add_instruction(Op("max"), [a, m.add_literal(np.zeros((4, 8), np.float32))])
    else:
        b = m.add_instruction(Op("relu"), [a])
    c = m.add_instruction(Op(c_op), [b])
    m.add_return([m.add_instruction(Op("add"), [c, b])])
    return p


def _same(a, b) -> bool:
    return all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


def test_a_second_evaluation_of_the_same_program_runs_nothing():
    p = chain()
    feed = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    assert _same(ev.evaluate(p), evaluate(p, feed)) and ev.last.computed == 4
    assert _same(ev.evaluate(p), evaluate(p, feed)) and (ev.last.computed, ev.last.reused) == (0, 4)


def test_only_what_a_change_can_affect_is_recomputed():
    feed = {"x": np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    ev.evaluate(chain())
    # exp -> sigmoid changes c and d; the dot and relu before it are reused
    changed = chain("sigmoid")
    assert _same(ev.evaluate(changed), evaluate(changed, feed))
    assert (ev.last.computed, ev.last.reused) == (2, 2)


def test_a_rewrite_to_the_same_value_does_not_invalidate_what_follows():
    feed = {"x": np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    ev.evaluate(chain())
    # relu(a) written as max(a, 0): recomputed, found bit for bit the same, so exp and add are kept
    same = chain(b_as_max=True)
    assert _same(ev.evaluate(same), evaluate(same, feed))
    assert ev.last.computed == 1


def test_incremental_checks_of_a_real_pipeline_agree_with_full_evaluations():
    program = models.load("resnet_block")
    feed = model_inputs(program, 0)
    ev = IncrementalEvaluator(feed)
    ev.evaluate(program)
    s = Session(program, numeric=False)
    computed = total = 0
    for r in s.trace.top_level():
        if not r.changed or r.after is None:
            continue
        q = r.after.to_program()
        ours = ev.evaluate(q)
        full = evaluate(q, with_buffer_params(q, feed))
        # same numbers; a layout change may move the last bits, and the full evaluation folds each
        # batch norm into its convolution's weights (compiler/ref_fold.py), which moves them too
        for a, b in zip(ours, full):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        computed += ev.last.computed
        total += ev.last.computed + ev.last.reused
    assert 0 < computed < total / 2  # most of each version was reused


def test_tracing_leaves_the_check_pending_and_reading_it_runs_it():
    s = Session.from_model("resnet_block")  # numeric check on, not deferred to a background filler
    rec = s.first_changed()
    changed = [r for r in s.trace_so_far.top_level() if r.changed and r.after is not None]
    assert rec in changed and all(r.numeric_pending for r in changed)  # stepping did not wait for any
    assert s.traces.numeric_state(rec) == "pending"
    assert rec.numeric is not None and rec.numeric.ok  # computed where it is read
    assert rec.numeric_ready and s.traces.numeric_state(rec) == "ok"


def _conv(padding) -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [1, 2, 6, 6]))
    w = m.add_literal(np.random.default_rng(3).standard_normal((3, 2, 3, 3)).astype(np.float32))
    m.add_return([m.add_instruction(Op("convolution", padding=padding), [x, w])])
    return p


def test_padding_written_out_is_the_same_convolution_and_a_wrong_one_is_not():
    feed = {"x": np.random.default_rng(4).standard_normal((1, 2, 6, 6)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    ev.evaluate(_conv((1, 1)))
    ev.evaluate(_conv((1, 1, 1, 1)))  # what normalize_ops writes: the compute reads the same
    assert ev.last.computed == 0
    ev.evaluate(_conv((1, 2)))
    wrong = _conv((1, 1, 2, 2))  # a mis-normalized (1, 2): begins (1, 1), ends (2, 2)
    assert not _same(ev.evaluate(wrong), evaluate(_conv((1, 2)), feed)) and ev.last.computed == 1


def test_a_kernel_renamed_or_a_gemm_planned_is_not_recomputed():
    import migx_explore.gpu  # noqa: F401  (registers gpu:: ops and their value keys)
    from migx_explore.gpu.ops import op_text

    def lowered(name: str, algo: str) -> Program:
        p = Program()
        m = p.main
        x = m.add_parameter("x", Shape.of("float32", [4, 8]))
        w = m.add_literal(np.full((8, 8), 0.25, np.float32))
        g = m.add_instruction(
            Op("gpu::gemm", algo=algo),
            [x, w, m.add_instruction(Op("hip::allocate", shape=Shape.of("float32", [4, 8])))],
        )
        attrs = {"op": op_text(Op("relu"))} | (
            {"symbol_name": "relu_k", "global": 64, "local": 64} if name == "gpu::code_object" else {}
        )
        buf = m.add_instruction(Op("hip::allocate", shape=Shape.of("float32", [4, 8])))
        m.add_return([m.add_instruction(Op(name, attrs), [g, buf])])
        return p

    feed = {"x": np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    first = ev.evaluate(lowered("gpu::precompile_op", ""))
    assert ev.last.computed == 3  # the second buffer is the first's zeros
    again = ev.evaluate(lowered("gpu::code_object", "planned"))  # compile_ops, compile_blas
    assert ev.last.computed == 0 and _same(first, again)


def test_a_fused_gemm_finishes_from_the_product_before_fusion():
    import migx_explore.gpu  # noqa: F401
    from migx_explore.compiler.ir import Module

    def gemm(epilogue: bool) -> Program:
        p = Program()
        m = p.main
        x = m.add_parameter("x", Shape.of("float32", [4, 8]))
        w = m.add_literal(np.full((8, 8), 0.5, np.float32))
        buf = m.add_instruction(Op("hip::allocate", shape=Shape.of("float32", [4, 8])))
        if not epilogue:
            m.add_return([m.add_instruction(Op("relu"), [m.add_instruction(Op("gpu::gemm"), [x, w, buf])])])
            return p
        body: Module = p.create_module("epilogue")
        body.bypass = True
        body.add_return([body.add_instruction(Op("relu"), [body.add_parameter("x0", Shape.scalar("float32"))])])
        m.add_return([m.add_instruction(Op("gpu::gemm"), [x, w, buf], [body])])
        return p

    feed = {"x": np.random.default_rng(6).standard_normal((4, 8)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    ev.evaluate(gemm(False))
    fused = gemm(True)
    assert _same(ev.evaluate(fused), evaluate(fused, with_buffer_params(fused, feed)))
    assert (ev.last.computed, ev.last.finished) == (1, 1)


def test_a_trace_pickles_after_its_checks_were_read_or_left_pending():
    import pickle

    s = Session.from_model("resnet_block")
    changed = [r for r in s.trace.top_level() if r.changed and r.after is not None]
    read = changed[0].numeric  # its lock now exists; the others stay pending
    copy = pickle.loads(pickle.dumps(s.trace))
    again = [r for r in copy.top_level() if r.changed and r.after is not None]
    assert again[0].numeric == read and again[0].numeric_ready
    assert again[1].numeric_ready and again[1].numeric is None  # a pending check does not travel
    assert changed[1].numeric_pending  # and the original keeps it


def _body(p: Program, name: str, ops: list[str]):
    """A scalar-param body x0 -> ops[0] -> ... where "mul" multiplies by x0 (SiLU: sigmoid, mul)."""
    body = p.create_module(name)
    body.bypass = True
    x0 = v = body.add_parameter("x0", Shape.scalar("float32"))
    for o in ops:
        v = body.add_instruction(Op(o), [x0, v] if o == "mul" else [v])
    body.add_return([v])
    return body


def _silu(fused: bool, ops: tuple[str, ...] = ("sigmoid", "mul")) -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [4, 8]))
    if fused:
        m.add_return([m.add_instruction(Op("pointwise"), [x], [_body(p, "pw", list(ops))])])
        return p
    v = x
    for o in ops:
        v = m.add_instruction(Op(o), [x, v] if o == "mul" else [v])
    m.add_return([v])
    return p


def test_a_fused_pointwise_body_reuses_what_the_unfused_ops_computed():
    feed = {"x": np.random.default_rng(7).standard_normal((4, 8)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    ev.evaluate(_silu(False))
    fused = _silu(True)
    assert _same(ev.evaluate(fused), evaluate(fused, feed))
    assert (ev.last.computed, ev.last.inside) == (1, 2)  # sigmoid and mul inside are the stored ones
    ev.evaluate(_silu(False))
    wrong = _silu(True, ("exp", "mul"))  # a fusion that put exp in place of sigmoid
    out = ev.evaluate(wrong)
    assert _same(out, evaluate(wrong, feed)) and not _same(out, evaluate(fused, feed))
    assert (ev.last.computed, ev.last.inside) == (1, 0)  # exp is new, so is the mul of it


def _gemm_then(p: Program, epilogue: list[str] | None, after: list[str] | None) -> Program:
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [4, 8]))
    w = m.add_literal(np.full((8, 8), 0.5, np.float32))
    buf = m.add_instruction(Op("hip::allocate", shape=Shape.of("float32", [4, 8])))
    mods = [_body(p, "epilogue", epilogue)] if epilogue else []
    g = m.add_instruction(Op("gpu::gemm"), [x, w, buf], mods)
    m.add_return([m.add_instruction(Op("pointwise"), [g], [_body(p, "pw", after)]) if after else g])
    return p


def test_a_kernel_reused_whole_keeps_its_body_for_the_epilogue_it_becomes():
    import migx_explore.gpu  # noqa: F401

    feed = {"x": np.random.default_rng(8).standard_normal((4, 8)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    ev.evaluate(_gemm_then(Program(), None, ["sigmoid", "mul"]))
    ev.evaluate(_gemm_then(Program(), None, ["sigmoid", "mul"]))  # a pass that changed nothing here
    assert ev.last.computed == 0
    fused = _gemm_then(Program(), ["sigmoid", "mul"], None)  # fuse_ops: the pointwise is the epilogue
    assert _same(ev.evaluate(fused), evaluate(fused, with_buffer_params(fused, feed)))
    assert (ev.last.computed, ev.last.finished, ev.last.inside) == (1, 1, 2)
    ev.evaluate(_gemm_then(Program(), None, ["sigmoid", "mul"]))
    wrong = _gemm_then(Program(), ["tanh", "mul"], None)  # an epilogue that is not the kernel it replaced
    out = ev.evaluate(wrong)
    assert _same(out, evaluate(wrong, with_buffer_params(wrong, feed))) and not _same(out, ev.evaluate(fused))


def _conv_kernel(padding, epilogue: list[str] | None) -> Program:
    from migx_explore.gpu.ops import op_text

    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [1, 2, 6, 6]))
    w = m.add_literal(np.random.default_rng(9).standard_normal((3, 2, 3, 3)).astype(np.float32))
    buf = m.add_instruction(Op("hip::allocate", shape=Shape.of("float32", [1, 3, 6, 6])))
    attrs = {"op": op_text(Op("convolution", padding=padding)), "ninputs": 2}
    mods = [_body(p, "epilogue", epilogue)] if epilogue else []
    m.add_return([m.add_instruction(Op("gpu::precompile_op", attrs), [x, w, buf], mods)])
    return p


def test_a_convolution_kernel_with_an_epilogue_finishes_from_the_plain_kernel():
    import migx_explore.gpu  # noqa: F401

    feed = {"x": np.random.default_rng(10).standard_normal((1, 2, 6, 6)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    ev.evaluate(_conv_kernel((1, 1), None))
    fused = _conv_kernel((1, 1), ["relu"])
    assert _same(ev.evaluate(fused), evaluate(fused, with_buffer_params(fused, feed)))
    assert (ev.last.computed, ev.last.finished) == (1, 1)
    wrong = _conv_kernel((2, 2, 0, 0), ["relu"])  # the same lens from another padding
    out = ev.evaluate(wrong)
    assert ev.last.finished == 0 and _same(out, evaluate(wrong, with_buffer_params(wrong, feed)))
    assert not _same(out, evaluate(fused, with_buffer_params(fused, feed)))


def test_a_body_edited_after_its_rebuild_is_keyed_on_what_it_holds_now():
    from migx_explore.compiler.snapshot import snapshot

    feed = {"x": np.random.default_rng(11).standard_normal((4, 8)).astype(np.float32)}
    ev = IncrementalEvaluator(feed)
    snap = snapshot(_silu(True))
    first = ev.evaluate(snap.to_program())  # the body's structure is read once from its record
    assert _same(ev.evaluate(snap.to_program()), first) and ev.last.computed == 0
    edited = snap.to_program()
    body = edited.modules["pw"]
    sig = next(i for i in body if i.name == "sigmoid")
    body.replace_instruction(sig, Op("exp"), list(sig.inputs))  # the record no longer describes it
    out = ev.evaluate(edited)
    assert ev.last.computed == 1 and _same(out, evaluate(_silu(True, ("exp", "mul")), feed))
    assert not _same(out, first)
