"""The explorer without a browser: the query layer (no widgets), then the widgets built and driven
through their Python API and trait changes, checking traits and HTML values."""

from __future__ import annotations

import pytest
from ir_samples import CHAIN

from migx_explore import gpu_bridge, pass_changes
from migx_explore.compiler import Op
from migx_explore.compiler import matcher as mt
from migx_explore.compiler import pattern_rewriter as rw
from migx_explore.session import Session, SessionError
from migx_explore.widgets import content, queries

SRC = CHAIN
IDENT = "required.eliminate_identity#1"


def _session() -> Session:
    return Session.from_text(SRC, include_backend=False)


# ---- query layer (no ipywidgets) -----------------------------------------------------------------
def test_tree_rows_cover_pipelines_entries_and_states():
    s = _session()
    rows = queries.tree_rows(s)
    heads = [r for r in rows if r.kind == "pipeline"]
    assert [h.name for h in heads] == [p.name for p in s.pipelines]
    passes = [r for r in rows if r.kind == "pass"]
    assert [r.path for r in passes] == [p for p, _e, _pl in s.config.entries()]
    ident = next(r for r in rows if r.path == IDENT)
    assert ident.changed and ident.status == "ok" and ident.css_state == "migx-changed" and ident.index is not None
    assert ident.summary.startswith("+0 -1")
    noop = next(r for r in rows if r.path == "required.dead_code_elimination#1")
    assert noop.noop and noop.css_state == "migx-noop"
    off = next(r for r in rows if r.path == "required.dead_code_elimination#3")  # off: fp8 reason
    assert not off.effective and off.reason and off.css_state == "migx-disabled"


def test_pending_passes_cannot_be_toggled():
    from migx_explore.compiler.pass_infra import PassEntry
    from migx_explore.gpu.pipelines import PendingPass

    s = _session()
    s.pipelines[1].entries.insert(0, PassEntry(PendingPass(label="not_yet"), enabled=False, reason="not implemented"))
    s.invalidate()
    row = next(r for r in queries.tree_rows(s) if r.name == "not_yet")
    assert row.status == "pending" and not row.toggleable and row.css_state == "migx-pending"
    assert row.reason == "not implemented"


def test_nested_children_follow_their_parent():
    s = _session()
    rows = queries.tree_rows(s)
    parents = {r.path for r in rows if r.kind == "pass"}
    for k, r in enumerate(rows):
        if r.kind == "child":
            assert r.depth >= 2 and not r.toggleable
            owner = next(x for x in reversed(rows[:k]) if x.kind == "pass")
            assert r.path.startswith(owner.path + "/"), (r.path, owner.path)
            assert owner.path in parents


def test_visible_rows_filter_and_hide_unchanged():
    s = _session()
    rows = queries.tree_rows(s)
    only = queries.visible_rows(rows, "eliminate_identity")
    assert [r.kind for r in only][0] == "pipeline"
    assert {r.path for r in only if r.kind == "pass"} >= {IDENT, "required.eliminate_identity#2"}
    changed = queries.visible_rows(rows, hide_unchanged=True)
    assert all(r.changed for r in changed if r.kind != "pipeline")
    assert IDENT in {r.path for r in changed}


def test_disabling_shows_in_rows_and_pipeline_summary():
    s = _session()
    s.disable(IDENT)
    row = next(r for r in queries.tree_rows(s) if r.path == IDENT)
    assert not row.enabled and row.status == "disabled" and row.reason == "disabled by the user"
    s.disable("fusion")
    head = next(r for r in queries.tree_rows(s) if r.kind == "pipeline" and r.name == "fusion")
    assert not head.enabled and head.status == "disabled"


