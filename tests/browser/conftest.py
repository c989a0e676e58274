"""Real-browser fixtures: one JupyterLab server and one Debian Chromium (through Playwright) per
test session, a fresh page, workspace and notebook copy per test (the recipe in
shared/reference/browser-testing.md: isolated Jupyter dirs, news and autosave off, wait on the
kernel's own status before Run All, never the toolbar indicator).

Tests here are marked `browser` and put in one xdist group, so `pytest -n 2 --dist loadgroup`
runs them in one worker against one server. They skip only when Chromium is absent."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
KERNEL_IDLE_JS = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }"""
# Run All has finished when the kernel is idle and every code cell shows an execution count, or
# stopped when a cell shows an error (Run All does not run the cells after it).
RUN_DONE_JS = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  if (!k || k.status !== 'idle') return false;
  if (document.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]'))
    return 'error';
  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent);
  return prompts.length > 0 && prompts.every(t => /\\[\\d+\\]/.test(t)) && 'done'; }"""


# Page errors that say nothing about the explorer: anywidget rejects a model's `ready` when its
# ES module was bound more than 2 s after the model was made (a loaded machine); the explorer's
# widgets keep their state on plain models (widgets/hosted.py), so nothing is lost. The test of
# that race (test_explorer_late_modules.py) checks this error was raised.
BENIGN_PAGE_ERRORS = ("[anywidget] Failed to initialize model.",)


def _chromium_missing() -> str | None:
    path = shutil.which(CHROMIUM) or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    return (
        None
        if path
        else (f"Chromium not found at {CHROMIUM} (set CHROMIUM_PATH, or `apt-get install chromium`; CI installs it)")
    )


def pytest_collection_modifyitems(config, items):
    reason = _chromium_missing()
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.xdist_group("browser"))
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@dataclass
class LabServer:
    proc: subprocess.Popen
    port: int
    token: str
    root_dir: Path
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, rel: str, workspace: str) -> str:
        return f"{self.base_url}/lab/workspaces/{workspace}/tree/{rel}?token={self.token}"

    def api(self, method: str, path: str):
        req = urllib.request.Request(
            self.base_url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(settings: Path) -> None:
    for rel, data in {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    }.items():
        p = settings / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(data))


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    root, state = tmp_path_factory.mktemp("lab-root"), tmp_path_factory.mktemp("lab-state")
    _write_settings(state / "lab-settings")
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(state / "config"),
        "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(state / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLBACKEND": "Agg",
    }
    port, token = _free_port(), secrets.token_hex(16)
    log_path = state / "lab.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed in teardown
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=None",
            "--LabApp.expose_app_in_browser=True",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=root,
        start_new_session=True,
    )
    srv = LabServer(proc, port, token, root, log_path)
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{srv.log_tail()}")
        try:
            srv.api("GET", "/api/status")
            break
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer within 90 s:\n{srv.log_tail()}")
            time.sleep(0.3)
    yield srv
    try:
        for k in srv.api("GET", "/api/kernels") or []:
            srv.api("DELETE", f"/api/kernels/{k['id']}")
    except OSError:
        pass
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    log.close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, lab, request):
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    pg = ctx.new_page()
    pg.page_errors = []
    pg.on("pageerror", lambda e: str(e) in BENIGN_PAGE_ERRORS or pg.page_errors.append(str(e)))
    yield pg
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        try:
            pg.screenshot(path=str(ARTIFACTS / f"FAILED-{name}.png"), full_page=True)
        except Exception as e:  # noqa: BLE001 - a failed screenshot must not hide the test's failure
            print(f"could not save the failure screenshot: {e}")
    ctx.close()
    for s in lab.api("GET", "/api/sessions") or []:
        lab.api("DELETE", f"/api/sessions/{s['id']}")


@pytest.fixture
def open_notebook(lab, page, request):
    """Copy a notebook (outputs cleared) under a unique name, open it in a fresh workspace and
    wait for its kernel; returns the page."""
    import nbformat

    def _open(src: Path):
        nb = nbformat.read(src, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nb.metadata.pop("widgets", None)  # no saved widget views: only live ones to find
        tag = re.sub(r"[^A-Za-z0-9]+", "_", request.node.name)[:40]
        name = f"{src.stem}-{tag}-{uuid.uuid4().hex[:6]}.ipynb"
        nbformat.write(nb, lab.root_dir / name)
        page.goto(lab.url(name, workspace=f"ws-{uuid.uuid4().hex[:8]}"))
        page.wait_for_function(KERNEL_IDLE_JS, timeout=90_000)
        return page

    return _open


@pytest.fixture
def run_all():
    """Run every cell through the app command; fails with the cell's error if one raises."""

    def _run(page, timeout_ms: int = 300_000) -> None:
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        status = page.wait_for_function(RUN_DONE_JS, timeout=timeout_ms, polling=500).json_value()
        if status == "error":
            err = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]').first
            pytest.fail(f"a notebook cell raised in the browser:\n{err.inner_text()[-3000:]}")

    return _run
