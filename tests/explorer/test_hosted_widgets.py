"""The explorer's anywidgets get no message from the kernel once they are made (widgets/hosted.py):
anywidget drops every later message to a model whose module was bound more than 2 s after the
model was made, which lost the graph view's drawings on loaded machines (no graph after clicking
Diff). The kernel's state lives on a plain ipywidgets box; the anywidget child only draws."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

pytest.importorskip("anywidget")
pytest.importorskip("ipywidgets")


def _widgets():
    from migx_explore.widgets.dom_tools import ClickableSvg, ScrollTo
    from migx_explore.widgets.graph_view import GraphView

    return GraphView(), ClickableSvg(), ScrollTo()


def _record(widget) -> list:
    sent: list = []
    widget.comm.send = lambda data=None, *a, **k: sent.append(data)
    return sent


def test_kernel_state_is_on_a_plain_box_and_the_renderer_gets_no_message():
    graph, chart, scroller = _widgets()
    renderers = []
    for w in (graph, chart, scroller):
        assert w._model_name == "VBoxModel" and w._model_module == "@jupyter-widgets/controls"
        (r,) = w.children
        assert r._model_name == "AnyModel" and r.host == w.model_id
        assert r._esm.count("export default") == 1  # the hosted export, not the module's own
        renderers.append(_record(r))
    hosts = [_record(w) for w in (graph, chart, scroller)]

    graph.show("<svg><g class='node'><title>i1</title></g></svg>", regions=[[1]], region_index=0)
    graph.add_class("migx-diff-graph")
    graph.fit()
    chart.svg = "<svg class='migx-metrics-chart'></svg>"
    scroller.scroll(".migx-tree-row.migx-current")

    assert all(hosts), hosts  # each host sent its updates...
    assert not any(renderers), renderers  # ...and no anywidget model got one
    assert "svg" in str(hosts[0]) and "_dom_classes" in str(hosts[0])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the ES module")
def test_hosted_render_runs_against_the_host_model(tmp_path):
    """The export hosted.py adds: render() gets the host model (found through the widget
    manager) as its `model`, and its listeners go with the view."""
    from migx_explore.widgets.hosted import HOSTED_EXPORT

    module = textwrap.dedent(
        """
        function render({ model, el }) {
          el.text = "drawn " + model.get("svg");
          model.on("change:svg", () => { el.text = "redrawn " + model.get("svg"); });
          model.set("pane_size", [1, 2]);
          model.save_changes();
        }
        """
    )
    driver = textwrap.dedent(
        """
        import widget from "./module.mjs";
        const listeners = [];
        const host = { state: { svg: "A" }, saved: 0,
          get(k) { return this.state[k]; }, set(k, v) { this.state[k] = v; }, save_changes() { this.saved += 1; },
          on(n, f, ctx) { listeners.push([n, f, ctx]); },
          off(n, f, ctx) {
            for (let i = listeners.length - 1; i >= 0; i--) if (listeners[i][2] === ctx) listeners.splice(i, 1);
          } };
        const manager = { get_model: async (id) => { if (id !== "HOST") throw new Error(id); return host; } };
        const renderer = { get: (k) => (k === "host" ? "HOST" : undefined), widget_manager: manager };
        const el = {};
        const cleanup = await widget.render({ model: renderer, el });
        host.state.svg = "B"; listeners.forEach(([n, f]) => n === "change:svg" && f());
        const seen = el.text;
        cleanup();
        console.log(JSON.stringify([seen, host.state.pane_size, host.saved, listeners.length]));
        """
    )
    (tmp_path / "module.mjs").write_text(module + HOSTED_EXPORT)
    (tmp_path / "driver.mjs").write_text(driver)
    out = subprocess.run(["node", "driver.mjs"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '["redrawn B",[1,2],1,0]'