def test_stat_rows_and_html():
    s = _session()
    s.goto(IDENT)
    # The numeric check is lazy: the stats show it pending and never run it themselves.
    assert s.current.numeric_pending
    pending = {r.label: r for r in queries.stat_rows(pass_changes.stats(s))}
    assert pending["numeric error"].value == queries.NUMERIC_STATE_TEXT["pending"]
    assert pending["numeric error"].css == "" and s.current.numeric_pending
    assert s.current.numeric is not None  # reading it runs the check
    rows = queries.stat_rows(pass_changes.stats(s))
    by = {r.label: r for r in rows}
    assert by["instructions"].value == "6 → 5 (-1)"
    assert by["added / removed / changed"].value.startswith("+0 / -1")
    assert "kernel launches" in by and "pass time" in by
    assert by["numeric error"].css == "migx-good"
    html = queries.stats_html(rows)
    assert "<table" in html and "6 → 5 (-1)" in html


def test_position_label_and_metrics_series():
    s = _session()
    s.goto(IDENT)
    assert queries.position_label(s).endswith(IDENT)
    m = queries.metrics_series(s)
    assert len(m["index"]) == len(s.trace.top_level())
    assert all(v > 0 for v in m["instructions"]) and m["launches"][-1] <= m["launches"][0]
    svg = content.metrics_svg(m, s.current.index)
    assert svg.startswith("<svg") and "migx-metrics-current" in svg


def test_dims_parsing_and_symbolic_inputs():
    assert queries.parse_dims("x=1,3,224,224; mask = 1x77") == {"x": [1, 3, 224, 224], "mask": [1, 77]}
    assert queries.parse_dims("  ") == {}
    with pytest.raises(ValueError, match="name=1,3,224,224"):
        queries.parse_dims("x: 1 2")
    dims = {"x": ["batch", 3, 8, 8], "y": [4]}
    assert queries.symbolic_inputs(dims) == {"x": ["batch", 3, 8, 8]}
    assert queries.format_dims(queries.default_dims(dims)) == "x=1,3,8,8"


def test_onnx_inputs_reads_symbolic_dims(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g), path)
    assert queries.onnx_inputs(str(path)) == {"x": ["N", 4]}
    assert queries.onnx_inputs(path.read_bytes()) == {"x": ["N", 4]}


def test_graph_views_render_inline_svg_and_cache():
    s = _session()
    s.goto(IDENT)
    cache = content.SvgCache()
    for view in content.PASS_GRAPH_VIEWS:
        svg = content.current_graph(s, view, cache)
        assert svg.startswith("<svg") and "migx_node" in svg, view
    content.current_graph(s, "diff", cache)
    assert cache.hits == 1 and cache.misses == 3
    assert "st_removed" in content.current_graph(s, "diff", cache)  # the identity is a removed ghost
    html = content.text_diff_html(pass_changes.text_diff(s))
    assert '<span class="del">-@1 = identity' in html
    assert "No change" in content.text_diff_html("")


def test_highlight_svg_marks_matches_and_near_misses():
    s = _session()
    snap = s.initial
    ids = [r.id for r in snap.module("main").instrs]
    svg = content.highlight_svg(snap, {ids[2]}, {ids[3]: "not an exp"})
    assert "st_added" in svg and "st_changed" in svg and "near miss: not an exp" in svg


# ---- widgets -----------------------------------------------------------------------------------
ipywidgets = pytest.importorskip("ipywidgets")


@pytest.fixture
def ex():
    from migx_explore.widgets.explorer import Explorer

    return Explorer(_session())


def _text(html: str) -> str:
    import re

    return re.sub(r"<[^>]+>", "", html)


def test_explorer_opens_on_the_first_pass_that_changed_something(ex):
    s = ex.session
    first_changed = next(i for i in s.visible() if s.trace.records[i].changed)
    assert s.position == first_changed and first_changed != s.visible()[0]
    assert f"{s.visible().index(first_changed) + 1} / " in ex.stepper.position.value
    assert ex.views.drawn("diff").startswith("<svg")
    assert "migx-diff-graph" in ex.views.graph._dom_classes
    assert "<table" in ex.views.stats.value
    assert not ex.errors.messages
    assert ex.progress.label.value.startswith("loaded program (")
    assert ex.last_load["total_s"] > 0 and f"{ex.last_load['trace_s']:.2f} s" in ex.progress.label.value
    assert "No GPU timing here" in ex.gpu.status.value or not ex.gpu.reason


