"""--fp16 / --bf16 / --int8 / --fp8 / --calibration on the verbs that compile a program."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.cli import main
from migx_explore.session import Session


@pytest.mark.parametrize(
    "flag,first", [("--fp16", "truncate_float"), ("--int8", "capture_arguments"), ("--fp8", "quantize_8bits")]
)
def test_passes_lists_the_quantize_stage(capsys, flag, first):
    assert main(["passes", flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("quantize (")
    assert first in out.split("dynamic_shapes")[0]


def test_passes_without_a_flag_has_no_stage(capsys):
    assert main(["passes"]) == 0
    assert capsys.readouterr().out.startswith("dynamic_shapes (")


def test_read_fp16_prints_half_weights(capsys):
    assert main(["read", "mlp", "--fp16"]) == 0
    out = capsys.readouterr().out
    assert "-> float16, {" in out and "convert[target_type=float16]" in out


def test_run_int8_with_calibration_matches_fp32_closely(tmp_path, capsys):
    feed = {"x": np.random.default_rng(3).uniform(-1, 1, (1, 784)).astype(np.float32)}
    np.savez(tmp_path / "feed.npz", **feed)
    assert main(["run", "mlp", "--inputs", str(tmp_path / "feed.npz"), "--out", str(tmp_path / "fp32.npz")]) == 0
    assert (
        main(
            [
                "run",
                "mlp",
                "--int8",
                "--calibration",
                str(tmp_path / "feed.npz"),
                "--inputs",
                str(tmp_path / "feed.npz"),
                "--out",
                str(tmp_path / "int8.npz"),
            ]
        )
        == 0
    )
    a, b = np.load(tmp_path / "fp32.npz"), np.load(tmp_path / "int8.npz")
    for k in a.files:
        rel = np.sqrt(np.mean((a[k] - b[k]) ** 2)) / np.sqrt(np.mean(a[k] ** 2))
        assert 0 < rel < 5e-2  # quantized (not identical) yet close


def test_flags_are_exclusive_and_calibration_must_exist(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["run", "mlp", "--fp16", "--int8"])
    assert main(["run", "mlp", "--int8", "--calibration", str(tmp_path / "missing.npz")]) == 2
    assert "missing.npz: file not found" in capsys.readouterr().err


def test_trace_fp8_writes_the_stage(tmp_path, capsys):
    assert main(["trace", "mlp", "--fp8", "--out", str(tmp_path / "t")]) == 0
    names = " ".join(p.name for p in (tmp_path / "t").iterdir())
    assert "quantize_8bits" in names


def test_session_precision_adds_the_stage_and_keeps_options():
    import warnings

    from migx_explore import models

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = Session(models.load("mlp"), name="mlp", precision="fp16", numeric=False)
    assert s.pipelines[0].name == "quantize" and s.config.options.precision == "fp16"
    assert any(r.path == "quantize.truncate_float" and r.diff and not r.diff.is_noop for r in s.trace.records)
