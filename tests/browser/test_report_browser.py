"""The HTML report of the built-in yolov8 (796 instructions) opened from file:// in Chromium with
the network blocked: it stays under 5 MB and is ready in under 2 s; the pipeline tree shows every
pass with no-op passes dimmed and disabled ones struck; a fusion pass's graph diff shows its change
at a readable zoom (region navigation), expands its fused nodes, and has a rewrite summary and a
text diff; the GPU timing section holds the table (timed on the recording fake backend). No
JupyterLab: the report needs no server."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from migx_explore import pass_changes
from migx_explore.report import write_report

MODEL = "yolov8"
MAX_BYTES = 5 * 10**6
REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-artifacts"

# Changed nodes of the drawing inside the canvas, and the smallest on-screen label font (px).
IN_VIEW_JS = """sel => {
  const c = document.querySelector('.rep-graph-view .migx-gv-canvas'), b = c.getBoundingClientRect();
  let inside = 0, total = 0, font = 1e9;
  for (const n of c.querySelectorAll(sel)) {
    const r = n.getBoundingClientRect();
    total += 1;
    if (r.left >= b.left - 1 && r.right <= b.right + 1 && r.top >= b.top - 1 && r.bottom <= b.bottom + 1) {
      inside += 1;
      for (const t of n.querySelectorAll('text')) font = Math.min(font, t.getBoundingClientRect().height);
    }
  }
  return [inside, total, font]; }"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from fake_gpu import fake_gpu

    from migx_explore.session import Session

    path = tmp_path_factory.mktemp("report") / f"{MODEL}.html"
    with fake_gpu():  # timing through the recording fake: CI has no GPU
        # numeric off: the check is the costly part of tracing and tests/explorer covers it
        s = Session.from_model(MODEL, numeric=False)
        info = write_report(
            s,
            str(path),
            gpu=True,
            iters=3,
            warmup=1,
            waterfall_by=None,
            command=f"migx-explore report {MODEL} --out {path.name} --gpu",
        )
    return s, path, info


