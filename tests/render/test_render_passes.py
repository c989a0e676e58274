"""Diff colours on the project's real passes: fuse_pointwise on a conv chain and on the YOLO-style
model, dead code elimination after it, and per-pass SVG files for the whole run."""

from __future__ import annotations

import os

import pytest
from render_helpers import dot_edges, dot_nodes, needs_dot

from migx_explore.compiler.pass_infra import PassManager, make_pass, pass_registry
from migx_explore.render import build_graph, diff_graph, render_trace, to_dot
from migx_explore.render import style as S
from migx_explore.render.synthetic import conv_chain

pytestmark = pytest.mark.skipif("fuse_pointwise" not in pass_registry(), reason="fuse_pointwise not registered")

CHANGED = (S.ADDED, S.REMOVED, S.CHANGED)


def _check_against_trace(rec, g):
    """Every drawn instruction has the trace's status; every change of the pass is drawn."""
    d = rec.diff
    want = {
        **{i: S.ADDED for i in d.added},
        **{i: S.REMOVED for i in d.removed},
        **{i: S.CHANGED for i in d.changed},
        **{i: S.UNCHANGED for i in d.unchanged},
    }
    drawn = {}
    for n in g.nodes:
        if n.instr_id is not None:
            drawn[n.instr_id] = n.status
            assert n.status == want[n.instr_id], (n.name, n.op)
        elif n.kind in ("summary", "chain"):
            assert not set(n.members) & (d.removed | d.changed), f"{n.name} hides a change"
    nodes = dot_nodes(to_dot(g))
    for n in g.nodes:
        if n.status in S.STATUS_STYLE:
            assert nodes[n.name]["fillcolor"] == S.STATUS_STYLE[n.status].fill
    return drawn


def _run(program, *names):
    return PassManager().run(program, [make_pass(n) for n in names])


@pytest.mark.parametrize("expand", [True, False])
def test_fuse_pointwise_on_conv_chain(expand):
    tr = _run(conv_chain(4), "fuse_pointwise", "dead_code_elimination")
    rec = tr.find("fuse_pointwise")
    assert rec.changed
    g = diff_graph(rec.before, rec.after, rec.diff, expand=expand, focus=None, budget=None)
    drawn = _check_against_trace(rec, g)
    main_removed = {r.id for r in rec.before.module().instrs} & rec.diff.removed
    assert main_removed <= set(drawn)  # every removed add/relu is a ghost
    assert {g.by_name()[f"i{i}"].op for i in main_removed} == {"add", "relu"}
    if expand:
        assert all(grp.status == S.ADDED for grp in g.groups.values())
        replaced = [e for e in g.edges if e.kind == "replaced"]
        assert {e.src for e in replaced} == {f"i{i}" for i in main_removed}


def test_full_diff_has_every_node_and_edge_of_both_sides():
    tr = _run(conv_chain(3), "fuse_pointwise")
    rec = tr.records[0]
    g = diff_graph(rec.before, rec.after, rec.diff, expand=False, focus=None, budget=None)
    before, after = build_graph(rec.before, expand=False), build_graph(rec.after, expand=False)
    assert {n.name for n in g.nodes} == {n.name for n in before.nodes} | {n.name for n in after.nodes}
    data = [(a, b) for a, b, attrs in dot_edges(to_dot(g)) if "kind_replaced" not in attrs["class"]]
    both = {(e.src, e.dst) for e in before.edges} | {(e.src, e.dst) for e in after.edges}
    assert set(data) == both


@pytest.fixture(scope="module")
def yolo_trace():
    models = pytest.importorskip("migx_explore.models")
    return _run(models.load("yolo"), "fuse_pointwise", "dead_code_elimination")


def test_yolo_fuse_pointwise_colours_match_trace(yolo_trace):
    rec = yolo_trace.find("fuse_pointwise")
    d = rec.diff
    assert len(d.removed) > 20 and d.modules_added
    full = diff_graph(rec.before, rec.after, d, focus=None, chains=False, budget=None)
    drawn = _check_against_trace(rec, full)
    main_ids = {r.id for r in rec.before.module().instrs} | {r.id for r in rec.after.module().instrs}
    assert main_ids & (d.added | d.removed | d.changed) <= set(drawn)
    # The default view of this ~280-node diff focuses on the changes and still shows all of them.
    default = diff_graph(rec.before, rec.after, d)
    assert len(default.nodes) <= len(full.nodes)
    shown = _check_against_trace(rec, default)
    assert {i for i, s in drawn.items() if s in CHANGED} <= set(shown)


def test_yolo_dead_code_elimination_ghosts(yolo_trace):
    rec = yolo_trace.find("dead_code_elimination")
    if not rec.changed:
        pytest.skip("fuse_pointwise left nothing dead")
    g = diff_graph(rec.before, rec.after, rec.diff)
    _check_against_trace(rec, g)
    assert not {n.status for n in g.nodes} & {S.ADDED}


@needs_dot
def test_yolo_trace_files(yolo_trace, tmp_path):
    paths = render_trace(yolo_trace, str(tmp_path))
    assert len(paths) == 1 + sum(1 for r in yolo_trace.records if r.changed)
    for p in paths:
        text = open(p).read()
        assert text.startswith("<svg") and 'class="node migx_node' in text
        assert os.path.getsize(p) < 2_000_000
