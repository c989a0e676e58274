"""Change regions and the views built on them: a pass opens on its first region (drawn with one
hop of context inside its scope groups) or on its rewrite summary; the region bar and the
summary's rows step through the change."""

from __future__ import annotations

import re

import pytest

from migx_explore import pass_changes
from migx_explore.regions import LEGIBLE_NODES, drawing_fits, first_view
from migx_explore.session import Session
from migx_explore.widgets.explorer import explore

CHANGED = r'class="node migx_node[^"]*st_(?:added|removed|changed)'


@pytest.fixture(scope="module")
def bert() -> Session:
    s = Session.from_model("bert_encoder", numeric=False)
    s.run()
    return s


def test_regions_are_connected_pieces_in_program_order_with_their_scope(bert):
    rec = bert.trace.find("rewrite_reduce")
    regions = pass_changes.regions(bert, rec.index)
    assert len(regions) == 4  # one softmax per layer
    assert [r.scope for r in regions] == [f"bert/encoder/layer.{k}/attention/self" for k in range(4)]
    assert regions[0].describe(2, 41) == "region 3 of 41 · /bert/encoder/layer.0/attention/self"
    ids = [i for r in regions for i in r.ids]
    d = rec.diff
    assert set(ids) == set(d.added | d.removed | d.changed) and len(ids) == len(set(ids))
    assert regions[0].depth == 7  # a softmax expands into a chain 7 deep
    small = pass_changes.regions(bert, "required.eliminate_data_type_for_gpu")
    assert small[0].legible and first_view(small) == "region"


def test_a_pass_that_changes_the_whole_program_opens_on_its_summary(bert):
    regions = pass_changes.regions(bert, "lowering")
    assert regions[0].size > LEGIBLE_NODES and first_view(regions) == "summary"


def test_a_region_reads_when_its_drawing_fits_the_measured_box():
    assert drawing_fits(257, 329) and drawing_fits(830, 297)  # 11 px and 10 px in the browser
    assert not drawing_fits(1135, 417) and not drawing_fits(263, 580)  # 9 px and 6 px


def test_the_explorer_opens_each_pass_on_a_region_or_the_summary_and_steps_regions():
    ex = explore("bert_encoder", numeric=False)
    v = ex.views
    # fed int64 ids stay 64-bit (a fed 2**32 + 1 must not become 1), so only the pooler changes
    ex.goto("required.eliminate_data_type_for_gpu")
    assert v.select.value == "diff" and v.region_bar.text == "region 1 of 1 · /bert/pooler"
    svg = v.drawn("diff")  # the region, and the rest of the model as collapsed scope groups
    assert "/bert/encoder" in svg and re.search(r"\d+ ops", svg)
    ex.goto("optimize_rewrite.rewrite_reduce")  # its first region draws too tall to read: the summary
    assert v.select.value == "rewrites"
    rows = v.rewrites.rows_box.children
    assert [b.description for b in rows][0].startswith("softmax → {reduce_max")
    rows[0].click()  # the row's first instance, drawn before | after in the Rewrites view
    assert v.select.value == "rewrites" and v.rewrites.label.value.startswith("instance 1 of 4")
    assert "/bert/encoder/layer.0/attention/self" in v.rewrites.label.value
    svg = v.graph.svg
    drawn = {int(i) for i in re.findall(r"iid_(\d+)", " ".join(re.findall(CHANGED + r'[^"]*"', svg)))}
    assert drawn and drawn <= set(pass_changes.regions(ex.session)[0].ids)
    assert ">before: what the rewrite consumed" in svg and ">softmax<" in svg
    assert "all 4 alike" in v.rewrites.label.value and "× 4 in 4 scopes" in v.rewrites.where_box.children[0].value
    v.rewrites.next.click()
    assert "instance 2 of 4 · /bert/encoder/layer.1/attention/self" in v.rewrites.label.value
    v.rewrites.scopes.value = "bert/encoder/layer.3/attention/self"  # jump to a scope
    assert "instance 4 of 4 · /bert/encoder/layer.3" in v.rewrites.label.value
    assert v.graph.svg != svg
    v.rewrites.graph_button.click()  # the whole change, region by region
    assert v.select.value == "diff" and v.region_bar.text == "all 4 regions"
    v.region_bar.move(1)
    assert v.region_bar.text.startswith("region 2 of 4 · /bert/encoder/layer.1")
    ex.stepper.keys.value = "["  # the keys box: [ and ] step regions
    assert v.region_bar.text.startswith("region 1 of 4")
    v.select.value = "rewrites"
    ex.goto("backend.lowering")  # a summary's link does not pin the graph: the steps still choose
    assert v.select.value == "rewrites"
    assert "gpu::gemm" in " ".join(b.description for b in v.rewrites.rows_box.children)
    assert not ex.errors.text


def test_picking_diff_keeps_the_graph_and_whole_change_draws_every_region():
    ex = explore("bert_encoder", numeric=False)
    v = ex.views
    ex.goto("backend.lowering")
    assert v.select.value == "rewrites"
    v.select.value = "diff"  # the user's pick: the graph stays for later passes
    ex.goto("backend.memory_coloring")
    assert v.select.value == "diff"
    ex.goto("optimize_rewrite.rewrite_reduce")
    assert v.select.value == "diff"
    one = v.drawn("diff")
    v.region_bar.whole.value = True
    assert v.region_bar.text == "all 4 regions" and v.region_bar.current is None
    every = v.drawn("diff")
    assert every.count("st_added") > one.count("st_added")
    v.select.value = "rewrites"  # back to the steps' choice
    ex.goto("backend.write_literals")
    assert v.select.value == "rewrites"
    assert not ex.errors.text
