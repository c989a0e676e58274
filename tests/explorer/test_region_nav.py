"""Region navigation beyond one pass's Diff: the whole change laid out to the pane's shape, the
regions handed to the minimap, and ◀ ▶ in the Compare view (two passes, or a pass on vs off)."""

from __future__ import annotations

import re

import pytest

from migx_explore import compare_regions, pass_changes
from migx_explore.session import Session
from migx_explore.widgets.explorer import explore

PASS = "fusion.fuse_pointwise_reduce"


@pytest.fixture(scope="module")
def ex():
    return explore("bert_encoder", numeric=False)


def test_regions_between_a_passs_own_before_and_after_are_the_passs_regions():
    s = Session.from_model("bert_encoder", numeric=False)
    rec = s.goto(PASS)
    before, after = s.snapshots(rec.index)
    between = compare_regions.regions_between(s, before, after)
    own = pass_changes.regions(s, rec.index)
    assert [set(r.ids) for r in between] == [set(r.ids) for r in own]
    assert [r.scope for r in between] == [r.scope for r in own]
    assert compare_regions.regions_between(s, before, after) is between  # cached per pair


def test_whole_change_is_laid_out_to_the_pane_and_the_minimap_gets_the_regions(ex):
    v = ex.views
    ex.goto(PASS)
    v.select.value = "diff"
    v.region_bar.move(1)
    assert v.graph.region_index == 1 and v.graph.regions == [list(r.ids) for r in v.region_bar.regions]
    v.region_bar.whole.value = True
    svg = v.drawn("diff")  # past the node budget: the scope overview, /bert opened by itself
    assert re.search(r">/bert/encoder<", svg) and re.search(r">\d+ ops · [+−~]\d+", svg)
    assert "st_changed" in svg and "layer.0" not in svg
    v.open_scopes.add("bert/encoder")  # as the scope tree does; the choice holds while stepping
    opened = v.drawn("diff")
    assert ">/bert/encoder/layer.0<" in opened and ">/bert/encoder/layer.3<" in opened
    ex.goto("backend.lowering")
    v.region_bar.whole.value = True
    assert ">/bert/encoder/layer.0<" in v.drawn("diff")
    v.open_scopes.clear()
    v.region_bar.whole.value = False
    assert "cluster_fold_" not in v.drawn("diff")  # one region is drawn as it is


def test_compare_steps_through_the_regions_between_a_and_b_and_diff_gets_its_own_back(ex):
    v = ex.views
    ex.goto(PASS)
    v.select.value = "diff"
    v.region_bar.move(2)
    pass_regions = list(v.region_bar.regions)
    v.compare("optimize_rewrite.rewrite_reduce", PASS)
    bar = v.region_bar
    assert bar.widget.layout.display is None and bar.regions is not pass_regions
    assert bar.index == 0 and not bar.whole.value
    assert v.graph.regions == [list(r.ids) for r in bar.regions] and v.graph.region_index == 0
    first = v.graph.svg
    bar.move(1)
    assert bar.text.startswith(f"instance 2 of {len(bar.regions)}") and v.graph.region_index == 1
    assert v.graph.svg != first  # cut around region 2
    assert f"iid_{bar.regions[1].ids[0]}" in v.graph.svg + v.graph.svg_right
    v.select.value = "diff"
    assert v.region_bar.regions == pass_regions and v.region_bar.index == 2


def test_compare_this_pass_on_vs_off_has_region_navigation(ex):
    v = ex.views
    ex.goto(PASS)
    v.compare_pass_off("here")
    bar = v.region_bar
    rows = pass_changes.rewrites(ex.session)
    assert len(bar.regions) == sum(r.count for r in rows) > 1  # one entry per differing instance
    assert bar.text.startswith(f"instance 1 of {len(bar.regions)}") and rows[0].label.split(" × ")[0] in bar.text
    bar.move(1)
    assert v.graph.region_index == 1 and f"iid_{bar.regions[1].ids[0]}" in v.graph.svg + v.graph.svg_right
