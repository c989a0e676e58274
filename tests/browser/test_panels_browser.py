"""The explorer's panels (widgets/panel.py, built from explorer.PANELS) in a real JupyterLab +
Chromium: every panel is on the page in the list's order, the CSS each panel module carries is
in the page's stylesheets and applies, the GPU panel starts open, and the waterfall panel opens
and runs from its own button."""

from __future__ import annotations

from tests.browser.notebook_files import write_notebook

CODE = "import migx_explore\nex = migx_explore.explore('mlp')\nex"

HAS_RULE_JS = """sel => [...document.styleSheets].some(s => {
  try { return [...s.cssRules].some(r => (r.selectorText || '').includes(sel)); } catch (e) { return false; } })"""


def test_panels_are_placed_styled_and_run(open_notebook, run_all, tmp_path):
    src = write_notebook(tmp_path / "panels.ipynb", CODE)
    page = open_notebook(src)
    page.set_viewport_size({"width": 1280, "height": 900})
    run_all(page)
    ex = page.locator(".migx-explorer").first
    ex.locator(".migx-diff-graph svg g.node").first.wait_for(state="visible", timeout=60_000)

    order = ex.evaluate(
        "e => [...e.querySelectorAll('.migx-gpu, .migx-waterfall, .migx-study')]"
        ".map(p => ['migx-gpu', 'migx-waterfall', 'migx-study'].find(c => p.classList.contains(c)))"
    )
    assert order == ["migx-gpu", "migx-waterfall", "migx-study"]
    for rule in (".migx-gpu-unavailable", ".migx-timing-table", ".migx-recipe pre"):  # moved into the panels
        assert page.evaluate(HAS_RULE_JS, rule), rule
    assert ex.locator("button.migx-time").first.is_visible()  # the GPU panel is `opened`
    assert not ex.locator("button.migx-waterfall-run").first.is_visible()  # the sweeps start closed

    ex.locator("button.migx-recipe-button").first.click()
    spec = ex.locator(".migx-recipe pre.migx-recipe-spec").first
    spec.wait_for(state="visible", timeout=30_000)
    assert spec.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"  # the recipe panel's CSS
    assert ex.locator(".migx-report-path input").first.input_value() == "mlp_report.html"  # its on_session

    ex.locator(".migx-waterfall").get_by_text("Waterfall: what each pass is worth").first.click()
    run = ex.locator("button.migx-waterfall-run").first
    run.wait_for(state="visible", timeout=30_000)
    ex.locator(".migx-waterfall-by select").first.select_option(label="each sub-pipeline disabled")
    run.click()
    table = ex.locator(".migx-waterfall-table-box table.migx-waterfall-table").first
    table.wait_for(state="visible", timeout=120_000)
    assert "(all passes)" in table.inner_text()
    ex.locator(".migx-waterfall-plot svg").first.wait_for(state="attached", timeout=30_000)  # set after the table
    assert ex.locator(".migx-error").count() == 0
