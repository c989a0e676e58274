"""The Model Explorer export in the real Model Explorer (issue 42): its own server on 127.0.0.1
(`python -m model_explorer --extensions=migx_explore`, started by our launcher), Debian Chromium
through Playwright. An exporter-style built-in model (bert_encoder: torch.onnx node names, so its
layers are the model's modules) is traced and exported once.

Model Explorer draws graphs with WebGL, so what the page shows is read from its DOM panels (graph
info, node-data providers), from the state it writes into its own URL (expanded layers), and, for
the compare view's diff highlights, from the pixels of the left pane: the "deleted" border colour
of our mapping file appears there only once the mapping is loaded.
"""

from __future__ import annotations

import io
import json
import os
import urllib.parse

import pytest

pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed (the [model-explorer] extra)")

from migx_explore.model_explorer import export_trace  # noqa: E402
from migx_explore.model_explorer.launch import page_url, start_server  # noqa: E402
from migx_explore.render import style as S  # noqa: E402
from migx_explore.session import Session  # noqa: E402
from tests.browser.notebook_files import write_notebook  # noqa: E402

PASS = "optimize_rewrite.optimize_module"  # folds and removes across every layer of the encoder
LOAD_MS = 180_000  # a 2-core CI machine shared with other jobs: generous, but bounded


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("me") / "bert")
    e = export_trace(Session.from_model("bert_encoder", numeric=False), folder)
    return e


@pytest.fixture(scope="module")
def server():
    srv = start_server(timeout_s=120)
    yield srv
    srv.stop()


@pytest.fixture
def me_page(browser, server):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    # Nothing leaves the machine: the page's one outside request (a web font) is refused.
    pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(server.base) else r.abort())
    pg.page_errors = []
    pg.on("pageerror", lambda e: pg.page_errors.append(str(e)))
    yield pg
    ctx.close()


def _ui_state(pg) -> dict:
    data = urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query)["data"][0]
    return json.loads(data)["uiState"]


def _pass(e, path: str):
    return next(p for p in e.passes if p.path == path)


def test_pass_graph_loads_with_layers_and_overlay(exported, server, me_page):
    pg = me_page
    p = _pass(exported, PASS)
    prov = os.path.join(exported.folder, exported.node_data["provenance"])
    pg.goto(page_url(server.base, exported.folder, p.graph, overlays=[prov], label=exported.label))
    pg.get_by_text("op node count").wait_for(timeout=LOAD_MS)
    info = pg.locator("body").inner_text()
    assert PASS in info and "optimize_rewrite" in info  # our graph-level attributes: this pass's graph
    assert f"+{p.added} -{p.removed} ~{p.changed}" in info
    # the overlay: Model Explorer lists the node-data run by the name the file gives it
    pg.get_by_text("created by pass #").first.wait_for(timeout=LOAD_MS)
    # layers from the model's scopes: collapsed at first ("bert"), expanded by Model Explorer's own
    # button, which writes the expanded layers into the page's URL state
    assert _ui_state(pg)["paneStates"][0]["deepestExpandedGroupNodeIds"] == []
    opened: list[str] = []
    for _ in range(LOAD_MS // 2000):  # the button does nothing until the renderer is ready: retry
        pg.locator(".mat-icon-container.expand-all").first.click()
        pg.wait_for_timeout(2000)
        opened = _ui_state(pg)["paneStates"][0]["deepestExpandedGroupNodeIds"]
        if opened:
            break
    assert any(g.startswith("bert/encoder/layer.0/") and g.endswith("___group___") for g in opened), opened
    # and another pass graph of the same collection opens from the selector's data (the input)
    pg.goto(page_url(server.base, exported.folder, exported.input_graph, label=exported.label))
    pg.get_by_text("op node count").wait_for(timeout=LOAD_MS)
    info = pg.locator("body").inner_text()
    assert exported.input_graph in info and PASS not in info
    assert not pg.page_errors


def _count(png: bytes, rgb: tuple[int, int, int], box: tuple[int, int, int, int], tol: int = 24) -> int:
    from PIL import Image

    raw = Image.open(io.BytesIO(png)).convert("RGB").crop(box).tobytes()
    px = zip(raw[0::3], raw[1::3], raw[2::3])
    return sum(1 for p in px if abs(p[0] - rgb[0]) <= tol and abs(p[1] - rgb[1]) <= tol and abs(p[2] - rgb[2]) <= tol)


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[k : k + 2], 16) for k in (1, 3, 5))


