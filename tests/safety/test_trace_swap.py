"""Issue 40 item 6: an interrupt (or a kill) during the final moves of `trace --out` into a previous
trace never loses that trace, and the next trace into the folder works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from migx_explore import outputs
from migx_explore.cli import main


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def previous(tmp_path):
    out = tmp_path / "trace"
    assert main(["trace", "mlp", "--out", str(out), "-q"]) == 0
    (out / "notes.txt").write_text("my notes")
    return out


def _interrupt_at(monkeypatch, n: int, exc: BaseException) -> None:
    real, calls = outputs._move, [0]

    def move(src, dst):
        calls[0] += 1
        if calls[0] == n:
            raise exc
        real(src, dst)

    monkeypatch.setattr(outputs, "_move", move)


@pytest.mark.parametrize("n", [1, 2, 5, 12, 30])
def test_an_interrupt_during_the_moves_keeps_the_previous_trace(monkeypatch, capsys, previous, n):
    before = _snapshot(previous)
    _interrupt_at(monkeypatch, n, KeyboardInterrupt())
    rc = main(["trace", "resnet_block", "--out", str(previous), "-q"])
    monkeypatch.undo()
    assert rc != 0
    assert _snapshot(previous) == before
    assert not [p.name for p in previous.parent.iterdir() if p.name.startswith(".")]
    assert main(["trace", "resnet_block", "--out", str(previous), "-q"]) == 0
    assert json.loads((previous / "index.json").read_text())["model"] == "resnet_block"
    assert (previous / "notes.txt").read_text() == "my notes"


KILL = """
import os, sys
from migx_explore import outputs
from migx_explore.cli import main
real, calls = outputs._move, [0]
def move(src, dst):
    calls[0] += 1
    if calls[0] == int(sys.argv[2]):
        os._exit(9)  # a SIGKILL: no except clause, no finally
    real(src, dst)
outputs._move = move
main(["trace", "resnet_block", "--out", sys.argv[1], "-q"])
"""


@pytest.mark.parametrize("n", [3, 20])
def test_a_kill_during_the_moves_is_undone_by_the_next_run(previous, n):
    before = _snapshot(previous)
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", KILL, str(previous), str(n)], cwd=root, capture_output=True, text=True)
    assert r.returncode == 9, r.stderr
    assert outputs.recover_trace_folder(previous) is True
    assert _snapshot(previous) == before
    assert main(["trace", "resnet_block", "--out", str(previous), "-q"]) == 0
    assert (previous / "notes.txt").read_text() == "my notes"
