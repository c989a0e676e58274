"""In JupyterLab at 1280x800, how many changed passes read at first AND one click deeper (issue 36).

    python benchmarks/instance_legibility.py [--tree PATH] [--models yolov10n,bert_encoder,llama_decoder]
        [--click-timeout 30] [--max-rows 40] [--out results.json]

For each model (one notebook and kernel per model), with unchanged passes hidden, every changed
top-level pass is stepped to with "next"; then every rewrite-summary row is clicked once (its
first instance). A pass counts as legible when
- its first view reads: a drawing whose changed nodes in view have labels >= 10 px on screen
  (median of each node's tallest text line), or the rewrite summary with its graph button whole;
- and every row's first instance reads: after the click, a drawing with changed nodes in view at
  >= 10 px.
Prints per model the fraction of legible passes, the slowest step and the slowest row click
(click to drawing settled, kernel idle). `--tree` is the checkout the kernel imports
(PYTHONPATH), so one script measures main and a branch on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
MIN_LABEL_PX = 10.0
KERNEL_IDLE_JS = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }"""
RUN_DONE_JS = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  if (!k || k.status !== 'idle') return false;
  if (document.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]')) return 'error';
  const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent);
  return p.length > 0 && p.every(t => /\\[\\d+\\]/.test(t)) && 'done'; }"""
# What shows now, once the kernel is idle and nothing is busy: "graph:<svg length>" (a drawing
# with every changed node in view), "summary" (the rewrite rows without a drawing) or false.
STATE_JS = """([root, path]) => {
  const w = window.jupyterapp.shell.currentWidget, k = w.sessionContext.session.kernel;
  if (k.status !== 'idle') return false;
  const busy = root.querySelector('.migx-busy');
  if (busy && busy.offsetParent) return false;
  const pos = root.querySelector('.migx-position');
  if (path && !(pos && pos.textContent.includes(path))) return false;
  const gv = root.querySelector('.migx-graph-view .migx-gv');
  const svg = root.querySelector('.migx-graph-view .migx-gv-canvas svg');
  if (gv && gv.offsetParent && svg && svg.querySelector('g.node')) {
    const m = /^(\\d+)\\/(\\d+)$/.exec(gv.dataset.changedInView || '');
    return m && m[1] === m[2] ? 'graph:' + svg.outerHTML.length : false;
  }
  const rw = root.querySelector('.migx-rewrites');
  if (rw && rw.offsetParent && rw.querySelector('.migx-rewrite-row')) return 'summary';
  return false; }"""
LABELS_JS = """root => {
  const c = root.querySelector('.migx-graph-view .migx-gv-canvas');
  if (!c) return [0, 0, 0];
  const b = c.getBoundingClientRect(), hs = [];
  const nodes = c.querySelectorAll('svg g.node.st_added, svg g.node.st_removed, svg g.node.st_changed');
  for (const n of nodes) {
    const r = n.getBoundingClientRect();
    if (r.bottom < b.top || r.top > b.bottom || r.right < b.left || r.left > b.right) continue;
    const ts = [...n.querySelectorAll('text')].map((t) => t.getBoundingClientRect().height);
    if (ts.length) hs.push(Math.max(...ts));
  }
  hs.sort((x, y) => x - y);
  return [hs.length, hs.length ? hs[Math.floor(hs.length / 2)] : 0, nodes.length]; }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server in isolated dirs whose kernels import `tree` first."""

    def __init__(self, tree: Path, work: Path):
        self.root, state = work / "root", work / "state"
        self.root.mkdir(parents=True)
        for rel, data in {
            "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
                "fetchNews": "false",
                "checkForUpdates": False,
            },
            "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
        }.items():
            p = state / "lab-settings" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(data))
        env = {
            **os.environ,
            "PYTHONPATH": str(tree),
            "JUPYTER_CONFIG_DIR": str(state / "config"),
            "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(state / "lab-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.log = open(state / "lab.log", "wb")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1"]
        cmd += [f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}"]
        cmd += [f"--ServerApp.root_dir={self.root}", "--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.api("GET", "/api/status")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"JupyterLab did not start (log: {state / 'lab.log'})") from None
                time.sleep(0.3)

    def api(self, method: str, path: str):
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/lab/workspaces/ws-{uuid.uuid4().hex[:8]}/tree/{name}?token={self.token}"

    def stop(self) -> None:
        try:
            for k in self.api("GET", "/api/kernels") or []:
                self.api("DELETE", f"/api/kernels/{k['id']}")
        except OSError:
            pass
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def _notebook(path: Path, model: str) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import migx_explore\nmigx_explore.explore({model!r}, numeric=False)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _state(page, ex, path: str, timeout_s: float) -> str | None:
    """The settled state (twice the same, 250 ms apart), or None past the timeout."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            s = page.wait_for_function(
                STATE_JS,
                arg=[ex.element_handle(), path],
                timeout=max(100, (deadline - time.monotonic()) * 1000),
                polling=100,
            ).json_value()
        except Exception:  # noqa: BLE001 - past the deadline
            return None
        if s == last:
            return s
        last = s
        page.wait_for_timeout(250)
    return None


def _position(ex) -> tuple[int, int, str]:
    m = re.search(r"(\d+) / (\d+) · (\S+)", ex.locator(".migx-position").first.inner_text())
    assert m, "no position"
    return int(m.group(1)), int(m.group(2)), m.group(3).strip()


def _legible(labels: list) -> bool:
    return labels[0] > 0 and labels[1] >= MIN_LABEL_PX


