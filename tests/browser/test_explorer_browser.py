"""The explorer in a real JupyterLab + Chromium: open 01_tour.ipynb, run all cells, step with the
next button, uncheck a pass, and check that the inline diff SVG and the stats follow."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOUR = REPO / "notebooks" / "01_tour.ipynb"
SHOT = REPO / "test-artifacts" / "explorer.png"


def _stats_pass(ex) -> str:
    """The pass path the stats table shows (its first row)."""
    return ex.locator(".migx-stats td").first.inner_text().strip()


# What a drawing shows (its nodes, their ids and diff classes), not how it is panned or zoomed.
DRAWING_JS = (
    "s => [...s.querySelectorAll('g.node, g.graph > title')]"
    ".map(n => n.id + ' ' + (n.getAttribute('class') || n.textContent)).join('|')"
)


def _diff_svg(ex) -> str:
    return ex.locator(".migx-diff-graph .migx-gv-canvas svg").first.evaluate(DRAWING_JS)


def _wait_position(page, k: int) -> str:
    """Until the stepper shows position k ("k / N · path") among the visible passes and the stats
    show the same pass (they can pass through an older record on the way); returns the path."""
    page.wait_for_function(
        "k => { const p = document.querySelector('.migx-explorer .migx-position');"
        r" return p && new RegExp('\\b' + k + ' / \\d+ · ').test(p.textContent); }",
        arg=k,
        timeout=30_000,
    )
    ex = page.locator(".migx-explorer").first
    path = ex.locator(".migx-position").inner_text().split("·", 1)[1].strip()
    page.wait_for_function(
        "want => { const td = document.querySelector('.migx-explorer .migx-stats td');"
        " return td && td.textContent.trim() === want; }",
        arg=path,
        timeout=30_000,
    )
    return path


def _screenshot(page, ex) -> None:
    """The explorer as the tour leaves it (at fusion.fuse_pointwise_reduce) under test-artifacts/
    (the README's docs/images/explorer.png is shot by test_pane_layout_browser.py at 1280x800)."""
    for command in ("application:toggle-left-area", "notebook:hide-all-cell-code"):
        page.evaluate(f"() => window.jupyterapp.commands.execute('{command}')")
    ex.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(800)
    SHOT.parent.mkdir(exist_ok=True)
    ex.screenshot(path=str(SHOT))
    assert SHOT.stat().st_size > 20_000


REGION_LABEL_JS = (
    "want => { const l = document.querySelector('.migx-explorer .migx-region-label');"
    " return l && l.offsetParent && new RegExp(want).test(l.textContent); }"
)


MARK_JS = """view => { const c = document.querySelectorAll(`.migx-explorer ${view} .migx-gv-minimap-current`);
  if (c.length !== 1) return false;
  const m = c[0].getBoundingClientRect(), b = c[0].parentElement.getBoundingClientRect();
  return m.width > 0 && m.left >= b.left - 1 && m.right <= b.right + 1 && m.top >= b.top - 1
    && m.bottom <= b.bottom + 1; }"""


# Every changed node of the drawing in view, on both sides of a comparison (one may have none).
ALL_IN_VIEW_JS = (
    "() => { const g = document.querySelector('.migx-explorer .migx-gv-compare');"
    " const m = /^(\\d+)\\/(\\d+)$/.exec(g.dataset.changedInView || '');"
    " return !!m && m[1] === m[2] && m[2] !== '0'; }"
)


def _regions_on_the_minimap_and_in_compare(page, ex) -> None:
    """The Diff view's minimap marks the change regions, the current one stronger; in Compare
    (A: the input program, B: this pass) ◀ ▶ step through the differing instances between A and
    B (docs/instances.md), redrawing both panels around each, and the minimap follows."""
    ex.locator(".migx-view-select button", has_text="Diff").first.click()
    page.wait_for_function(REGION_LABEL_JS, arg=r"region 1 of \d+", timeout=30_000)
    # one current mark, inside the minimap (measured in one go: a redraw replaces the marks)
    page.wait_for_function(MARK_JS, arg=".migx-diff-graph", timeout=30_000)
    assert ex.locator(".migx-diff-graph .migx-gv-minimap-region").count() >= 1

    ex.locator(".migx-view-select button", has_text="Compare").first.click()
    ex.locator(".migx-compare-a select").first.select_option(label="(input program)")
    page.wait_for_function(REGION_LABEL_JS, arg=r"instance 1 of ([2-9]|\d\d+)", timeout=60_000)
    # the view class the kernel sets reaches the page (it did not while the graph view's traits
    # were on its anywidget model, whose view drops later class changes: widgets/hosted.py)
    ex.locator(".migx-graph-view.migx-compare-graph").first.wait_for(state="visible", timeout=30_000)
    total = int(re.search(r"of (\d+)", ex.locator(".migx-region-label").inner_text()).group(1))
    panels = ex.locator(".migx-gv-compare .migx-gv-canvas svg")
    page.wait_for_function(
        "() => document.querySelectorAll('.migx-explorer .migx-gv-compare .migx-gv-minimap-current').length >= 1",
        timeout=30_000,
    )
    assert panels.count() >= 2
    page.wait_for_function(ALL_IN_VIEW_JS, timeout=30_000)  # region 1 centred in its panel
    both = "s => [...s].map(eval(js)).join('||')"
    before = ex.evaluate(f"(e, js) => ({both})(e.querySelectorAll('.migx-gv-compare .migx-gv-canvas svg'))", DRAWING_JS)
    ex.locator("button.migx-region-next").first.click()
    page.wait_for_function(REGION_LABEL_JS, arg=f"instance 2 of {total}", timeout=30_000)
    page.wait_for_function(  # the panels are cut around region 2 now
        f"([js, old]) => ({both})(document.querySelectorAll('.migx-explorer .migx-gv-compare .migx-gv-canvas svg'))"
        " !== old",
        arg=[DRAWING_JS, before],
        timeout=30_000,
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('.migx-explorer .migx-gv-compare "
        ".migx-gv-minimap-current')].some(m => m.dataset.region === '1')",
        timeout=30_000,
    )
    page.wait_for_function(ALL_IN_VIEW_JS, timeout=30_000)
    ex.locator("button.migx-region-prev").first.click()
    page.wait_for_function(REGION_LABEL_JS, arg=f"instance 1 of {total}", timeout=30_000)
    ex.locator(".migx-view-select button", has_text="Diff").first.click()  # the pass's own regions again
    page.wait_for_function(REGION_LABEL_JS, arg=r"region 1 of 1\b", timeout=30_000)


def test_step_and_toggle_in_jupyterlab(open_notebook, run_all):
    page = open_notebook(TOUR)
    # Tall enough that the whole widget fits in the notebook panel: an element screenshot of a
    # widget taller than its scrolling panel comes out clipped.
    page.set_viewport_size({"width": 1500, "height": 2000})
    run_all(page)
    ex = page.locator(".migx-explorer").first
    ex.locator(".migx-diff-graph svg g.node").first.wait_for(state="visible", timeout=60_000)
    _screenshot(page, ex)

    # Only visit passes that changed the IR, from the first one.
    hide = ex.locator(".migx-hide-unchanged input[type=checkbox]")
    if not hide.is_checked():
        hide.check()
    ex.locator("button.migx-first").click()
    current = _wait_position(page, 1)
    page.wait_for_function(  # the first pass's drawing replaced the tour's
        "() => !!document.querySelector('.migx-explorer .migx-diff-graph .migx-gv-canvas svg')", timeout=30_000
    )

    seen = [current]
    svgs = [_diff_svg(ex)]
    for k in range(2, 5):
        ex.locator("button.migx-next").click()
        current = _wait_position(page, k)
        seen.append(current)
        # the stats update first, the graph (drawn by graphviz) follows
        page.wait_for_function(
            "([js, old]) => { const s = document.querySelector('.migx-explorer .migx-diff-graph .migx-gv-canvas svg');"
            " return s && eval(js)(s) !== old; }",
            arg=[DRAWING_JS, svgs[-1]],
            timeout=30_000,
        )
        svgs.append(_diff_svg(ex))
        # each visited pass changed the IR: the merged diff marks added or removed nodes
        assert (
            ex.locator(
                ".migx-diff-graph svg g.node.st_added, .migx-diff-graph svg g.node.st_removed,"
                " .migx-diff-graph svg g.node.st_changed"
            ).count()
            > 0
        )
    assert len(set(seen)) == 4, seen
    assert len(set(svgs)) == 4, "the diff graph did not change between passes"
    assert re.search(r"\b4 / \d+", ex.locator(".migx-position").inner_text())
    # the tree highlights the pass the stepper is on
    token = re.sub(r"[^A-Za-z0-9_-]+", "-", current).strip("-")
    row = ex.locator(f".migx-tree-row.migx-path-{token}")
    assert "migx-current" in row.get_attribute("class")

    # The key box: p steps back, n forward again (JupyterLab leaves keys typed into a widget's
    # input alone, so they reach the kernel rather than the notebook's shortcuts).
    keys = ex.locator(".migx-keys input")
    keys.click()
    keys.press("p")
    assert _wait_position(page, 3) == seen[-2]
    keys.press("n")
    assert _wait_position(page, 4) == current
    _regions_on_the_minimap_and_in_compare(page, ex)

    # Uncheck the current pass: the trace recomputes, the pass shows as disabled, its diff is empty.
    stats_before = ex.locator(".migx-stats").inner_text()
    ex.locator(f".migx-pass-checkbox.migx-path-{token} input[type=checkbox]").uncheck()
    page.wait_for_function(
        "() => document.querySelector('.migx-explorer .migx-stats').textContent.includes('disabled by the user')",
        timeout=60_000,
    )
    assert _stats_pass(ex) == current
    assert ex.locator(".migx-stats").inner_text() != stats_before
    assert "migx-disabled" in row.get_attribute("class")
    page.wait_for_function(
        "() => { const s = document.querySelector('.migx-explorer .migx-diff-graph svg');"
        " return s && !s.querySelector('g.node.st_added, g.node.st_removed, g.node.st_changed'); }",
        timeout=30_000,
    )
    assert ex.locator(".migx-diff-graph svg g.node").count() > 0  # still the program, nothing marked

    assert not ex.locator(".migx-error").count(), ex.locator(".migx-error-box").inner_text()
    assert not page.page_errors, page.page_errors