def test_buttons_and_slider_step(ex):
    s = ex.session
    ex.stepper.first.click()
    ex.stepper.next.click()
    ex.stepper.next.click()
    assert s.position == s.visible()[2] and ex.stepper.slider.value == 2
    ex.stepper.prev.click()
    assert ex.stepper.slider.value == 1
    ex.stepper.last.click()
    assert s.position == s.visible()[-1] and ex.stepper.slider.value == ex.stepper.slider.max
    ex.stepper.slider.value = 3
    assert s.position == s.visible()[3]
    ex.stepper.first.click()
    assert s.position == s.visible()[0]


def test_key_box_steps_and_clears(ex):
    ex.stepper.keys.value = "f"
    ex.stepper.keys.value = "n"
    ex.stepper.keys.value = "n"
    assert ex.stepper.keys.value == "" and ex.stepper.slider.value == 2
    ex.stepper.keys.value = "p"
    assert ex.stepper.slider.value == 1
    ex.stepper.keys.value = "l"
    assert ex.stepper.slider.value == ex.stepper.slider.max
    ex.stepper.keys.value = "z"  # unmapped keys do nothing
    assert ex.stepper.slider.value == ex.stepper.slider.max and not ex.errors.messages


def test_stats_and_diff_follow_the_step(ex):
    ex.goto(IDENT)
    stats = _text(ex.views.stats.value)
    assert IDENT in stats and "6 → 5 (-1)" in stats
    svg = ex.views.drawn("diff")
    assert "st_removed" in svg
    ex.next()
    assert _text(ex.views.stats.value) != stats and ex.views.drawn("diff") != svg
    row = ex.tree._pool[("pass", ex.session.current.path)].box
    assert "migx-current" in row._dom_classes


def test_unchecking_a_pass_retraces_and_updates(ex):
    ex.goto(IDENT)
    before = ex.views.stats.value
    box = ex.tree.checkbox(IDENT)
    assert "migx-pass-checkbox" in box._dom_classes and "migx-path-required-eliminate_identity-1" in box._dom_classes
    box.value = False
    s = ex.session
    assert s.current.path == IDENT and s.current.status == "disabled"
    assert "disabled by the user" in _text(ex.views.stats.value) and ex.views.stats.value != before
    assert "st_removed" not in ex.views.drawn("diff")  # redrawn: a disabled pass changes nothing
    row = ex.tree._pool[("pass", IDENT)].box
    assert "migx-disabled" in row._dom_classes and "migx-changed" not in row._dom_classes
    # the identity now goes away later: eliminate_identity#2 changes instead (traced in the background)
    assert ex.wait(60)
    assert s.trace.find("required.eliminate_identity#2").changed
    assert "migx-changed" in ex.tree._pool[("pass", "required.eliminate_identity#2")].box._dom_classes
    box.value = True
    assert s.trace.find(IDENT).changed and not ex.errors.messages


def test_pipeline_checkbox_disables_a_whole_pipeline(ex):
    cb = ex.tree.checkbox("fusion")
    assert "migx-pipeline-checkbox" in cb._dom_classes
    cb.value = False
    recs = [r for r in ex.session.trace.top_level() if r.pipeline == "fusion"]
    assert recs and all(r.status == "disabled" for r in recs)
    assert "pipeline disabled" in ex.tree._pool[("pipeline", "fusion")].info.value


