"""A node budget that holds (everything drawn counts, shared-input copies too) and folds by the
model's scopes: an unrolled LSTM's drawing shows its directions and steps (issue 23 item 5)."""

from __future__ import annotations

import re

import numpy as np

from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.snapshot import snapshot
from migx_explore.render import build_graph, diff_graph, render_trace, scale_graph
from migx_explore.render.fit import fit_by_scopes
from migx_explore.render.scale import hub_copies, split_hubs
from migx_explore.scopes import ScopeTable

STEP = re.compile(r"^enc/lstm_\d+/(forward|reverse)/step\.\d+$")


def _lstm_trace(seq: int = 6):
    """A scoped bidirectional LSTM (as an export names it: `enc`) unrolled by rewrite_rnn(fuse_lstm=False)."""
    rng = np.random.default_rng(0)
    p = Program()
    m = p.main

    def lit(*shape):
        return m.add_literal((rng.standard_normal(shape) * 0.5).astype(np.float32))

    x = m.add_parameter("x", Shape.of("float32", [seq, 2, 3]))
    ins = [
        x,
        lit(2, 16, 3),
        lit(2, 16, 4),
        lit(2, 32),
        m.add_literal(np.full(2, seq, np.int32)),
        lit(2, 2, 4),
        lit(2, 2, 4),
        lit(2, 12),
    ]
    r = m.add_instruction(Op("lstm", hidden_size=4, direction="bidirectional"), ins)
    outs = [m.add_instruction(Op("get_tuple_elem", index=i), [r]) for i in range(3)]
    m.add_return(outs)
    p.scopes = {r.id: "enc"}
    # unrolled step by step (as MIGraphX does): a plain direction would otherwise be one lstm_recurrence
    return run_passes(p, [make_pass("rewrite_rnn", fuse_lstm=False), make_pass("dead_code_elimination")])


def test_unrolled_steps_get_their_own_scopes_and_later_passes_keep_them():
    trace = _lstm_trace()
    rec = trace.records[0]
    table = ScopeTable(trace)
    scopes = table.scopes_of(rec.after, rec)
    dots = [r for r in rec.after.modules[0].instrs if r.op.name == "dot"]
    # x W once per direction for the whole sequence (scoped to the direction), h R once per step
    projections = [r for r in dots if r.shape.lens[0] == 6 * 2]
    recurrent = [r for r in dots if r.shape.lens[0] == 2]
    assert len(projections) == 2 and len(recurrent) == 2 * 6
    assert {scopes[r.id].rsplit("/", 1)[-1] for r in projections} == {"forward", "reverse"}
    assert all(STEP.match(scopes[r.id]) for r in recurrent), {scopes[r.id] for r in recurrent}
    steps = {scopes[r.id] for r in recurrent}
    assert len(steps) == 12
    # what dead_code_elimination leaves keeps the step scopes (not the lstm's own "enc")
    after = trace.records[-1].after
    kept = table.scopes_of(after)
    assert {kept[r.id] for r in after.modules[0].instrs if r.op.name == "dot" and r.shape.lens[0] == 2} == steps


def test_diff_over_the_budget_folds_to_steps_and_holds_the_budget():
    trace = _lstm_trace()
    rec = trace.records[0]
    table = ScopeTable(trace)
    scopes = {**table.scopes_of(rec.before, rec), **table.scopes_of(rec.after, rec)}
    full = diff_graph(rec.before, rec.after, rec.diff, budget=None)
    assert len(full.nodes) > 100
    for budget in (12, 40, 80):
        g = diff_graph(rec.before, rec.after, rec.diff, budget=budget, scopes=scopes)
        assert len(g.nodes) <= budget, (budget, len(g.nodes))
        names = {n.name for n in g.nodes}
        assert all(e.src in names and e.dst in names for e in g.edges)
        folded = [n for n in g.nodes if n.name.startswith("scope_")]
        assert folded and all(n.status == "changed" for n in folded)  # every step holds added ops
        # nothing lost: every instruction is drawn or inside a folded group
        assert g.instruction_count() == full.instruction_count()
    labels = [
        n.label.splitlines()[0] for n in diff_graph(rec.before, rec.after, rec.diff, budget=40, scopes=scopes).nodes
    ]
    assert any(re.match(r"^/enc/lstm_\d+/(forward|reverse)/step\.\d+$", t) for t in labels), labels


def test_fit_leaves_a_graph_that_fits_or_has_no_scopes_alone():
    trace = _lstm_trace()
    rec = trace.records[0]
    g = build_graph(rec.after)
    assert fit_by_scopes(g, {}, rec.diff, 10) is g
    assert fit_by_scopes(g, {1: "a"}, rec.diff, 10_000) is g


def _hub_program(users: int = 120) -> Program:
    """x -> add(·, w) -> add(·, w) -> ...: one weight read by every node of a long chain."""
    p = Program()
    m = p.main
    h = m.add_parameter("x", Shape.of("float32", [4]))
    w = m.add_literal(np.ones(4, np.float32))
    for _ in range(users):
        h = m.add_instruction(Op("add"), [h, w])
    m.add_return([h])
    return p


def test_the_budget_counts_the_copies_of_shared_inputs():
    g = build_graph(snapshot(_hub_program()))
    assert hub_copies(g) >= 100
    drawn = scale_graph(g, budget=40)
    assert len(drawn.nodes) <= 42, len(drawn.nodes)  # the copies split_hubs made included
    assert len(split_hubs(g).nodes) > 200  # what an uncounted budget let through


def test_trace_files_hold_their_budget(tmp_path):
    trace = _lstm_trace()
    paths = render_trace(trace, str(tmp_path), budget=20)
    assert len(paths) >= 2
    steps_drawn = False
    for path in paths:
        svg = open(path, encoding="utf-8").read()
        assert svg.count('class="node ') <= 20, (path, svg.count('class="node '))
        steps_drawn = steps_drawn or "/step." in svg or "/forward" in svg
    assert steps_drawn
