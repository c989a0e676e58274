"""One rewrite instance at a time, in JupyterLab at 1280x800 (issue 36), bounded: one model, the
passes people open the tool for (lowering, the pointwise fusion, memory coloring), each row's
first instance clicked. Every drawing must read (changed-node labels >= 10 px on screen) and no
click may hold the page longer than CLICK_LIMIT_S (the machine is shared; the full measurement
over three exporter-style models is benchmarks/instance_legibility.py)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

REPO = Path(__file__).resolve().parents[2]
MODEL = "bert_encoder"
PASSES = ("fusion.fuse_pointwise_reduce", "backend.lowering", "backend.memory_coloring")
ROWS = 3  # rows clicked per pass
CLICK_LIMIT_S = 10.0  # 2 s on a quiet machine; a shared 2-core box under load is slower


def _bench():
    spec = importlib.util.spec_from_file_location("instance_legibility", REPO / "benchmarks" / "instance_legibility.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_each_rows_first_instance_reads_and_no_click_blocks(lab, page, open_notebook, run_all, tmp_path):
    b = _bench()
    path = tmp_path / "instances.ipynb"
    b._notebook(path, MODEL)
    page = open_notebook(path)
    page.set_viewport_size({"width": 1280, "height": 800})
    run_all(page, timeout_ms=300_000)
    ex = page.locator(".migx-explorer").first
    ex.evaluate("e => e.scrollIntoView({block: 'start'})")
    report, slowest = [], 0.0
    for p in PASSES:
        ex.locator(f".migx-path-{p.replace('.', '-')} button.migx-pass-goto").first.click()
        state = b._state(page, ex, p, 60)
        assert state and state.startswith("graph"), f"{p}: first view {state}"
        first = ex.evaluate(b.LABELS_JS)
        report.append(f"{p}: first view {first}")
        assert b._legible(first), report[-1]
        assert "instance 1 of " in ex.locator(".migx-instance-label").first.inner_text()
        n = min(ex.locator(".migx-rewrite-row").count(), ROWS)
        for r in range(n):
            row = ex.locator(".migx-rewrite-row").nth(r)
            t0 = time.monotonic()
            row.click()
            page.wait_for_timeout(60)
            got = b._state(page, ex, p, 60)
            dt = time.monotonic() - t0
            slowest = max(slowest, dt)
            labels = ex.evaluate(b.LABELS_JS)
            report.append(f"   {row.inner_text()[:60]}: {labels} in {dt:.2f} s")
            assert got and got.startswith("graph") and b._legible(labels), "\n".join(report)
            assert dt < CLICK_LIMIT_S, "\n".join(report)
    print("\n".join(report) + f"\nslowest click {slowest:.2f} s")
    assert not page.page_errors, page.page_errors