def test_filter_and_hide_unchanged_drive_tree_and_stepper(ex):
    ex.tree.filter.value = "eliminate_identity"
    shown = ex.tree.visible_paths()
    assert shown and all("eliminate_identity" in p for p in shown)
    assert all("eliminate_identity" in ex.session.trace.records[i].path for i in ex.session.visible())
    assert "eliminate_identity" in ex.session.current.path  # snapped onto a visible pass
    ex.tree.filter.value = ""
    ex.tree.hide_unchanged.value = True
    shown = ex.tree.visible_paths()
    assert IDENT in shown and all(ex.session.trace.find(p).changed for p in shown)
    ex.next()
    assert ex.session.current.changed


def test_tree_name_click_goes_to_the_pass(ex):
    ex.tree.goto_button(IDENT).click()
    assert ex.session.current.path == IDENT
    assert ex.stepper.position.value.endswith(f"{IDENT}</b>")


def test_pipeline_header_collapses(ex):
    head = ex.tree._pool[("pipeline", "required")]
    head.goto.click()
    assert not any(p.startswith("required.") for p in ex.tree.visible_paths())
    head.goto.click()
    assert IDENT in ex.tree.visible_paths()


def test_view_selector_draws_each_pane_lazily(ex):
    ex.goto(IDENT)
    assert ex.views.text.value == ""  # not drawn until selected
    ex.views.select.value = "text"
    assert "identity" in ex.views.text.value
    assert ex.views.graph.layout.display == "none" and ex.views.text.layout.display is None
    ex.views.select.value = "side_by_side"
    assert "cluster_b_panel" in ex.views.drawn("side_by_side")
    ex.views.select.value = "focus"
    ex.views.hops.value = 0
    assert ex.views.drawn("focus").startswith("<svg")
    relu = next(r.id for r in ex.session.after().module("main").instrs if r.op.name == "relu")
    ex.views.centre.value = f"i{relu}"  # as the node's SVG title shows it
    focused = ex.views.drawn("focus")
    assert f"iid_{relu}" in focused and "st_" in focused and not ex.errors.messages
    ex.views.select.value = "metrics"
    assert "migx-metrics-chart" in ex.views.metrics.svg


def test_bad_focus_centre_is_reported_not_raised(ex):
    ex.views.select.value = "focus"
    ex.views.centre.value = "abc"
    assert "centre: write instruction ids" in ex.errors.text


def test_user_pass_failure_shows_in_the_error_box():
    from migx_explore.widgets.explorer import Explorer

    s = _session()

    def broken(module):
        raise ValueError("boom")

    s.insert_pass(broken, after="required.normalize_ops")
    ex = Explorer(s)
    assert "boom" in ex.errors.text and "required.broken" in ex.errors.text
    row = ex.tree._pool[("pass", "required.broken")].box
    assert "migx-failed" in row._dom_classes
    later = ex.tree._pool[("pass", "fusion.fuse_pointwise_reduce")].box
    assert "migx-not-run" in later._dom_classes


def test_user_rule_matches_show_in_stats():
    from migx_explore.widgets.explorer import Explorer

    def neg_exp(module, r):
        module.replace(r.root, Op("recip"), [module.insert_instruction(r.root, Op("exp"), [r["x"]])])

    rule = rw.rule(
        "exp_neg_to_recip_exp", mt.name("exp")(mt.arg(0)(mt.name("neg")(mt.arg(0)(mt.any_().bind("x"))))), neg_exp
    )
    s = _session()
    path = s.insert_pass(rule, after="required.normalize_ops")  # before fusion hides neg/exp in a kernel
    ex = Explorer(s)
    ex.goto(path)
    assert "rule matches" in ex.views.stats.value and ex.tree._pool[("pass", path)].row.user


def test_callback_errors_are_shown_never_swallowed(ex):
    def explode(_b):
        raise RuntimeError("callback exploded")

    btn = ipywidgets.Button()
    btn.on_click(ex.errors.guard(explode, "test"))
    btn.click()
    assert "test: internal error RuntimeError: callback exploded" in ex.errors.text
    assert "traceback" in ex.errors.widget.value


