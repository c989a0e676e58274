"""Portable programs: save after a pass, finish in a fresh process, same result as a direct compile."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import numpy as np
import pytest

from migx_explore import models
from migx_explore.cli import main as cli
from migx_explore.compiler.inputs import random_inputs
from migx_explore.compiler.ref import evaluate, with_buffer_params
from migx_explore.compiler.serialize import load_program_file
from migx_explore.portable import compile_until


def _finish_in_fresh_process(part, out, tmp_path):
    code = (
        "import sys; from migx_explore.cli import main; "
        f"sys.exit(main(['compile', {str(part)!r}, '--resume', '--out', {str(out)!r}]))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("until", ["fusion.dead_code_elimination#5", "backend.compile_ops"])
def test_save_after_a_pass_and_resume_in_a_fresh_process(tmp_path, until):
    part, done, direct = tmp_path / "part.migx", tmp_path / "done.migx", tmp_path / "direct.migx"
    compile_until(models.load("mlp"), until, str(part), model="mlp")
    out = _finish_in_fresh_process(part, done, tmp_path)
    assert f"saved after {until}" in out
    compile_until(models.load("mlp"), None, str(direct), model="mlp")
    a, b = load_program_file(done).program, load_program_file(direct).program
    assert str(a) == str(b)  # same lowered program, instruction for instruction
    feeds = random_inputs(models.load("mlp"), seed=3)
    out_a = evaluate(a, with_buffer_params(a, feeds))
    for x, y in zip(out_a, evaluate(b, with_buffer_params(b, feeds))):
        np.testing.assert_array_equal(x, y)
    ref = evaluate(models.load("mlp"), feeds)
    np.testing.assert_allclose(out_a[0], ref[0], rtol=1e-4, atol=1e-5)


def test_kernels_travel_as_source(tmp_path):
    part = tmp_path / "part.migx"
    compile_until(models.load("mlp"), "backend.compile_ops", str(part), model="mlp")
    with zipfile.ZipFile(part) as z:
        names = z.namelist()
    assert any(n.startswith("blobs/kernels/") and n.endswith(".json") for n in names)


def test_tampered_and_truncated_partials_are_rejected(tmp_path, capsys):
    part = tmp_path / "part.migx"
    compile_until(models.load("mlp"), "fusion.fuse_concat", str(part), model="mlp")
    data = part.read_bytes()
    cut = tmp_path / "cut.migx"
    cut.write_bytes(data[: len(data) * 2 // 3])
    assert cli(["compile", str(cut), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and ("truncated" in err or "corrupt" in err or "not a zip" in err)
    assert "Traceback" not in err


def test_until_must_name_a_pass(tmp_path, capsys):
    assert cli(["compile", "mlp", "--until", "fusion.nope", "--out", str(tmp_path / "x.migx")]) == 2
    assert "is not a pass of the pipelines" in capsys.readouterr().err


def _resume_and_run(part, tmp_path, env_backend=None):
    import os

    env = dict(os.environ)
    if env_backend:
        env["MIGX_GPU_BACKEND"] = env_backend
    argv = ["compile", str(part), "--resume", "--run"]
    code = f"import sys; from migx_explore.cli import main; sys.exit(main({argv!r}))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
    )


def test_kernel_sources_suffice_to_finalize_in_a_fresh_process(tmp_path):
    """On the recording fake backend: finalize needs every kernel source, which only the file has."""
    part = tmp_path / "part.migx"
    compile_until(models.load("mlp"), "backend.compile_ops", str(part), model="mlp")
    res = _resume_and_run(part, tmp_path, "fake")
    assert res.returncode == 0, res.stderr
    assert "finalized on the recording fake backend" in res.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("until", ["fusion.dead_code_elimination#5", "backend.compile_ops"])
def test_portable_round_trip_runs_on_the_gpu(tmp_path, until):
    part = tmp_path / "part.migx"
    compile_until(models.load("yolo"), until, str(part), model="yolo")
    res = _resume_and_run(part, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "OK" in res.stdout
