"""Hostile-input fuzz (issue 40): invalid UTF-8 in every string field, fed indices out of range,
fed shape / size / k / axis / pad / divisor values and data-dependent output lengths (on the
reference evaluator and, kind `gpu`, on the GPU path with the fake backend), wrong-typed feeds,
hostile pass-option values and --out paths with dots. Every outcome is a clean
exit 2 with one line naming the problem, or a result equal to ONNX Runtime's; nothing outside the
case's own folder changes (a sentinel file beside it is checked after every case).

420 cases by default (60 per kind); `-m slow` runs 2,800 more (400 per kind). Seeded: a failure
names its case, which `tests.fuzz.hostile_cases.case(kind, seed, i)` rebuilds."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from fake_gpu import fake_gpu

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.pass_infra import build_pipelines
from migx_explore.outputs import with_suffix
from tests.fuzz.hostile_cases import KINDS, case
from tests.safety.hostile import assert_agrees_with_ort, assert_clean_refusal, run_ours

pytest.importorskip("onnxruntime")

SEED = 40
DEFAULT_PER_KIND, SLOW_PER_KIND, BATCH = 60, 400, 20


@pytest.fixture(scope="module")
def catalog():
    from migx_explore.session import Session

    return Session.from_model("mlp", numeric=False).config.catalog


@pytest.fixture(scope="module")
def relu_model() -> bytes:
    from onnx import helper

    from tests.safety.hostile import F, model_bytes

    return model_bytes([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [2, 3])], [("y", F, [2, 3])])


def _listing(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def check_case(c, root: Path, capsys, catalog, relu_model) -> None:
    work = root / "case"
    work.mkdir()
    if c.kind == "utf8":
        rc, err, _ = run_ours(capsys, work, c.model, c.feed)
        assert_clean_refusal(rc, err, "not valid UTF-8")
    elif c.kind in ("indices", "values", "feed_type"):
        assert_agrees_with_ort(capsys, work, c.model, c.feed, c.outputs)
    elif c.kind == "gpu":
        with fake_gpu():
            assert_agrees_with_ort(capsys, work, c.model, c.feed, c.outputs, "--target", "gpu")
    elif c.kind == "option":
        try:
            pipelines = build_pipelines(c.spec, catalog)
        except MigxError as e:
            msg = str(e)
            assert "\n" not in msg and len(msg) < 600, msg
            assert c.pass_name in msg, msg
            assert c.option in msg or "pipeline spec" in msg or "key=value" in msg, msg
        else:  # accepted: the value must be one the option takes
            (entry,) = [e for pl in pipelines for e in pl.entries if e.name == c.pass_name]
            value = getattr(entry.pass_, c.option)
            assert isinstance(value, (bool, int, tuple)), (c.spec, value)
            if isinstance(value, int) and not isinstance(value, bool):
                assert 0 <= value < 2**31, (c.spec, value)
    elif c.kind == "out_path":
        folder = work.joinpath(*c.out_parts[:-1])
        folder.mkdir(parents=True)
        out = folder / c.out_parts[-1]
        (work / "m.onnx").write_bytes(relu_model)
        np.savez(work / "feed.npz", x=np.ones((2, 3), np.float32))
        from migx_explore.cli import main

        capsys.readouterr()
        rc = main(["run", str(work / "m.onnx"), "--inputs", str(work / "feed.npz"), "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 0, err
        np.testing.assert_array_equal(np.load(out)["y"], np.ones((2, 3), np.float32))
        assert sorted(os.listdir(folder)) == [c.out_parts[-1]], os.listdir(folder)
        csv = with_suffix(str(out), ".csv")
        assert os.path.dirname(csv) == str(folder) and csv.endswith(".csv"), csv


def _run(kind: str, start: int, n: int, tmp_path: Path, capsys, catalog, relu_model) -> None:
    failures = []
    for i in range(start, start + n):
        c = case(kind, SEED, i)
        root = tmp_path / str(i)
        root.mkdir()
        sentinel = root / "sentinel.txt"
        sentinel.write_text("must stay")
        parent_before = sorted(os.listdir(tmp_path))
        try:
            check_case(c, root, capsys, catalog, relu_model)
        except AssertionError as e:
            failures.append(f"{c.name}: {str(e)[:400]}")
        assert sentinel.read_text() == "must stay", c.name
        assert sorted(p for p in os.listdir(root)) == ["case", "sentinel.txt"], (c.name, os.listdir(root))
        assert sorted(os.listdir(tmp_path)) == parent_before, c.name
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kind,start", [(k, s) for k in KINDS for s in range(0, DEFAULT_PER_KIND, BATCH)])
def test_hostile_inputs(tmp_path, capsys, catalog, relu_model, kind, start):
    _run(kind, start, BATCH, tmp_path, capsys, catalog, relu_model)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind,start", [(k, s) for k in KINDS for s in range(DEFAULT_PER_KIND, DEFAULT_PER_KIND + SLOW_PER_KIND, 50)]
)
def test_hostile_inputs_slow(tmp_path, capsys, catalog, relu_model, kind, start):
    _run(kind, start, 50, tmp_path, capsys, catalog, relu_model)
