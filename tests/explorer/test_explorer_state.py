"""The explorer's state without a browser: one load transaction, the deferred numeric check, the
graph view's traits, compare, the chunked upload, switched passes visible under "hide
unchanged", the clickable metrics chart, the recipe box, and the GPU panel's recorded results."""

from __future__ import annotations

import pytest
from ir_samples import CHAIN

from migx_explore.session import Session
from migx_explore.widgets import content

IDENT = "required.eliminate_identity#1"


@pytest.fixture
def ex():
    from migx_explore.widgets.explorer import Explorer

    return Explorer(Session.from_text(CHAIN, include_backend=False, defer_numeric=True))


def test_explore_without_a_model_opens_the_picker():
    import migx_explore

    empty = migx_explore.explore()
    assert empty.session is None and empty.picker.builtin.options


def test_a_failed_load_changes_nothing_and_a_good_one_clears_the_error(ex):
    assert ex.wait(60)  # the background trace and numeric check may still redraw the view
    title, tree, svg = ex.title.value, list(ex.tree.visible_paths()), ex.views.graph.svg
    ex.picker.path.value = "/nonexistent/model.onnx"
    ex.picker.load_button.click()
    assert "nonexistent" in ex.errors.text
    assert (ex.title.value, ex.tree.visible_paths(), ex.views.graph.svg) == (title, tree, svg)
    ex.picker.builtin.value = "mlp"
    ex.picker.load_button.click()
    assert "mlp" in ex.title.value and not ex.errors.messages and ex.session.name == "mlp"


def test_numeric_check_runs_after_the_first_view_and_fills_the_tree(ex):
    assert ex.wait(60)  # the rest of the trace in the background, then the numeric check
    s = ex.session
    assert not s.traces.unchecked(s.trace)
    row = ex.tree._pool[("pass", IDENT)]
    assert row.row.numeric == "ok" and "✓" in row.info.value
    assert "passes ✓" in ex.numeric_progress.value


def test_a_new_load_cancels_the_running_check(ex):
    gen = ex.numeric._generation
    ex.load("mlp", numeric=False)
    assert ex.numeric._generation > gen and ex.numeric_progress.value == ""


def test_graph_view_traits_follow_the_step_and_keep_the_pin(ex):
    gv = ex.views.graph
    ex.goto(IDENT)
    assert gv.svg.startswith("<svg") and "st_removed" in gv.svg and gv.svg_right == ""
    gv.pinned = "i3"
    ex.next()
    assert gv.pinned == "i3"  # a pinned node stays pinned across passes
    n = gv.command.get("n", 0)
    gv.centre_changes()
    gv.find("relu")
    assert gv.command == {"cmd": "find", "query": "relu", "next": False, "n": n + 2}


