"""The README's main command on a fresh `git clone` of this repository: `./scripts/explore.sh
--headless` must install, trace and write out/yolo/ with nothing prepared but the clone (out/ is
git-ignored, so no clone has it), and the interactive form must print a URL that opens the tour.

The clone gets its own .venv that sees this interpreter's packages through a .pth line (a plain
path: the running venv's own .pth files, its editable install among them, are not processed), so
the script's pip step installs only the clone itself, editable, into the clone's venv, and
never touches the running environment. It needs no network where the running environment can
build the project without isolation (setuptools >= 70.1, or setuptools with wheel)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fresh_clone")]


def _can_build_offline() -> bool:
    try:
        version = tuple(int(p) for p in metadata.version("setuptools").split(".")[:2])
    except metadata.PackageNotFoundError:
        return False
    if version >= (70, 1):
        return True
    try:
        metadata.version("wheel")
    except metadata.PackageNotFoundError:
        return False
    return version >= (64, 0)


def _env(clone: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "PIP_"))}
    running_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != running_bin)
    env["PIP_NO_DEPS"] = "1"  # everything else is already there, seen through the .pth
    if _can_build_offline():
        env["PIP_NO_INDEX"] = "1"
        env["PIP_NO_BUILD_ISOLATION"] = "0"  # pip reads this variable inverted: 0 turns isolation off
    env["MIGX_GPU_BACKEND"] = "fake"
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (the test clones it)")
    if not hasattr(sys, "real_prefix") and sys.prefix == sys.base_prefix:
        pytest.skip("needs to run in a virtualenv (the clone's venv borrows its packages)")
    dest = tmp_path_factory.mktemp("fresh") / "migx-explore"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True, timeout=120)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(dest / ".venv")], check=True, timeout=120)
    purelib = subprocess.run(
        [str(dest / ".venv/bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    running = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "_running_env.pth").write_text("".join(p + "\n" for p in sorted(running)))
    return dest


def test_headless_command_on_a_fresh_clone(clone: Path) -> None:
    before = metadata.distribution("migx-explore").read_text("direct_url.json")
    assert not (clone / "out").exists()
    t0 = time.monotonic()
    done = subprocess.run(
        ["./scripts/explore.sh", "--headless"],
        cwd=clone,
        env=_env(clone),
        capture_output=True,
        text=True,
        timeout=600,
    )
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = clone / "out" / "yolo"
    assert (out / "index.json").is_file() and (out / "index.html").is_file()
    assert any(p.suffix == ".svg" for p in out.iterdir())
    assert "wrote " in done.stdout and "out/yolo" in done.stdout
    # the long step said what it did and where its log is
    assert re.search(r"installing the Python packages .* log: \S+pip-notebook\.log", done.stderr), done.stderr
    # the trace ran the clone's code, not the running checkout's
    where = subprocess.run(
        [str(clone / ".venv/bin/python"), "-c", "import migx_explore; print(migx_explore.__file__)"],
        cwd="/",
        env=_env(clone),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(clone)), where
    # and left the running environment's install alone
    assert metadata.distribution("migx-explore").read_text("direct_url.json") == before
    print(f"fresh clone: install + trace {took:.1f} s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, patience: float) -> int:
    """The status of GET url, retried while the server finishes starting (the banner comes first)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return r.status
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_interactive_command_prints_the_tour_url(clone: Path) -> None:
    pytest.importorskip("jupyterlab")
    port = _free_port()
    proc = subprocess.Popen(
        ["./scripts/explore.sh", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1"],
        cwd=clone,
        env=_env(clone),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        url, seen, deadline = None, [], time.monotonic() + 240
        while time.monotonic() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            m = re.search(r"(http://127\.0\.0\.1:\d+/\S+)", line)
            if m:
                url = m.group(1)
        assert url is not None, "".join(seen[-40:])
        assert "/lab/tree/notebooks/01_tour.ipynb" in url, url
        assert _get(url, 60) == 200, "".join(seen[-40:])
        tree = url.split("?")[0].replace("/lab/tree/", "/api/contents/")
        token = url.split("token=")[1] if "token=" in url else ""
        req = urllib.request.Request(tree + "?content=0", headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=30) as r:  # the page it lands on is the tour notebook
            assert b'"type": "notebook"' in r.read().replace(b'"type":"notebook"', b'"type": "notebook"')
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