@pytest.fixture
def offline_page(browser):
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000}, offline=True)
    requests: list[str] = []
    ctx.route(re.compile(r"^(https?|wss?)://"), lambda route: (requests.append(route.request.url), route.abort()))
    page = ctx.new_page()
    page.page_errors = []
    page.on("pageerror", lambda e: page.page_errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:")) else requests.append(r.url))
    page.blocked = requests
    yield page
    ctx.close()


def test_big_model_report_offline(report, offline_page):
    s, path, info = report
    page = offline_page
    assert s.initial.total_instructions() > 700
    assert info.bytes < MAX_BYTES, f"the report is {info.bytes / 1e6:.2f} MB"

    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    page.wait_for_selector(".rep-graph-view svg g.node", timeout=20_000)
    ready_ms = page.evaluate("() => performance.now()")
    assert ready_ms < 2000, f"first pass drawn after {ready_ms:.0f} ms"

    # the tree: every record, pipelines in order, no-op passes dimmed, disabled ones marked
    rows = page.locator(".rep-row")
    assert rows.count() == len(s.trace.records)
    heads = page.locator(".rep-pipeline").evaluate_all("els => els.map(e => e.dataset.pipeline)")
    assert heads == [pl.name for pl in s.pipelines]
    noop = page.locator(".rep-row.rep-noop").first
    changed = page.locator(".rep-row.rep-changed").first
    colour = "e => getComputedStyle(e.querySelector('.rep-name')).color"
    assert noop.evaluate(colour) != changed.evaluate(colour)
    disabled = page.locator(".rep-row.rep-disabled")
    assert disabled.count() == sum(1 for r in s.trace.records if r.status == "disabled") > 0
    page.locator(".rep-hide-noop-box").check()
    assert not noop.is_visible() and changed.is_visible()
    page.locator(".rep-hide-noop-box").uncheck()

    # the metrics strip: a dot per top-level pass that changed the IR, a click goes there
    dots = page.locator(".rep-m-dot")
    assert dots.count() == sum(1 for r in s.trace.top_level() if r.changed)
    dots.nth(1).click()
    i = dots.nth(1).get_attribute("data-i")
    page.wait_for_function(f"() => document.querySelector('.rep-pass').dataset.i === '{i}'")

    # a fusion pass: its rewrite summary, its text diff, and its change legible in the graph
    rec = s.trace.find("fusion.fuse_pointwise_reduce")
    page.locator(f'.rep-row[data-path="{rec.path}"]').click()
    page.wait_for_function(f"() => document.querySelector('.rep-pass').dataset.i === '{rec.index}'")
    page.wait_for_selector(".rep-graph-view svg g.node.st_added")
    summary = page.locator(".rep-rewrites li").all_inner_texts()
    assert summary == [r.label for r in pass_changes.rewrites(s, rec.path)] and any("→" in line for line in summary)
    assert page.locator(".rep-textdiff .add").count() > 0 and page.locator(".rep-textdiff .del").count() > 0
    assert f"{rec.index + 1}. {rec.path}" in page.locator(".rep-pass-title").inner_text()
    page.locator(".rep-region-next").click()
    page.wait_for_function("() => /^region 1 of \\d+/.test(document.querySelector('.rep-region-label').textContent)")
    page.wait_for_timeout(400)  # the focus move lands two animation frames later
    inside, total, font = page.evaluate(IN_VIEW_JS, ".rep-in-region")
    assert total > 0 and inside == total, f"{inside} of {total} nodes of the region in view"
    assert font >= 7, f"labels {font:.1f} px high: not legible"
    # a rewrite row of the summary: its first instance drawn before | after (docs/instances.md),
    # then a second click steps through its instances in the pass's graph
    first = pass_changes.rewrites(s, rec.path)[0]
    page.locator(".rep-rewrites li").first.click()
    page.wait_for_function("() => /click it again/.test(document.querySelector('.rep-region-label').textContent)")
    page.wait_for_selector(".rep-graph-view svg g.node.st_added")
    page.locator(".rep-rewrites li").first.click()
    page.wait_for_function("() => / instance \\d+ \\/ /.test(document.querySelector('.rep-region-label').textContent)")
    page.wait_for_timeout(400)
    inside, total, _ = page.evaluate(IN_VIEW_JS, ".rep-in-region")
    assert total > 0 and inside == total and first.label in page.locator(".rep-region-label").inner_text()
    # the scope tree (issue 36): the explorer's scopes with rewrite instances per scope; a click
    # folds / unfolds a scope and shows a rewrite instance drawn inside it
    tree = page.locator(".rep-scopes-section")
    assert tree.is_visible()
    shown = page.locator(".rep-scope-row:visible")
    tops = shown.count()
    assert tops > 0 and page.locator(".rep-scope-row.rep-scope-changed:visible").count() > 0
    closed = page.locator(".rep-scope-row:visible:not(.rep-scope-open)", has_text="▸").first
    parent = page.locator(f'.rep-scope-row[data-scope="{closed.get_attribute("data-scope")}"]')
    parent.click()
    assert shown.count() > tops and "▾" in parent.inner_text()
    parent.click()
    assert shown.count() == tops
    page.locator(".rep-scope-row.rep-scope-changed:visible").last.click()
    page.wait_for_function("() => /click it again/.test(document.querySelector('.rep-region-label').textContent)")
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "report-yolov8.png"))
    page.set_viewport_size({"width": 1280, "height": 800})
    page.locator(".rep-rewrites-section").evaluate("e => e.scrollIntoView({block: 'start'})")  # summary, scopes, graph
    page.wait_for_timeout(300)
    page.screenshot(path=str(SHOTS / "report-yolov8-1280x800.png"))
    if os.environ.get("MIGX_UPDATE_DOCS_IMAGES") == "1":  # docs/cli.md's picture, 256 colours
        from PIL import Image

        img = Image.open(SHOTS / "report-yolov8-1280x800.png").convert("RGB").quantize(256)
        img.save(REPO / "docs" / "images" / "report_yolov8.png", optimize=True)
    page.set_viewport_size({"width": 1500, "height": 1000})

    # expand / collapse swap the pre-drawn variants
    clusters = "() => document.querySelectorAll('.rep-graph-view svg g.cluster').length"
    before = page.evaluate(clusters)
    page.locator(".rep-graph-view .migx-gv-clusters").click()
    page.wait_for_function(f"() => ({clusters})() > {before}")
    assert page.locator(".rep-graph-view .migx-gv-clusters").inner_text() == "Collapse all"

    # GPU timing (the fake backend's numbers) and the reproduction record
    page.locator(".rep-tab[data-tab=gpu]").click()
    table = page.locator("#rep-tab-gpu .migx-timing-results")
    assert table.is_visible()
    assert "eager" in table.inner_text() and "graph capture" in table.inner_text()
    assert "fake" in page.locator("#rep-tab-gpu .rep-device").inner_text()
    page.locator(".rep-tab[data-tab=repro]").click()
    assert s.config.spec() in page.locator(".rep-repro-spec").inner_text()
    assert "--gpu" in page.locator(".rep-repro-command").inner_text()

    assert page.page_errors == []
    assert page.blocked == [], f"the report tried the network: {page.blocked[:3]}"
    text = path.read_text()
    assert str(REPO) not in text and str(path.parent) not in text  # no path of this machine
