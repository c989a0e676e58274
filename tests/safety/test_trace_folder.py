"""Issue 26 item 5: `trace --out` into a previous trace removes only what that trace wrote (its
index lists the files); a bad --out fails before the model runs; interrupted writes' temporaries
are removed by the next run (and only those whose process is gone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from migx_explore.cli import main
from migx_explore.compiler import tmpfiles


def _err(capsys) -> str:
    return capsys.readouterr().err.strip()


def test_a_users_file_in_a_previous_trace_survives(tmp_path):
    out = tmp_path / "trace"
    assert main(["trace", "mlp", "--out", str(out), "-q"]) == 0
    first = json.loads((out / "index.json").read_text())["files"]
    assert "index.json" in first and "000_input.txt" in first
    (out / "notes.txt").write_text("my notes")
    assert main(["trace", "resnet_block", "--out", str(out), "-q"]) == 0
    second = json.loads((out / "index.json").read_text())
    assert (out / "notes.txt").read_text() == "my notes"
    assert {p.name for p in out.iterdir()} == set(second["files"]) | {"notes.txt"}  # nothing of mlp's left
    assert second["model"] == "resnet_block"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_hostile_index_cannot_remove_files_outside_the_trace(tmp_path):
    out = tmp_path / "trace"
    assert main(["trace", "mlp", "--out", str(out), "-q"]) == 0
    index = json.loads((out / "index.json").read_text())
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    index["files"] += ["../victim.txt", str(victim), "/etc/hostname"]
    (out / "index.json").write_text(json.dumps(index))
    assert main(["trace", "mlp", "--out", str(out), "-q"]) == 0
    assert victim.read_text() == "keep"


def test_a_legacy_index_without_a_file_list_removes_only_the_files_it_names(tmp_path):
    out = tmp_path / "trace"
    assert main(["trace", "mlp", "--out", str(out), "-q"]) == 0
    index = json.loads((out / "index.json").read_text())
    del index["files"]
    (out / "index.json").write_text(json.dumps(index))
    (out / "notes.txt").write_text("mine")
    assert main(["trace", "resnet_block", "--out", str(out), "-q"]) == 0
    assert (out / "notes.txt").exists()
    assert not any("mlp" in p.read_text()[:200] for p in out.glob("0*.txt"))


@pytest.mark.parametrize("kind", ["file", "missing parent"])
def test_a_bad_out_fails_before_the_model_runs(tmp_path, monkeypatch, capsys, kind):
    def never(*a, **k):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr("migx_explore.cli.trace.load_program_and_feed", never)
    if kind == "file":
        out = tmp_path / "f"
        out.write_text("keep")
        want = "exists and is not a folder"
    else:
        out = tmp_path / "no" / "such" / "trace"
        want = "does not exist"
    assert main(["trace", "mlp", "--out", str(out), "-q"]) == 2
    assert want in _err(capsys)
    assert not (tmp_path / "no").exists()


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_interrupted_writes_are_cleaned_up_next_run(tmp_path):
    dead = _dead_pid()
    stale_file = tmp_path / f".migx-{dead}-abc.tmp"
    stale_file.write_bytes(b"half a program")
    stale_dir = tmp_path / f".migx-{dead}-xyz.tmp"
    stale_dir.mkdir()
    (stale_dir / "000_input.txt").write_text("half a trace")
    live = tmp_path / f".migx-{os.getppid()}-live.tmp"  # a write in progress in a living process
    live.write_bytes(b"busy")
    assert main(["trace", "mlp", "--out", str(tmp_path / "trace"), "-q"]) == 0
    assert not stale_file.exists() and not stale_dir.exists() and live.exists()


def test_save_program_cleans_its_folder_and_names_temporaries_by_pid(tmp_path):
    from migx_explore import models
    from migx_explore.compiler.serialize import save_program

    stale = tmp_path / f".migx-{_dead_pid()}-q.tmp"
    stale.write_bytes(b"x")
    assert tmpfiles.stale_temporaries(tmp_path) == [stale]
    save_program(models.load("mlp"), tmp_path / "p.migx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.migx"]
    assert tmpfiles.prefix() == f".migx-{os.getpid()}-"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "mlp", "--out", "{d}"],
        ["run", "mlp", "--out", "{d}/no/o.npz"],
        ["compile", "mlp", "--out", "{d}/no/p.migx"],
    ],
)
def test_a_bad_output_file_fails_before_the_model_loads(tmp_path, monkeypatch, capsys, argv):
    def never(*a, **k):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr("migx_explore.loading.load", never)
    assert main([a.format(d=tmp_path) for a in argv]) == 2
    assert "--out" in _err(capsys)
