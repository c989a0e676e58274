"""scripts/_env.sh, the setup both README commands share: apt waits a bounded time for a lock
another process holds and then says which step failed and what to do, and a long step (pip, apt)
says it is still running instead of going silent for minutes.

apt-get and sudo are shims on PATH that answer as apt 2.6 does when another process holds its
lock; nothing is installed and no real lock is taken."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# answers like apt-get while the lock file named in $FAKE_APT_LOCKED exists; counts its calls
APT_SHIM = r"""#!/bin/sh
echo "$*" >>"$FAKE_APT_CALLS"
if [ -e "$FAKE_APT_LOCKED" ]; then
  n=$(wc -l <"$FAKE_APT_CALLS")
  [ "$n" -ge "${FAKE_APT_FREE_AFTER:-1000}" ] && rm -f "$FAKE_APT_LOCKED"
  case "$*" in
    *update*) echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (unattended-upgr)"
              echo "E: Unable to lock directory /var/lib/apt/lists/" ;;
    *) echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (unattended-upgr)"
       echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" ;;
  esac
  exit 100
fi
echo "Reading package lists..."
"""


def _shell(tmp_path: Path, script: str, apt: str = APT_SHIM, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "apt-get").write_text(apt)
    (bin_dir / "sudo").write_text('#!/bin/sh\n[ "$1" = -v ] && exit 0\nexec "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    full = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        TMPDIR=str(tmp_path),
        FAKE_APT_CALLS=str(tmp_path / "calls"),
        FAKE_APT_LOCKED=str(tmp_path / "locked"),
        **env,
    )
    t0 = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", f". {ROOT}/scripts/_env.sh; {script}"],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )
    return done, time.monotonic() - t0


def test_a_held_apt_lock_is_waited_for_then_named(tmp_path: Path) -> None:
    (tmp_path / "locked").touch()
    done, took = _shell(tmp_path, "apt_install graphviz", MIGX_APT_LOCK_TIMEOUT="5")
    assert done.returncode == 1, done.stderr
    err = done.stderr
    assert "waiting for apt's lock (/var/lib/apt/lists/lock, held by process 4242 (unattended-upgr))" in err, err
    assert "FAILED: apt-get update: apt's lock" in err and "still held after 5 s" in err, err
    assert "re-run this command" in err and "MIGX_APT_LOCK_TIMEOUT" in err, err
    assert "sudo apt-get install graphviz" in err, err
    assert "Could not get lock" not in err.split("FAILED")[0], "apt's own lines stay in its log"
    assert 4 <= took < 60, took
    assert len((tmp_path / "calls").read_text().splitlines()) >= 2  # it retried, bounded


def test_a_lock_released_while_waiting_lets_the_install_go_on(tmp_path: Path) -> None:
    (tmp_path / "locked").touch()
    done, _ = _shell(tmp_path, "apt_install graphviz && echo installed-ok", FAKE_APT_FREE_AFTER="2")
    assert done.returncode == 0 and "installed-ok" in done.stdout, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert any("install" in c and "graphviz" in c for c in calls), calls


def test_another_apt_failure_is_not_called_a_lock(tmp_path: Path) -> None:
    offline = '#!/bin/sh\necho "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease"\nexit 100\n'
    done, took = _shell(tmp_path, "apt_install graphviz", apt=offline)
    assert done.returncode == 1 and took < 30, done.stderr
    assert "FAILED: apt-get update\n" in done.stderr + "\n" and "Failed to fetch" in done.stderr, done.stderr
    assert "waiting for apt's lock" not in done.stderr and "re-running this command" in done.stderr


def test_a_long_step_says_it_is_still_running(tmp_path: Path) -> None:
    log = tmp_path / "pip.log"
    slow = "bash -c 'echo Collecting numpy; sleep 3.5; echo Successfully installed numpy'"
    done, _ = _shell(tmp_path, f"run_logged {log} 'pip install' {slow}", MIGX_HEARTBEAT_S="1")
    assert done.returncode == 0, done.stderr
    beats = [ln for ln in done.stderr.splitlines() if "pip install: still running after" in ln]
    assert len(beats) >= 2 and "last in its log: Collecting numpy" in beats[0], done.stderr
    assert "Successfully installed numpy" in log.read_text() and "Collecting" not in done.stdout


def test_a_failing_step_keeps_its_exit_status(tmp_path: Path) -> None:
    done, _ = _shell(tmp_path, f"run_logged {tmp_path / 'x.log'} step bash -c 'exit 7' || echo rc=$?")
    assert "rc=7" in done.stdout, done.stdout + done.stderr
