"""The explorer's front-end widgets still follow the kernel when their ES modules load late.

anywidget gives each model 2 s from its creation in the browser to bind its module, then drops
every later message from the kernel to it. On a loaded machine (cold starts, CI) the graph view's
module was bound late and clicking Diff drew nothing, in 2 of ~13 runs of the scale test. Here
every module load is held 2.5 s (a busy main thread, as on such a machine), which forced that on
every run before the widgets' state moved to plain models (widgets/hosted.py): the graph view,
its view class, the metrics chart and a step must all still reach the page."""

from __future__ import annotations

from tests.browser.notebook_files import write_notebook

CODE = "import migx_explore\nex = migx_explore.explore('mlp')\nex"

# Every ES module anywidget loads goes through a blob URL: hold the main thread 2.5 s there.
SLOW_MODULES_JS = """ms => { const make = URL.createObjectURL;
  URL.createObjectURL = (blob) => {
    if (blob && blob.type === 'text/javascript') { const t = performance.now(); while (performance.now() - t < ms) {} }
    return make(blob); }; }"""

DRAWING_JS = "s => [...s.querySelectorAll('g.node > title')].map(t => t.textContent).join('|')"


def test_widgets_follow_the_kernel_when_modules_bind_late(open_notebook, run_all, tmp_path):
    src = write_notebook(tmp_path / "late_modules.ipynb", CODE)
    page = open_notebook(src)
    page.set_viewport_size({"width": 1280, "height": 800})
    raised: list[str] = []
    page.on("pageerror", lambda e: raised.append(str(e)))
    page.evaluate(SLOW_MODULES_JS, 2500)
    run_all(page)
    ex = page.locator(".migx-explorer").first

    # the first drawing, and the view class the kernel set after the widget was made
    drawn = ex.locator(".migx-graph-view.migx-diff-graph .migx-gv-canvas svg")
    drawn.locator("g.node").first.wait_for(state="visible", timeout=60_000)
    # the race was forced: anywidget gave up on at least one model (else this tests nothing)
    page.wait_for_function("() => true")  # let queued page errors arrive
    assert "[anywidget] Failed to initialize model." in raised, raised

    # a step: the next drawing arrives too
    first = drawn.first.evaluate(DRAWING_JS)
    ex.locator("button.migx-next").click()
    page.wait_for_function(
        "([root, js, old]) => { const s = root.querySelector('.migx-graph-view .migx-gv-canvas svg');"
        " return s && eval(js)(s) !== old; }",
        arg=[ex.element_handle(), DRAWING_JS, first],
        timeout=60_000,
    )

    # the metrics chart (another hosted widget) draws when its view is picked
    ex.locator(".migx-view-select button", has_text="IR metrics").click()
    ex.locator(".migx-metrics svg.migx-metrics-chart").wait_for(state="visible", timeout=60_000)
    assert not page.page_errors, page.page_errors