def test_compare_view_highlights_the_pass_changes(exported, server, me_page):
    """The launcher's compare page shows the pass's change on open, with no Sync menu: the left
    pane (the pass's before graph) has what it removed filled red, the right pane what it made
    green, in the layers the launcher opens."""
    pytest.importorskip("PIL", reason="Pillow reads the screenshot's pixels")
    from migx_explore.model_explorer import open_in_model_explorer

    pg = me_page
    p = _pass(exported, PASS)
    h = open_in_model_explorer(exported.folder, PASS, compare=True, browser=False)
    assert h.server.base == server.base  # the one server of this kernel
    pg.goto(h.url)
    pg.get_by_text("op node count").nth(1).wait_for(timeout=LOAD_MS)  # both panes drew their graph
    body = pg.locator("body").inner_text()
    assert f"{exported.label} | {p.before}" in body and f"{exported.label} | {p.graph}" in body
    assert p.before.endswith("(before)") and "before pass" in body  # the left pane's graph-level attributes
    # each pane's canvas (its side panel starts at a third of the pane)
    left, right = (0, 120, 320, 880), (700, 120, 1020, 880)
    removed, added = _rgb(S.STATUS_STYLE[S.REMOVED].fill), _rgb(S.STATUS_STYLE[S.ADDED].fill)
    counts = (0, 0, 0)
    for _ in range(60):  # until the opened layers are laid out and drawn
        pg.wait_for_timeout(1000)
        shot = pg.screenshot()
        counts = (_count(shot, removed, left, 8), _count(shot, added, right, 8), _count(shot, removed, right, 8))
        if counts[0] > 50 and counts[1] > 50:
            break
    assert counts[0] > 50 and counts[1] > 50, counts  # removals on the left, additions on the right
    assert counts[2] < counts[0], counts  # and the right pane has no removal's colour to speak of
    assert not pg.page_errors


# The kernel's webbrowser.open writes the address to a file here instead of starting a browser
# on the test machine; the test opens the same address from the widget's link.
BUTTON_CODE = """import os, migx_explore
os.environ["BROWSER"] = {browser!r}
ex = migx_explore.explore("mlp")
ex"""
RECORD_URL = "import sys\nwith open(sys.argv[1], 'a') as f:\n    f.write(sys.argv[2] + '\\n')\n"

POSITION_JS = "() => { const p = document.querySelector('.migx-explorer .migx-position'); return p && p.textContent; }"


def _position_path(page) -> str:
    """The pass the widget shows ("k / N · path")."""
    page.wait_for_function(f"() => ({POSITION_JS})()?.includes('·')", timeout=60_000)
    return page.evaluate(POSITION_JS).split("·", 1)[1].strip()


def _open_from_widget(page, old_href: str) -> tuple[str, object]:
    """Click Open in Model Explorer; returns the link it shows and the page that link opens."""
    ex = page.locator(".migx-explorer").first
    ex.locator("button.migx-model-explorer").click()
    link = ex.locator(".migx-me-link a")
    page.wait_for_function(
        "old => { const a = document.querySelector('.migx-explorer .migx-me-link a'); return a && a.href !== old; }",
        arg=old_href,
        timeout=LOAD_MS,  # the first click exports the trace and starts Model Explorer's server
    )
    href = link.get_attribute("href")
    with page.context.expect_page(timeout=30_000) as opened:
        link.click()
    return href, opened.value


def test_widget_button_opens_the_pass_on_screen(open_notebook, run_all, tmp_path):
    import re
    import sys

    opened_log, script = tmp_path / "opened.txt", tmp_path / "record_url.py"
    script.write_text(RECORD_URL)
    code = BUTTON_CODE.format(browser=f"{sys.executable} {script} {opened_log} %s")
    src = write_notebook(tmp_path / "me_button.ipynb", code)
    page = open_notebook(src)
    # Model Explorer's page asks for a web font: nothing but loopback is reached
    page.context.route("**/*", lambda r: r.continue_() if r.request.url.startswith("http://127.0.0.1") else r.abort())
    run_all(page)
    ex = page.locator(".migx-explorer").first
    path = _position_path(page)

    # compare (ticked by default): the pass's before | after, side by side
    href, me = _open_from_widget(page, "")
    me.get_by_text("op node count").nth(1).wait_for(timeout=LOAD_MS)  # both panes drew their graph
    body = me.locator("body").inner_text()
    assert re.search(rf"mlp \| \d+ {re.escape(path)} \(before\)", body), body[:2000]
    assert re.search(rf"mlp \| \d+ {re.escape(path)}\n", body), body[:2000]
    assert opened_log.read_text().split() == [href]  # the kernel opened the same page: one click
    me.close()

    # another pass, compare unticked: that pass's graph alone
    ex.locator("button.migx-prev").click()
    page.wait_for_function(f"old => ({POSITION_JS})() && !({POSITION_JS})().endsWith(old)", arg=path, timeout=60_000)
    other = _position_path(page)
    ex.locator(".migx-me-compare input").uncheck()
    _, me = _open_from_widget(page, href)
    me.get_by_text("op node count").first.wait_for(timeout=LOAD_MS)
    body = me.locator("body").inner_text()
    assert re.search(rf"\d+ {re.escape(other)}\b", body) and "(before)" not in body, body[:2000]
    assert re.search(rf"\bpass\s+{re.escape(other)}\s", body), body[:2000]  # its graph-level attributes
    me.get_by_text("created by pass #").first.wait_for(timeout=LOAD_MS)  # one pane: the overlays load
    me.close()
    assert not page.page_errors, page.page_errors