def test_picker_reports_a_missing_selection_and_a_bad_path():
    from migx_explore.widgets.explorer import Explorer

    ex = Explorer()
    ex.picker.load_button.click()
    assert "pick a built-in example" in ex.errors.text
    ex.picker.path.value = "/nonexistent/model.onnx"
    ex.picker.load_button.click()
    assert "model.onnx" in ex.errors.text
    with pytest.raises(SessionError, match="no model loaded"):  # a known error: one line in the box
        ex.next()


def test_picker_loads_an_onnx_file_with_symbolic_dims(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from migx_explore.widgets.explorer import Explorer

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g), path)
    ex = Explorer()
    ex.picker.path.value = str(path)
    assert ex.picker.dims.value == "x=1,4" and "symbolic" in ex.picker.inputs_note.value
    ex.picker.dims.value = "x=3,4"
    ex.picker.load_button.click()
    assert not ex.errors.messages, ex.errors.text
    assert ex.session is not None and "{3, 4}" in ex.session.initial.text


def test_explorer_displays_as_its_widget(ex):
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "migx-explorer" in ex.widget._dom_classes


def test_import_does_not_load_ipywidgets():
    import subprocess
    import sys

    code = (
        "import sys, migx_explore, migx_explore.widgets, migx_explore.widgets.queries, "
        "migx_explore.widgets.content; assert 'ipywidgets' not in sys.modules, 'ipywidgets imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- GPU panel -----------------------------------------------------------------------------------
def _timing_result():
    from migx_explore.gpu.timing import KernelTime, ModeTiming, Stats, TimingResult

    kernels = [
        KernelTime(f"@{k} gpu::code_object", f"kernel_{k}", "blas" if k % 3 == 0 else "kernel", 10.0 + k)
        for k in range(20)
    ]
    eager = ModeTiming(
        "eager",
        Stats(400.0, 380.0, 450.0, 100),
        Stats(900.0, 850.0, 990.0, 25),
        Stats(300.0, 290.0, 320.0, 100),
        40,
        kernels,
    )
    graph = ModeTiming(
        "graph", Stats(250.0, 240.0, 270.0, 100), Stats(600.0, 580.0, 650.0, 25), Stats(20.0, 18.0, 25.0, 100), 1
    )
    return TimingResult({"eager": eager, "graph": graph}, kernels=30, blas_calls=10, graph_nodes=40)


def test_timing_view_tables_and_figure():
    from migx_explore.widgets import timing_view

    r = _timing_result()
    assert timing_view.speedup(r) == pytest.approx(1.6)
    html = timing_view.table_html(r)
    assert "graph capture (one launch)" in html and "<b>1.60x</b>" in html and "40 graph nodes" in html
    assert "7.00" in timing_view.summary(r)  # (300 - 20) / 40 µs saved per eager launch
    from migx_explore.gpu_bridge import TimingRun

    runs = timing_view.runs_html([TimingRun("dynamic_shapes,required", r)])
    assert "<code>dynamic_shapes,required</code>" in runs and "400.0" in runs
    svg = timing_view.figure_svg(r)
    assert svg.startswith("<svg") and "latency per mode" in svg and "slowest kernels" in svg


def test_gpu_panel_without_a_gpu_says_why(ex, monkeypatch):
    from migx_explore import gpu_bridge
    from migx_explore.widgets.gpu_panel import GpuPanel

    monkeypatch.setattr(gpu_bridge, "unavailable_reason", lambda: "no usable GPU stack (test)")
    panel = GpuPanel(ex.errors, lambda: ex.session)
    assert "No GPU timing here" in panel.status.value and "no usable GPU stack (test)" in panel.status.value
    assert panel.run_button.disabled
    with pytest.raises(gpu_bridge.GpuUnavailable, match="no usable GPU stack"):
        panel.run()


def test_gpu_panel_times_through_the_fake_backend():
    """The whole panel path (compile with progress, a run per mode, table and figure) on the
    recording fake runtime, so it is exercised where no GPU exists."""
    from fake_gpu import fake_gpu

    from migx_explore.widgets.explorer import Explorer

    with fake_gpu():
        ex = Explorer(Session.from_text(SRC, numeric=False))
        assert not ex.gpu.run_button.disabled and "GPU ready" in ex.gpu.status.value
        ex.gpu.iters.value, ex.gpu.warmup.value = 2, 0
        ex.gpu.run_button.click()
        assert not ex.errors.messages, ex.errors.text
        assert "graph capture (one launch)" in ex.gpu.table.value
        assert ex.gpu.plot.value.startswith("<svg")
        assert ex.gpu.progress_label.value.startswith("done:")
        result = gpu_bridge.session_timing(ex.session)
        assert list(ex.session.timings) == [ex.session.config.identity()]
        assert set(result.modes) == {"eager", "graph"} and ex.gpu.summary().startswith("eager:")


def test_a_render_failure_is_shown_in_the_pane_and_the_error_box(monkeypatch):
    from migx_explore.render import GraphvizNotFoundError
    from migx_explore.widgets import content as content_mod
    from migx_explore.widgets.explorer import Explorer

    def no_dot(*_a, **_k):
        raise GraphvizNotFoundError("the Graphviz `dot` executable was not found on PATH")

    monkeypatch.setattr(content_mod, "graph_svg", no_dot)
    ex = Explorer(_session())  # still builds: stepping, stats and the text views work without dot
    assert "Cannot draw this view" in ex.views.drawn("diff")
    assert "draw Diff: the Graphviz `dot` executable was not found" in ex.errors.text
    ex.views.select.value = "text"
    ex.goto(IDENT)
    assert "identity" in ex.views.text.value and "6 → 5" in ex.views.stats.value


def test_make_session_accepts_names_protos_bytes_and_sessions():
    from migx_explore import models
    from migx_explore.widgets.picker import make_session

    proto = models.get_model("mlp")
    by_proto = make_session(proto, numeric=False)
    by_bytes = make_session(proto.SerializeToString(), numeric=False, name="mlp bytes")
    by_name = make_session("mlp", numeric=False)
    assert by_proto.initial.text == by_bytes.initial.text == by_name.initial.text
    assert by_bytes.name == "mlp bytes" and make_session(by_name) is by_name
    with pytest.raises(TypeError, match="built-in model name"):
        make_session(3.14)


def test_waterfall_panel_shows_launch_deltas_without_a_gpu():
    from migx_explore.widgets.explorer import Explorer

    ex = Explorer(Session.from_model("yolo", numeric=False))
    ex.waterfall.by.value = "pipeline"
    wf = ex.waterfall.run()
    assert "-fusion" in ex.waterfall.table.value and "<svg" in ex.waterfall.plot.value
    assert {r["variant"] for r in wf.rows()} == {"(all passes)", "-optimize_rewrite", "-fusion"}
    assert ex.errors.messages == []


def test_picker_precision_adds_the_quantize_stage():
    from migx_explore.widgets.explorer import Explorer

    ex = Explorer()
    ex.picker.builtin.value = "mlp"
    ex.picker.precision.value = "fp16"
    ex.picker.load_button.click()
    assert not ex.errors.messages, ex.errors.text
    s = ex.session
    assert s.config.options.precision == "fp16" and s.pipelines[0].name == "quantize"
    assert any(r.path == "quantize.truncate_float" for r in s.trace.records)


def test_tree_tooltip_names_the_migraphx_source_and_conformance():
    from migx_explore.widgets.tree import pass_info_text

    text = pass_info_text("simplify_algebra")
    assert "MIGraphX: src/simplify_algebra.cpp" in text and "MIGraphX tests: " in text
    assert pass_info_text("no_such_pass") == ""
