"""The torch sides of benchmarks/issue28_table.py compute the same networks as ours, checked on the
CPU where PyTorch is installed (skipped elsewhere): OnnxTorch with the detectors' ops against
onnxruntime, its make_fx trace (what torch.compile gets) against itself, and the cuDNN-LSTM
baseline carrying the bilstm model's weights."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from migx_explore import models  # noqa: E402


def test_onnx_torch_runs_yolov10n_and_its_flat_trace_agrees():
    import issue28_report
    from gpu_onnx_torch import OnnxTorch
    from torch.fx.experimental.proxy_tensor import make_fx

    model = models.get_model("yolov10n")
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 640, 640)).astype(np.float32)
    net = OnnxTorch(model, device="cpu")
    got = net(torch.from_numpy(x))[0].numpy()
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"images": x})[0]
    d = issue28_report.detection_errors(got, want)
    assert d["sorted_score_err"] < 1e-5 and d["matched"] == d["rows"] == 300 and d["matched_box_err"] < 1e-5
    flat = make_fx(net)(torch.from_numpy(x))  # TopK's k and the other host constants baked in
    assert np.array_equal(flat(torch.from_numpy(x))[0].numpy(), got)


def test_lstm_baseline_has_the_models_weights():
    from gpu_issue28_rows import lstm_module

    model = models.get_model("bilstm")
    x = np.random.default_rng(1).standard_normal((32, 1, 64)).astype(np.float32)
    with torch.no_grad():
        got = lstm_module(model, device="cpu")(torch.from_numpy(x)).numpy()
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input": x})[0]
    np.testing.assert_allclose(got, want, atol=1e-5)
