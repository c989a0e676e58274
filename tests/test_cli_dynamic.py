"""The CLI on a batch range (issue 37): read, run at sizes inside the range, verify and trace a
dynamic-batch CNN export."""

from __future__ import annotations

import json

import numpy as np
import onnx

from migx_explore.cli import main
from tests.dynamic_exports import cnn_feed, dyn_batch_cnn
from tests.onnx.onnx_util import run_ort


def test_cli_verbs_on_a_batch_range(tmp_path, capsys):
    model = tmp_path / "cnn.onnx"
    onnx.save(dyn_batch_cnn(), model)
    dim = ["--input-dim", "batch_size=1..4"]
    assert main(["read", str(model), *dim]) == 0
    assert "dynamic, float32, {[1..4], 10}" in capsys.readouterr().out
    for batch in (2, 4):
        feed, out = tmp_path / f"f{batch}.npz", tmp_path / f"o{batch}.npz"
        np.savez(feed, **cnn_feed(batch))
        assert main(["run", str(model), *dim, "--inputs", str(feed), "--out", str(out)]) == 0
        got = np.load(out)
        ours = got[got.files[0]]
        np.testing.assert_allclose(ours, run_ort(dyn_batch_cnn(), cnn_feed(batch))[0], rtol=1e-4, atol=1e-5)
    capsys.readouterr()
    assert main(["verify", str(model), *dim]) == 0
    assert "OK: every pass keeps the outputs within tolerance" in capsys.readouterr().out
    assert main(["trace", str(model), *dim, "--out", str(tmp_path / "trace"), "-q"]) == 0
    index = json.loads((tmp_path / "trace" / "index.json").read_text())
    assert index["error"] is None


def test_verify_on_a_range_checks_the_backend_passes_too(tmp_path, capsys):
    """The backend's output buffers have the range's dynamic shape; verify evaluates through them
    (it used to stop at backend.replace_allocate with 'missing input(s)')."""
    model = tmp_path / "cnn.onnx"
    onnx.save(dyn_batch_cnn(), model)
    assert main(["verify", str(model), "--input-dim", "batch_size=1..4"]) == 0
    out = capsys.readouterr().out
    assert "numeric checks stopped" not in out
    assert "OK: every pass keeps the outputs within tolerance" in out


def test_verify_a_qdq_cnn_over_a_batch_range(tmp_path, capsys):
    from tests.qdq_models import image_batches, quantize_qdq, resnet_like

    model = tmp_path / "qdq.onnx"
    onnx.save(quantize_qdq(resnet_like(), image_batches(4)), model)
    assert main(["verify", str(model), "--input-dim", "input=1..4,3,16,16"]) == 0
    out = capsys.readouterr().out
    assert "tolerance: relative RMS <= 0.1 (int8)" in out
    assert "OK: every pass keeps the outputs within tolerance" in out
