"""Issue 14: outputs never clobber inputs, and every failure is one line (exit 2 known, 3 internal)."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper

from migx_explore import errors
from migx_explore.cli import main
from migx_explore.compiler.errors import MigxError


@pytest.fixture
def relu_onnx(tmp_path):
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    path = tmp_path / "m.onnx"
    path.write_bytes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9).SerializeToString()
    )
    return path


def one_line(capsys, argv, code=2) -> str:
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == code, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"migx-explore {argv[0]}: error: ")
    return lines[0]


def test_compile_out_onto_its_own_model_refused(capsys, relu_onnx):
    before = relu_onnx.read_bytes()
    assert "is the input" in one_line(capsys, ["compile", relu_onnx, "--out", relu_onnx])
    assert relu_onnx.read_bytes() == before


def test_out_through_a_link_to_an_input_refused(capsys, tmp_path, relu_onnx):
    link = tmp_path / "out.migx"
    link.symlink_to(relu_onnx)
    assert "is the input" in one_line(capsys, ["compile", relu_onnx, "--out", link, "--no-backend"])
    assert link.is_symlink()


def test_run_out_onto_its_inputs_feed_refused(capsys, tmp_path, relu_onnx):
    feed = tmp_path / "feed.npz"
    np.savez(feed, x=np.ones([1, 4], np.float32))
    before = feed.read_bytes()
    assert "feed.npz" in one_line(capsys, ["run", relu_onnx, "--inputs", feed, "--out", feed])
    assert feed.read_bytes() == before


def test_run_out_written_atomically(capsys, tmp_path, relu_onnx):
    out = tmp_path / "out.npz"
    assert main(["run", str(relu_onnx), "--out", str(out)]) == 0
    with np.load(out) as z:
        assert z.files == ["y"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out.npz"]  # no temporary left


def test_wrong_inputs_file_gives_no_allow_pickle_advice(capsys, tmp_path, relu_onnx):
    text = tmp_path / "feed.txt"
    text.write_text("x = 1\n")
    line = one_line(capsys, ["run", relu_onnx, "--inputs", text])
    assert "not an .npz" in line and "allow_pickle" not in line


def test_trace_out_an_existing_file_refused(capsys, tmp_path, relu_onnx):
    f = tmp_path / "f"
    f.write_text("keep me")
    assert "exists and is not a folder" in one_line(capsys, ["trace", relu_onnx, "--out", f])
    assert f.read_text() == "keep me"


def test_trace_out_a_foreign_folder_refused(capsys, tmp_path, relu_onnx):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "holiday.jpg").write_bytes(b"...")
    assert "not empty" in one_line(capsys, ["trace", relu_onnx, "--out", d, "-q"])
    assert [p.name for p in d.iterdir()] == ["holiday.jpg"]


def test_trace_out_a_folder_holding_the_model_refused(capsys, tmp_path, relu_onnx):
    assert "holds the input" in one_line(capsys, ["trace", relu_onnx, "--out", tmp_path, "-q"])
    assert relu_onnx.exists()


def test_trace_replaces_a_previous_trace_whole(capsys, tmp_path, relu_onnx):
    out = tmp_path / "trace"
    assert main(["trace", "mlp", "--out", str(out), "-q"]) == 0
    assert main(["trace", str(relu_onnx), "--out", str(out), "-q"]) == 0
    index = json.loads((out / "index.json").read_text())
    listed = {"000_input.txt", "index.json", "index.html"} | {p["file"] for p in index["passes"] if p["file"]}
    assert {p.name for p in out.iterdir()} == listed  # nothing left from the mlp trace
    assert index["model"] == "m" and index["generator"] == "migx-explore trace"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_internal_error_is_one_line_exit_3_naming_debug(capsys, monkeypatch, relu_onnx):
    def broken(*a, **k):
        raise KeyError("boom")

    monkeypatch.setattr("migx_explore.loading.load", broken)
    line = one_line(capsys, ["read", relu_onnx], code=3)
    assert "internal error KeyError" in line and "--debug" in line


def test_debug_shows_the_traceback(capsys, monkeypatch, relu_onnx):
    monkeypatch.setattr("migx_explore.loading.load", lambda *a, **k: 1 / 0)
    assert main(["read", str(relu_onnx), "--debug"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("migx-explore read: error: internal")


def test_os_errors_are_known_errors(capsys, tmp_path, relu_onnx):
    assert "does not exist" in one_line(capsys, ["run", relu_onnx, "--out", tmp_path / "no" / "o.npz"])


def test_describe_error_for_the_explorer():
    assert errors.describe_error(MigxError("bad\nthing")) == errors.UserMessage("bad thing", True)
    assert errors.describe_error(PermissionError(13, "Permission denied", "/x")).text == "/x: Permission denied"
    msg = errors.describe_error(TypeError("oops"))
    assert not msg.known and msg.exit_code == 3 and "internal error TypeError: oops" in msg.text
    assert errors.format_error(MigxError("x"), "trace") == "migx-explore trace: error: x"


def test_no_gpu_reason_shows_no_bytes_repr():
    from migx_explore.gpu.runtime import _plain

    text = _plain("failed to dlopen 'b'libamdhip64.so'': b'libamdhip64.so: cannot open shared object file'")
    assert "b'" not in text and "'libamdhip64.so'" in text


ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_headless_script_writes_per_model_folder():
    script = open(os.path.join(ROOT, "scripts", "explore.sh")).read()
    assert "out/${name%.onnx}" in script and "out/trace" not in script


def test_env_script_skips_pip_when_the_install_is_current(tmp_path):
    """ensure_venv twice with a recording `python`: pip runs the first time only, and again after
    pyproject.toml's fingerprint changes."""
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    calls = tmp_path / "calls"
    shim.write_text(f'#!/bin/sh\nif [ "$1" = "-m" ]; then echo "$@" >> {calls}; else echo "Python test"; fi\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}", "VIRTUAL_ENV": str(tmp_path)}
    cmd = f". {ROOT}/scripts/_env.sh && ensure_venv test && ensure_venv test"
    subprocess.run(["bash", "-c", cmd], env=env, check=True, timeout=60)
    assert calls.read_text().count("install --disable-pip-version-check -e") == 1
    stamp = next(tmp_path.glob(".migx-explore-install-test.stamp"))
    stamp.write_text("stale\n")
    subprocess.run(["bash", "-c", cmd], env=env, check=True, timeout=60)
    assert calls.read_text().count("install --disable-pip-version-check -e") == 2


@pytest.mark.parametrize("uid, root", [("0", True), ("1000", False)])
def test_explore_script_passes_allow_root_as_root_and_says_so(tmp_path, uid, root):
    """scripts/explore.sh (the README's main command) exited at once in root containers: Jupyter
    refuses root without --allow-root. Run with shims for `id`, `dot` and `python`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "python").write_text(
        f'#!/bin/sh\nif [ "$1" = "-m" ]; then echo "$@" >> {calls}; else echo "Python test"; fi\n'
    )
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "dot").write_text("#!/bin/sh\nexit 0\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "VIRTUAL_ENV": str(tmp_path)}
    res = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "explore.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    lab = [ln for ln in calls.read_text().splitlines() if "jupyterlab" in ln]
    assert len(lab) == 1 and "--LabApp.default_url=/lab/tree/notebooks/01_tour.ipynb" in lab[0]
    assert ("--allow-root" in lab[0]) == root
    assert ("running as root" in res.stderr) == root


def test_ambiguous_pass_name_is_called_ambiguous(capsys, tmp_path):
    line = one_line(capsys, ["compile", "mlp", "--until", "dead_code_elimination", "--out", tmp_path / "x.migx"])
    assert "is ambiguous" in line and "required.dead_code_elimination#1" in line and "not a pass" not in line
    line = one_line(capsys, ["compile", "mlp", "--until", "dead_code", "--out", tmp_path / "x.migx"])
    assert "did you mean dead_code_elimination" in line
    assert main(["compile", "mlp", "--until", "fuse_concat", "--out", str(tmp_path / "x.migx")]) == 0


def test_explorer_error_box_shows_known_errors_without_a_traceback():
    pytest.importorskip("ipywidgets")
    from migx_explore.widgets._common import ErrorBox

    box = ErrorBox(debug=False)
    box.show(MigxError("input 'x' needs\n4 TiB"), "load")
    assert box.text.strip() == "load: input 'x' needs 4 TiB" and "traceback" not in box.widget.value
    box.show(KeyError("k"), "step")  # one box: the newest replaces the last
    assert "input 'x'" not in box.text and "internal error KeyError" in box.text
    assert "<details>" not in box.widget.value and "MIGX_EXPLORE_DEBUG=1" in box.text  # only in debug mode
    debug = ErrorBox(debug=True)
    debug.show(KeyError("k"), "step")
    assert "<details><summary>traceback" in debug.widget.value  # folded behind a disclosure
