"""How long Model Explorer takes to open the yolov10n trace (1,608 instructions at the end) in
headless Chromium, the way the widget's button opens it, and where that time goes.

    python benchmarks/model_explorer_load.py [--runs N] [--chromium-args "--flag ..."]
    # needs ai-edge-model-explorer, playwright, psutil; runs offline (127.0.0.1 only)

For each page: the wall time from `goto` until Model Explorer's graph-info panel shows (every
pane's), and the CPU seconds spent meanwhile by the page's renderer process, the GPU process (on
a machine with no GPU, SwiftShader draws WebGL there, on the CPU) and Model Explorer's server.
Cases: a 3-node graph (the fixed cost of the page), the final graph read from the whole
collection (graphs.json, what `model-explorer out/y/graphs.json` loads), then through
`open_in_model_explorer` (the pass's own collection, views.py): the final graph, the
fuse_pointwise_reduce pass, and that pass's before | after compare; with --baseline, the same
pages of an earlier version's export, from its whole collection. The load average is printed
before and after: on the project's shared 2-core machine it decides most of the spread.

Results: docs/results/model_explorer_speed.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import psutil
from playwright.sync_api import sync_playwright

from migx_explore.model_explorer import export_trace, load_manifest, open_in_model_explorer
from migx_explore.model_explorer.launch import OPEN_LAYERS, page_url, start_server
from migx_explore.session import Session

TINY = "x = @param:x -> float32, {4}, {1}\n@0 = relu(x) -> float32, {4}, {1}\n@1 = @return(@0)\n"
PASS = "fuse_pointwise_reduce"


def cpu_by_process() -> dict[str, float]:
    """CPU seconds of this process's children, by kind (renderer, gpu, server, other)."""
    out: dict[str, float] = {}
    for c in psutil.Process().children(recursive=True):
        try:
            t = c.cpu_times()
            line = " ".join(c.cmdline())
        except psutil.Error:
            continue
        kind = (
            "server"
            if "model_explorer" in line
            else "gpu"
            if "--type=gpu" in line
            else "renderer"
            if "--type=renderer" in line
            else "other"
        )
        out[kind] = out.get(kind, 0.0) + t.user + t.system
    return out


def load_page(browser, base: str, url: str, panes: int) -> tuple[float, dict[str, float]]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base) else r.abort())  # offline
    c0, t = cpu_by_process(), time.perf_counter()
    pg.goto(url)
    pg.get_by_text("op node count").nth(panes - 1).wait_for(timeout=300_000)
    wall = time.perf_counter() - t
    c1 = cpu_by_process()
    ctx.close()
    return wall, {k: c1.get(k, 0.0) - c0.get(k, 0.0) for k in ("renderer", "gpu", "server")}


def baseline_cases(base: str, folder: str) -> dict[str, tuple[str, int]]:
    """An earlier export's final graph, PASS and PASS compare, from its whole collection."""
    m = load_manifest(folder)
    p = next(x for x in m["passes"] if x["path"].endswith(PASS))
    label, n = m["label"], OPEN_LAYERS
    return {
        "baseline: final, whole collection": (page_url(base, folder, m["final"], label=label), 1),
        f"baseline: {PASS}": (page_url(base, folder, p["graph"], label=label, layers=p["layers_after"][:n]), 1),
        f"baseline: {PASS} compare": (
            page_url(
                base,
                folder,
                p["graph"],
                before=p["before"],
                label=label,
                layers=p["layers_after"][:n],
                layers_before=p["layers_before"][:n],
            ),
            2,
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="pages opened per case (the median is printed too)")
    ap.add_argument("--chromium-args", default="", help="extra Chromium flags, e.g. '--use-angle=swiftshader'")
    ap.add_argument(
        "--baseline",
        default="",
        help="a yolov10n export written by an earlier version: its pages, opened as that version's "
        "launcher opened them (the whole collection), in the same run",
    )
    a = ap.parse_args()
    print("load average at start", tuple(round(x, 1) for x in os.getloadavg()))
    s = Session.from_model("yolov10n", numeric=False)
    s.run()
    t, c = time.perf_counter(), time.process_time()
    e = export_trace(s, tempfile.mkdtemp() + "/y")
    mb = os.path.getsize(e.collection) / 1e6
    print(f"export: wall {time.perf_counter() - t:.2f} s, cpu {time.process_time() - c:.2f} s;", end=" ")
    print(f"{len(e.passes)} passes, {e.nodes} nodes, {mb:.1f} MB")
    tiny = export_trace(Session.from_text(TINY, numeric=False, include_backend=False), tempfile.mkdtemp() + "/t")
    srv = start_server()
    t = time.perf_counter()
    opened = {
        "yolov10n final (launcher)": (open_in_model_explorer(e.folder, "final", browser=False), 1),
        f"yolov10n {PASS} (launcher)": (open_in_model_explorer(e.folder, PASS, browser=False), 1),
        f"yolov10n {PASS} compare (launcher)": (open_in_model_explorer(e.folder, PASS, compare=True, browser=False), 2),
    }
    print(f"launcher: {(time.perf_counter() - t) / 3 * 1e3:.0f} ms a page (its pass collections written)")
    cases = {
        "3-node graph": (open_in_model_explorer(tiny.folder, "final", browser=False).url, 1),
        "yolov10n final, whole collection": (page_url(srv.base, e.folder, e.final_graph, label=e.label), 1),
        **{name: (h.url, panes) for name, (h, panes) in opened.items()},
    }
    if a.baseline:
        cases.update(baseline_cases(srv.base, a.baseline))
    args = ["--disable-quic", *a.chromium_args.split()]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=args)
        for name, (url, panes) in cases.items():
            walls = []
            for _ in range(a.runs):
                wall, cpu = load_page(b, srv.base, url, panes)
                walls.append(wall)
                parts = ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
                print(f"load {name}: wall {wall:.2f} s; cpu s: {parts}")
            if a.runs > 1:
                print(f"  median {statistics.median(walls):.2f} s over {a.runs}")
        b.close()
    srv.stop()
    print("load average at end", tuple(round(x, 1) for x in os.getloadavg()))


if __name__ == "__main__":
    main()
