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
    pytest.importorskip("PIL", reason="Pillow reads the screenshot's pixels")
    pg = me_page
    p = _pass(exported, PASS)
    url = page_url(
        server.base,
        exported.folder,
        p.graph,
        before=p.before,
        label=exported.label,
        # one changed layer open on each side: drawn at a readable scale, the highlights are
        # whole borders, not sub-pixel lines
        layers=p.layers_after[:1],
        layers_before=p.layers_before[:1],
    )
    pg.goto(url)
    pg.get_by_text("op node count").nth(1).wait_for(timeout=LOAD_MS)  # both panes drew their graph
    body = pg.locator("body").inner_text()
    assert f"{exported.label} | {p.before}" in body and f"{exported.label} | {p.graph}" in body
    # the left pane's canvas (its side panel starts at a third of the pane)
    left = (0, 120, 320, 880)
    red = _rgb(S.STATUS_STYLE[S.REMOVED].border)
    pg.wait_for_timeout(3000)  # layout of the opened layers settles
    before_upload = _count(pg.screenshot(), red, left)
    pg.locator("sync-navigation-button").first.click()
    pg.get_by_text("Upload mapping from computer").click()  # the mode the uploaded file is for
    pg.locator("input.upload-mapping-input").set_input_files(os.path.join(exported.folder, p.mapping))
    pg.get_by_text(os.path.basename(p.mapping)).first.wait_for(timeout=30_000)
    pg.keyboard.press("Escape")
    deadline = 60
    after_upload = 0
    for _ in range(deadline):
        pg.wait_for_timeout(1000)
        after_upload = _count(pg.screenshot(), red, left)
        if after_upload > before_upload + 50:
            break
    assert after_upload > before_upload + 50, (before_upload, after_upload)
    assert not pg.page_errors