def _open_rewrites(page, ex, timeout_s: float) -> None:
    picked = ex.locator(".migx-view-select .mod-active")
    if picked.count() and picked.first.inner_text().strip() == "Rewrites":
        return
    ex.locator(".migx-view-select button", has_text="Rewrites").first.click()
    page.wait_for_function(
        "r => { const x = r.querySelector('.migx-rewrites');"
        " return x && x.offsetParent && x.querySelector('.migx-rewrite-row'); }",
        arg=ex.element_handle(),
        timeout=timeout_s * 1000,
    )


def measure_model(page, ex, model: str, click_timeout: float, max_rows: int) -> dict:
    ex.locator(".migx-hide-unchanged input[type=checkbox]").check()
    ex.locator("button.migx-first").click()
    page.wait_for_function(
        "e => /\\b1 \\/ \\d+ · /.test(e.textContent)",
        arg=ex.locator(".migx-position").first.element_handle(),
        timeout=120_000,
    )
    passes, steps, clicks = [], [], []
    t_step = time.monotonic()
    while True:
        k, n, path = _position(ex)
        first = _state(page, ex, path, click_timeout)
        steps.append((time.monotonic() - t_step, path))
        if first is None:
            view_ok, view = False, "timeout"
        elif first == "summary":
            b = ex.locator(".migx-rewrites-graph")
            view_ok = b.count() == 1 and b.first.evaluate("b => b.scrollWidth <= b.clientWidth + 2")
            view = "summary"
        else:
            page.wait_for_timeout(150)
            labels = ex.evaluate(LABELS_JS)
            view_ok, view = _legible(labels), f"graph {labels[1]:.1f}px"
        rows_ok, bad_rows = True, []
        try:
            _open_rewrites(page, ex, click_timeout)
            n_rows = min(ex.locator(".migx-rewrite-row").count(), max_rows)
        except Exception:  # noqa: BLE001 - a pass without rows (or a frozen kernel)
            n_rows = 0
        for r in range(n_rows):
            try:
                _open_rewrites(page, ex, click_timeout)
                row = ex.locator(".migx-rewrite-row").nth(r)
                label = row.inner_text().strip()
                t0 = time.monotonic()
                row.click()
                page.wait_for_timeout(60)
                got = _state(page, ex, path, click_timeout)
                dt = time.monotonic() - t0
            except Exception:  # noqa: BLE001
                got, dt, label = None, click_timeout, f"row {r}"
            clicks.append((dt, f"{path} :: {label}"))
            labels = ex.evaluate(LABELS_JS) if got and got.startswith("graph") else [0, 0, 0]
            if not _legible(labels):
                rows_ok = False
                bad_rows.append(
                    f"{label} ({'timeout' if got is None else f'{labels[1]:.1f}px, {labels[0]}/{labels[2]} in view'})"
                )
            if got is None:  # a frozen kernel: let it finish before the next click
                page.wait_for_function(KERNEL_IDLE_JS, timeout=600_000)
        passes.append(
            {
                "pass": path,
                "first_view": view,
                "view_ok": bool(view_ok),
                "rows": n_rows,
                "bad_rows": bad_rows,
                "ok": bool(view_ok and rows_ok),
            }
        )
        print(
            f"  {'ok ' if passes[-1]['ok'] else 'BAD'} {path:<44} {view:<14} rows {n_rows} {'; '.join(bad_rows)[:300]}",
            flush=True,
        )
        if k == n:
            break
        t_step = time.monotonic()
        ex.locator("button.migx-next").click()
        page.wait_for_function(
            "([e, k]) => new RegExp('\\\\b' + k + ' / \\\\d+ · ').test(e.textContent)",
            arg=[ex.locator(".migx-position").first.element_handle(), k + 1],
            timeout=600_000,
        )
    good = sum(p["ok"] for p in passes)
    return {
        "model": model,
        "passes": passes,
        "legible": good,
        "total": len(passes),
        "slowest_step": max(steps) if steps else None,
        "slowest_click": max(clicks) if clicks else None,
        "clicks": len(clicks),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--models", default="yolov10n,bert_encoder,llama_decoder")
    ap.add_argument("--click-timeout", type=float, default=30.0)
    ap.add_argument("--max-rows", type=int, default=40)
    ap.add_argument("--out", default="")
    ap.add_argument("--shots", default="", help="folder for a screenshot of each pass's first view")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="migx-legibility-"))
    lab = Lab(Path(args.tree), work)
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
            for model in args.models.split(","):
                name = f"{model}-{uuid.uuid4().hex[:6]}.ipynb"
                _notebook(lab.root / name, model)
                ctx = browser.new_context(viewport={"width": 1280, "height": 800})
                page = ctx.new_page()
                page.goto(lab.url(name))
                page.wait_for_function(KERNEL_IDLE_JS, timeout=120_000)
                page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
                page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
                page.wait_for_function(RUN_DONE_JS, timeout=600_000)
                ex = page.locator(".migx-explorer").first
                ex.evaluate("e => e.scrollIntoView({block: 'start'})")
                print(f"{model}:", flush=True)
                r = measure_model(page, ex, model, args.click_timeout, args.max_rows)
                results.append(r)
                print(
                    f"{model}: {r['legible']}/{r['total']} passes legible at first view and first instance "
                    f"({r['legible'] / max(r['total'], 1):.0%}); slowest step {r['slowest_step'][0]:.2f} s "
                    f"({r['slowest_step'][1]}); slowest of {r['clicks']} clicks "
                    f"{(r['slowest_click'] or (0, ''))[0]:.2f} s ({(r['slowest_click'] or (0, ''))[1]})",
                    flush=True,
                )
                ctx.close()
                for s in lab.api("GET", "/api/sessions") or []:
                    lab.api("DELETE", f"/api/sessions/{s['id']}")
            browser.close()
    finally:
        lab.stop()
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