def test_focus_shows_instruction_ids_on_the_nodes(ex):
    ex.goto(IDENT)
    ex.views.select.value = "focus"
    import re

    labels = re.findall(r"<text[^>]*>([^<]*)</text>", ex.views.drawn("focus"))
    tagged = re.compile(r"(&#160;| )#\d+$")  # "identity  #1" (graphviz writes the second space as &#160;)
    assert any(tagged.search(t) for t in labels)  # ids printed on the nodes, for the centre box
    assert not any(tagged.search(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", ex.views.drawn("diff")))


def test_compare_any_two_passes_side_by_side(ex):
    ex.views.compare(-1, "fusion.fuse_pointwise_reduce")
    gv = ex.views.graph
    assert gv.svg.startswith("<svg") and gv.svg_right.startswith("<svg")
    assert gv.titles == ["A: (input program)", "B: fusion.fuse_pointwise_reduce"]
    assert "migx-cmp-text" in ex.views.compare_text.value and "migx-compare-graph" in gv._dom_classes
    ex.views.select.value = "diff"
    assert gv.svg_right == "" and "migx-diff-graph" in gv._dom_classes


def test_chunked_upload_receives_a_model_and_reports_a_bad_one(ex):
    from migx_explore import models

    data = models.get_model("mlp").SerializeToString()
    up = ex.picker.upload
    half = len(data) // 2
    up._message(up, {"kind": "start", "name": "m.onnx", "size": len(data)}, [])
    up._message(up, {"kind": "chunk", "offset": 0}, [memoryview(data[:half])])
    up._message(up, {"kind": "chunk", "offset": half}, [memoryview(data[half:])])
    up._message(up, {"kind": "end", "name": "m.onnx", "size": len(data)}, [])
    assert up.status.startswith("uploaded m.onnx") and "uploaded m.onnx" in ex.picker.inputs_note.value
    ex.picker.load_button.click()
    assert "m.onnx" in ex.title.value and not ex.errors.messages
    up._message(up, {"kind": "start", "name": "x.onnx", "size": 10}, [])
    up._message(up, {"kind": "chunk", "offset": 4}, [memoryview(b"abc")])
    assert "out of order" in ex.errors.text
    up.receive("junk.onnx", b"not onnx")
    assert "junk.onnx is not a readable ONNX model" in ex.errors.text


def test_switched_off_passes_stay_visible_with_hide_unchanged(ex):
    ex.tree.hide_unchanged.value = True
    assert IDENT in ex.tree.visible_paths()
    ex.toggle(IDENT, False)
    assert IDENT in ex.tree.visible_paths()  # so it can be switched back on
    ex.toggle("fusion", False)
    head = ex.tree._pool[("pipeline", "fusion")]
    assert "migx-hidden" not in head.box._dom_classes
    ex.toggle(IDENT, True)
    ex.toggle("fusion", True)
    assert not ex.errors.messages


def test_metrics_chart_names_passes_and_clicks_go_there(ex):
    ex.views.select.value = "metrics"
    svg = ex.views.metrics.svg
    target = next(r for r in ex.session.trace.top_level() if r.path == IDENT)
    assert f'data-index="{target.index}"' in svg and "eliminate_identity" in svg
    ex.views.metrics.clicked = target.index
    ex.views.metrics.clicks += 1
    assert ex.session.current.path == IDENT


def test_recipe_box_shows_spec_env_line_and_script(ex):
    ex.toggle(IDENT, False)
    ex.recipe.button.value = True
    body = ex.recipe.html.value
    assert "-eliminate_identity#1" in body and "MIGRAPHX_DISABLE_PASSES=eliminate_identity" in body
    assert "migx-recipe-script" in body and "build_pipelines(" in body


def test_tree_scrolls_to_the_current_pass(ex):
    ex.goto(IDENT)
    assert ex.scroller.selector.endswith(".migx-path-required-eliminate_identity-1")
    assert ex.css_id in ex.scroller.selector


def test_gpu_panel_without_a_gpu_shows_recorded_results(monkeypatch):
    from migx_explore import gpu_bridge
    from migx_explore.widgets.explorer import Explorer

    monkeypatch.setattr(gpu_bridge, "unavailable_reason", lambda: "no usable GPU stack (test)")
    e = Explorer(Session.from_model("mlp", numeric=False))
    text = e.gpu.recorded.value
    assert "Recorded on NVIDIA H200, 2026-11-21" in text and "migx-recorded-current" in text


def test_no_gpu_reason_has_no_bytes_repr():
    from migx_explore.gpu_bridge import _readable

    raw = "failed to dlopen 'b'libamdhip64.so'': b'libamdhip64.so: cannot open shared object file'"
    assert _readable(raw) == "failed to dlopen libamdhip64.so: libamdhip64.so: cannot open shared object file"


def test_errors_name_the_control_not_its_css_class(ex):
    ex.session = None
    ex.stepper.next.click()
    assert ex.errors.text.strip().startswith("next pass: no model loaded") and "migx-" not in ex.errors.text


def test_content_legend_lists_statuses_and_categories():
    legend = content.legend_html()
    assert all(w in legend for w in ("added", "removed", "changed", "conv gemm", "pointwise"))
