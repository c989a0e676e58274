"""Scope groups of the drawing open and close on a click (issue 36, item 3): the front end sends
the group's graphviz name through `cluster_request`; the scope opens into its child groups and
ops, the choice holds while stepping, and a click on the open scope's label closes it."""

from __future__ import annotations

import re

import pytest

from migx_explore.render.scoped import ROOT_ID, scope_id
from migx_explore.widgets.explorer import explore
from migx_explore.widgets.scope_tree import scope_named

PASS = "fusion.fuse_pointwise_reduce"
GROUP = re.compile(r'class="node migx_node [^"]*\bop_scope\b[^"]*">\s*<title>([^<]+)</title>')
BOX = re.compile(r"<title>(cluster_scope_[^<]+)</title>")


@pytest.fixture(scope="module")
def ex():
    return explore("bert_encoder", numeric=False)


def test_scope_named_maps_drawn_names_to_the_models_scopes():
    scopes = ["bert/encoder/layer.0/attention", "bert/embeddings"]
    layer0 = scope_id("bert/encoder/layer.0")
    assert layer0.startswith("bert_encoder_layer_0_")  # readable, with a hash: "." is not "/"
    assert scope_named("scope_" + layer0, scopes) == "bert/encoder/layer.0"
    assert scope_named("cluster_scope_bert_embeddings", scopes) == "bert/embeddings"
    assert scope_named("scope_bert_pooler", scopes) is None  # not a scope of this model
    assert scope_named("scope_bert_encoder_layer_0", scopes) is None  # that would be bert/encoder/layer/0
    assert scope_named("i42", scopes) is None
    assert scope_named("scope_" + ROOT_ID, scopes) == ""


def test_scopes_whose_names_differ_only_in_punctuation_get_their_own_groups():
    scopes = ["model.2", "model_2", "model/2", "a/layer_norm", "a/layer/norm", "top"]
    ids = [scope_id(s) for s in scopes]
    assert len(set(ids)) == len(ids) and ROOT_ID not in ids, ids
    for s, i in zip(scopes, ids):
        assert scope_named("cluster_scope_" + i, scopes) == s


def test_click_on_a_collapsed_group_opens_it_and_stepping_keeps_it(ex):
    v = ex.views
    ex.goto(PASS)
    v.select.value = "diff"
    assert v.region_bar.current == 0
    svg = v.drawn("diff")
    assert "scope_bert_embeddings" in GROUP.findall(svg) and "cluster_scope_bert_embeddings" not in BOX.findall(svg)
    v.graph.cluster_request = {"scope": "scope_bert_embeddings", "expand": True, "n": 1}
    assert "bert/embeddings" in v.open_scopes
    opened = v.drawn("diff")
    assert "scope_bert_embeddings" not in GROUP.findall(opened)  # the group is now its children
    assert "cluster_scope_bert_embeddings" in BOX.findall(opened)
    children = {"scope_" + scope_id("bert/embeddings/word_embeddings"), "scope_bert_embeddings_LayerNorm"}
    assert children <= set(GROUP.findall(opened))
    assert v.graph.focus == "cluster_scope_bert_embeddings"  # the redraw centres on what opened
    assert any("▾ embeddings" in label for label in v.scope_tree.labels)

    ex.next()
    ex.prev()  # the choice is the model's, not the pass's
    assert "bert/embeddings" in v.open_scopes and v.select.value == "diff"
    assert "cluster_scope_bert_embeddings" in BOX.findall(v.drawn("diff"))

    v.graph.cluster_request = {"scope": "cluster_scope_bert_embeddings", "expand": False, "n": 2}
    assert "bert/embeddings" not in v.open_scopes
    assert "scope_bert_embeddings" in GROUP.findall(v.drawn("diff"))
    v.graph.cluster_request = {"scope": "scope_not_a_scope", "expand": True, "n": 3}  # ignored
    assert not v.open_scopes
