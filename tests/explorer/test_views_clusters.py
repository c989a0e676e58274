"""The explorer's cluster controls and the Compare view's "this pass on vs off" mode, driven through
the widgets' Python API and the traits the front end sets (no browser)."""

from __future__ import annotations

import re

import pytest

from migx_explore.render import Clusters
from migx_explore.session import Session

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")

FUSE = "fusion.fuse_pointwise_reduce"


@pytest.fixture(scope="module")
def mlp() -> Session:
    s = Session.from_model("mlp", numeric=False)
    s.run()
    return s


@pytest.fixture
def ex(mlp):
    from migx_explore.widgets.explorer import Explorer

    mlp.goto(FUSE)
    e = Explorer(mlp)
    e.goto(FUSE)
    return e


def _fused(svg: str) -> set[int]:
    return {int(i) for i in re.findall(r'class="node migx_node[^"]*kind_fused[^"]*iid_(\d+)', svg)}


def _clusters(svg: str) -> set[int]:
    return {int(i) for i in re.findall(r'class="cluster migx_cluster[^"]*owner_(\d+)', svg)}


def test_collapse_one_cluster_then_expand_it_from_the_front_end(ex):
    svg = ex.views.drawn("diff")
    owners = _clusters(svg)  # a small program: every fused module is drawn open ("auto")
    assert len(owners) >= 2 and not _fused(svg) and ex.views.graph.all_expanded
    owner = min(owners)
    ex.views.set_cluster(owner, False)
    svg = ex.views.drawn("diff")
    assert _fused(svg) == {owner} and _clusters(svg) == owners - {owner}
    assert ex.views.graph.focus == f"i{owner}" and ex.views.graph.svg == svg
    # what a double-click on the ⊞ node sends
    ex.views.graph.cluster_request = {"owner": owner, "expand": True, "n": 1}
    svg = ex.views.drawn("diff")
    assert _clusters(svg) == owners and ex.views.graph.focus == f"owner_{owner}"
    assert ex.views.clusters == Clusters(True)


def test_the_choice_persists_across_steps_and_resets_on_a_new_load(ex, mlp):
    owner = min(_clusters(ex.views.drawn("diff")))
    ex.views.set_cluster(owner, False)
    ex.next()
    later = ex.views.drawn("diff")
    assert ex.session.current.path != FUSE
    assert owner in _fused(later) and owner not in _clusters(later)  # still closed on the next pass
    assert ex.views.graph.focus == ""  # a step centres on the change again
    assert ex.views.clusters.flipped == {owner}
    ex.set_session(Session.from_model("mlp", numeric=False))
    assert ex.views.clusters == Clusters()


def test_expand_all_and_collapse_all(ex):
    ex.views.graph.cluster_request = {"all": False, "n": 1}
    svg = ex.views.drawn("diff")
    assert not _clusters(svg) and len(_fused(svg)) >= 2 and not ex.views.graph.all_expanded
    ex.views.graph.cluster_request = {"all": True, "n": 2}
    svg = ex.views.drawn("diff")
    assert not _fused(svg) and len(_clusters(svg)) >= 2 and ex.views.graph.all_expanded


def test_compare_this_pass_on_vs_off(ex, mlp):
    disabled = mlp.config.disabled_passes()
    ex.views.compare_pass_off()
    g = ex.views.graph
    assert g.titles == [f"A: {FUSE} off (final program)", "B: as configured (final program)"]
    assert "<svg" in g.svg and "<svg" in g.svg_right and g.svg != g.svg_right
    assert ex.views.compare_text.value.count("migx-cmp-") > 2  # the text diff marks differing lines
    assert mlp.config.disabled_passes() == disabled  # the user's toggles did not move
    ex.views.compare_at.value = "here"
    assert g.titles[0] == f"A: {FUSE} off (after {FUSE})"
    ex.views.compare(-1, FUSE)  # back to two passes
    assert ex.views.compare_mode.value == "passes" and g.titles[0] == "A: (input program)"
