"""Export time of the yolov10n trace (1,608 instructions) for Model Explorer, and the time Model
Explorer takes to open it in headless Chromium: wall time, and the CPU seconds the browser and
Model Explorer's server spent (this process's children), beside a 3-node graph as the baseline.

    python benchmarks/model_explorer_load.py      # needs ai-edge-model-explorer, playwright, psutil

Results: docs/results/model_explorer_speed.md.
"""

from __future__ import annotations

import os
import tempfile
import time

import psutil
from playwright.sync_api import sync_playwright

from migx_explore.model_explorer import export_trace
from migx_explore.model_explorer.launch import page_url, start_server
from migx_explore.session import Session

TINY = "x = @param:x -> float32, {4}, {1}\n@0 = relu(x) -> float32, {4}, {1}\n@1 = @return(@0)\n"


def child_cpu() -> float:
    total = 0.0
    for c in psutil.Process().children(recursive=True):
        try:
            t = c.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def main() -> None:
    s = Session.from_model("yolov10n", numeric=False)
    s.run()
    t, c = time.time(), time.process_time()
    e = export_trace(s, tempfile.mkdtemp() + "/y")
    mb = os.path.getsize(e.collection) / 1e6
    print(f"export: wall {time.time() - t:.2f} s, cpu {time.process_time() - c:.2f} s; {len(e.passes)} pass graphs,")
    print(f"  {e.nodes} nodes, {mb:.1f} MB")
    tiny = export_trace(Session.from_text(TINY, numeric=False, include_backend=False), tempfile.mkdtemp() + "/t")
    fpr = next(x for x in e.passes if x.path.endswith("fuse_pointwise_reduce"))
    srv = start_server()
    cases = [
        ("3-node graph", page_url(srv.base, tiny.folder, tiny.final_graph, label=tiny.label), 0),
        ("yolov10n final", page_url(srv.base, e.folder, e.final_graph, label=e.label), 0),
        ("yolov10n fuse_pointwise_reduce", page_url(srv.base, e.folder, fpr.graph, label=e.label), 0),
        (
            "yolov10n compare fuse_pointwise_reduce",
            page_url(srv.base, e.folder, fpr.graph, before=fpr.before, label=e.label, layers=fpr.layers_after[:3]),
            1,
        ),
    ]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--disable-quic"])
        for name, url, pane in cases:
            ctx = b.new_context(viewport={"width": 1400, "height": 900})
            pg = ctx.new_page()
            pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(srv.base) else r.abort())
            c0, t = child_cpu(), time.time()
            pg.goto(url)
            pg.get_by_text("op node count").nth(pane).wait_for(timeout=300_000)
            print(f"load {name}: wall {time.time() - t:.2f} s, browser+server cpu {child_cpu() - c0:.2f} s")
            ctx.close()
        b.close()
    srv.stop()
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
