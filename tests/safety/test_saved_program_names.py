"""Issue 40 item 10: a program saved from a model runs with that model's feed and gives outputs under
the model's names, partial or fully compiled."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from migx_explore.cli import main
from tests.safety.hostile import F, model_bytes, run_ort


@pytest.fixture
def model(tmp_path):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "W")
    m = model_bytes(
        [helper.make_node("MatMul", ["in put:0", "W"], ["t"]), helper.make_node("Relu", ["t"], ["out/y"])],
        [("in put:0", F, [2, 4])],
        [("out/y", F, [2, 3])],
        inits=[w],
    )
    path = tmp_path / "m.onnx"
    path.write_bytes(m)
    feed = {"in put:0": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}
    np.savez(tmp_path / "feed.npz", **feed)
    return path, m, feed


@pytest.mark.parametrize("until", ["fusion.fuse_concat", None], ids=["partial", "fully_compiled"])
def test_a_saved_program_takes_the_models_feed_and_names(monkeypatch, capsys, tmp_path, model, until):
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    path, m, feed = model
    saved, out = tmp_path / "p.migx", tmp_path / "out.npz"
    argv = ["compile", str(path), "--out", str(saved)] + (["--until", until] if until else [])
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["run", str(saved), "--inputs", str(tmp_path / "feed.npz"), "--out", str(out)]) == 0, (
        capsys.readouterr().err
    )
    got = dict(np.load(out))
    assert list(got) == ["out/y"]
    np.testing.assert_allclose(got["out/y"], run_ort(m, feed)[0], rtol=1e-5, atol=1e-6)


def test_a_saved_program_still_refuses_an_unknown_input(monkeypatch, capsys, tmp_path, model):
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    path, _, _ = model
    saved = tmp_path / "p.migx"
    assert main(["compile", str(path), "--out", str(saved)]) == 0
    np.savez(tmp_path / "bad.npz", other=np.zeros((2, 4), np.float32))
    capsys.readouterr()
    assert main(["run", str(saved), "--inputs", str(tmp_path / "bad.npz")]) == 2
    assert "unknown input 'other'" in capsys.readouterr().err
