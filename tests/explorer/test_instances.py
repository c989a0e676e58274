"""Rewrite instances (migx_explore/instances.py) and their drawing (render/instance.py): every row of
every pass has instances placed in their deepest scope, stepped, jumped to by scope, said to be
alike, and drawn small enough to read; big changes draw as scope overviews (render/overview.py)."""

from __future__ import annotations

import re

import pytest

from migx_explore import pass_changes
from migx_explore.instances import InstanceView, row_places, scope_badges
from migx_explore.render.instance import FOLD_OVER, instance_graph, render_instance
from migx_explore.render.overview import scope_overview
from migx_explore.scopes import auto_opened, tree_rows
from migx_explore.session import Session
from migx_explore.widgets import content


@pytest.fixture(scope="module")
def bert() -> Session:
    s = Session.from_model("bert_encoder", numeric=False)
    s.run()
    return s


def _view(s: Session, path: str) -> InstanceView:
    rec = s.trace.find(path)
    sb, sa = pass_changes.scopes(s, rec.index)
    before, after = s.snapshots(rec.index)
    return InstanceView(pass_changes.rewrites(s, rec.index), before, after, {**sb, **sa})


def test_instances_are_placed_in_their_deepest_scope_and_stepped(bert):
    v = _view(bert, "optimize_rewrite.rewrite_reduce")
    assert v.describe() == "instance 1 of 4 · /bert/encoder/layer.0/attention/self"
    assert v.places().where() == (
        "× 4 in 4 scopes: " + ", ".join(f"/bert/encoder/layer.{k}/attention/self × 1" for k in range(4))
    )
    assert v.places().alike() == "all 4 alike"  # one softmax per layer, the same up to names
    v.step(1)
    assert v.describe().startswith("instance 2 of 4 · /bert/encoder/layer.1")
    v.step(-2)  # wraps around
    assert v.describe().startswith("instance 4 of 4 · /bert/encoder/layer.3")
    v.jump("bert/encoder/layer.2")
    assert v.index == 2
    assert v.find(v.rows[0].instances[1].ids) == (0, 1)


def test_big_passes_name_layers_not_the_root(bert):
    """lowering's one region is the whole model ("/bert"); its instances each sit in a layer."""
    v = _view(bert, "backend.lowering")
    scopes = [s for k in range(len(v.rows)) for s in v.places(k).scopes]
    assert sum(s.count("/") >= 2 for s in scopes) > len(scopes) / 2
    badges = scope_badges(v.rows, v.scopes)
    assert badges["bert"] == badges[""] and badges["bert/encoder"] > 0


def test_instances_differing_in_shape_are_not_alike(bert):
    rows = pass_changes.rewrites(bert, "fusion.fuse_pointwise_reduce")
    add = next(r for r in rows if r.label.startswith("add → pointwise"))
    before, after = bert.snapshots(bert.trace.find("fusion.fuse_pointwise_reduce").index)
    places = row_places(add, {}, before, after)
    assert places.kinds > 1 and places.alike() == ""


@pytest.mark.parametrize(
    "path",
    [
        "backend.lowering",
        "backend.fuse_ops",
        "backend.compile_ops",
        "backend.memory_coloring",
        "backend.preallocate_param",
    ],
)
def test_every_rows_first_instance_draws_small_before_and_after(bert, path):
    rec = bert.trace.find(path)
    v = _view(bert, path)
    for k in range(len(v.rows)):
        inst = v.pick(k, 0)
        g = instance_graph(v.before, v.after, inst.before, inst.after, rec.diff)
        shown = [n for n in g.nodes if n.instr_id is not None]
        assert shown and len(g.nodes) <= 2 * (FOLD_OVER + 10), (path, v.rows[k].label)
        svg = render_instance(g, (770.0, 380.0))
        w, h = map(float, re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', svg).groups())
        assert w < 1400 and h < 900, (path, v.rows[k].label, w, h)


def test_fused_ops_and_allocations_say_what_they_hold(bert):
    rec = bert.trace.find("fusion.fuse_pointwise_reduce")
    v = _view(bert, rec.path)
    k = next(k for k, r in enumerate(v.rows) if r.label.startswith("{add, mul, erf}"))
    inst = v.pick(k, 0)
    svg = content.instance_svg(v.before, v.after, rec.diff, inst)
    assert "absorbed: " in svg and "erf" in svg and ">before: what the rewrite consumed" in svg
    rec = bert.trace.find("backend.memory_coloring")
    v = _view(bert, rec.path)
    inst = v.pick(0, 0)  # hip::allocate -> load: the buffer's place in the arena
    svg = content.instance_svg(v.before, v.after, rec.diff, inst)
    assert "offset=" in svg and " bytes<" in svg


def test_whole_change_of_lowering_is_a_scope_overview_within_budget(bert):
    rec = bert.trace.find("backend.lowering")
    before, after = bert.snapshots(rec.index)
    sb, sa = pass_changes.scopes(bert, rec.index)
    scopes = {**sb, **sa}
    g = scope_overview(before, after, rec.diff, scopes)
    assert len(g.nodes) <= 60 and any(n.label.startswith("/bert/encoder") for n in g.nodes)
    opened = scope_overview(before, after, rec.diff, scopes, {"bert/encoder"})
    assert any(n.label.startswith("/bert/encoder/layer.0\n") for n in opened.nodes)
    every = scope_overview(before, after, rec.diff, scopes, {s for s in set(scopes.values())}, budget=40)
    assert len(every.nodes) <= 40  # openings past the budget close again, deepest first


def test_scope_tree_rows_open_and_auto_open_a_single_root():
    scopes = ["bert/embeddings", "bert/encoder/layer.0/attention", "bert/encoder/layer.1", "bert/pooler"]
    assert auto_opened(scopes) == {"bert"}
    rows = tree_rows(scopes, {"bert"}, {"bert/encoder": 3})
    assert [(s, d) for s, d, _, _ in rows] == [
        ("bert", 0),
        ("bert/embeddings", 1),
        ("bert/encoder", 1),
        ("bert/pooler", 1),
    ]
    assert rows[2][2:] == (True, 3)  # has children, 3 instances
    rows = tree_rows(scopes, {"bert", "bert/encoder"})
    assert ("bert/encoder/layer.0", 2, True, 0) in rows
