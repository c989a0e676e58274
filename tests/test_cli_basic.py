"""CLI verbs read / run / onnx, and their one-line errors (exit status 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from migx_explore import models
from migx_explore.cli import main
from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.onnx import supported_ops


def _model_file(tmp_path, nodes, inputs, outputs, inits=(), name="m.onnx"):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    path = tmp_path / name
    path.write_bytes(m.SerializeToString())
    return path, m


def _relu_file(tmp_path):
    return _model_file(
        tmp_path,
        [helper.make_node("Relu", ["in:0"], ["out:0"])],
        [helper.make_tensor_value_info("in:0", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("out:0", TensorProto.FLOAT, [2, 3])],
    )


def _error_line(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"migx-explore {argv[0]}: error:")
    return lines[0]


def test_read_prints_ir_that_parses_back(capsys):
    assert main(["read", "mlp", "--full"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('module: "main"') and "dot(" in out
    assert parse(out) == models.load("mlp")


def test_read_onnx_file_with_input_dims(tmp_path, capsys):
    path, _ = _model_file(
        tmp_path,
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )
    assert main(["read", str(path), "--input-dim", "x=5,3"]) == 0
    cap = capsys.readouterr()
    assert "x = @param:x -> float32, {5, 3}" in cap.out and cap.err == ""
    assert main(["read", str(path)]) == 0
    cap = capsys.readouterr()
    assert "{1, 3}" in cap.out and "warning: input 'x': dimension 0 ('n')" in cap.err


def test_read_with_a_dynamic_range(capsys):
    assert main(["read", "dynamic_mlp", "--input-dim", "x=1..4,64"]) == 0
    assert "x = @param:x -> dynamic, float32, {[1..4], 64}" in capsys.readouterr().out
    assert "ranges must be lo..hi" in _error_line(capsys, ["read", "dynamic_mlp", "--input-dim", "x=4..1,64"])


def test_onnx_list_prints_every_supported_op(capsys):
    assert main(["onnx", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == supported_ops() and "Conv" in listed and "LayerNormalization" in listed
    assert main(["onnx", "--models"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in models.list_models())


def test_run_keys_npz_by_onnx_names(tmp_path, capsys):
    path, _ = _relu_file(tmp_path)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    feed, out = tmp_path / "feed.npz", tmp_path / "out.npz"
    np.savez(feed, **{"in:0": x})
    assert main(["run", str(path), "--inputs", str(feed), "--out", str(out)]) == 0
    with np.load(out) as z:
        assert z.files == ["out:0"]
        np.testing.assert_array_equal(z["out:0"], np.maximum(x, 0))
    assert "out:0: float32 [2, 3]" in capsys.readouterr().out


def test_run_without_inputs_uses_seeded_random_inputs(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["run", "transformer", "--out", str(a), "--seed", "3"]) == 0
    assert main(["run", "transformer", "--out", str(b), "--seed", "3"]) == 0
    with np.load(a) as za, np.load(b) as zb:
        assert za.files == ["encoded", "pooled"]
        np.testing.assert_array_equal(za["pooled"], zb["pooled"])


def test_run_gpu_target_goes_through_the_gpu_hook(monkeypatch, capsys):
    import migx_explore.gpu as gpu

    calls = []

    class FakeCompiled:
        def __init__(self, program, options=None):
            self.program = program

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            calls.append("closed")

        def run(self, inputs, mode="eager"):
            calls.append((sorted(inputs), mode))
            return evaluate(self.program, inputs)

    monkeypatch.setattr(gpu, "compile", FakeCompiled)
    assert main(["run", "mlp", "--target", "gpu", "--mode", "graph"]) == 0
    assert calls == [(["x"], "graph"), "closed"] and "log_probs: float32 [1, 10]" in capsys.readouterr().out
    monkeypatch.delattr(gpu, "compile")
    line = _error_line(capsys, ["run", "mlp", "--target", "gpu"])
    assert "--target gpu is unavailable" in line


# ---- one-line errors -----------------------------------------------------------------------------
def test_truncated_onnx_file(tmp_path, capsys):
    path, m = _model_file(
        tmp_path,
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])],
        [numpy_helper.from_array(np.ones(64, np.float32), "w")],
    )
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    line = _error_line(capsys, ["read", str(path)])
    assert "m.onnx" in line and ("protobuf" in line or "checker" in line)


def test_unknown_op(tmp_path, capsys):
    path, _ = _model_file(
        tmp_path,
        [helper.make_node("Det", ["x"], ["y"], name="u0")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    line = _error_line(capsys, ["run", str(path)])
    assert "Det" in line and "u0" in line and "migx-explore onnx --list" in line


def test_wrong_input_shape_in_feed(tmp_path, capsys):
    path, _ = _relu_file(tmp_path)
    feed = tmp_path / "feed.npz"
    np.savez(feed, **{"in:0": np.zeros((3, 2), np.float32)})
    line = _error_line(capsys, ["run", str(path), "--inputs", str(feed)])
    assert "'in:0'" in line and "[3, 2]" in line and "[2, 3]" in line


def test_missing_and_unknown_feed_names(tmp_path, capsys):
    path, _ = _relu_file(tmp_path)
    feed = tmp_path / "feed.npz"
    np.savez(feed, other=np.zeros((2, 3), np.float32))
    line = _error_line(capsys, ["run", str(path), "--inputs", str(feed)])
    assert "unknown input 'other'" in line and "inputs are in:0" in line


def test_external_data_escaping_the_folder(tmp_path, capsys):
    (tmp_path / "outside.bin").write_bytes(np.ones(4, np.float32).tobytes())
    sub = tmp_path / "model"
    sub.mkdir()
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    onnx.external_data_helper.set_external_data(w, location="../outside.bin")
    w.ClearField("raw_data")
    path, _ = _model_file(
        sub,
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [w],
    )
    line = _error_line(capsys, ["read", str(path)])
    assert "escapes the model folder" in line


def test_bad_input_dim_and_unknown_model(capsys):
    assert "expected NAME=D0,D1" in _error_line(capsys, ["read", "mlp", "--input-dim", "1,784"])
    assert "unknown input(s) 'y'" in _error_line(capsys, ["read", "mlp", "--input-dim", "y=1,784"])
    assert "did you mean resnet18, resnet_block?" in _error_line(capsys, ["read", "resnet50"])
    assert "built-in models: resnet_block" in _error_line(capsys, ["read", "zzz"])  # nothing close: the list
    assert "not found" in _error_line(capsys, ["read", "missing/model.onnx"])


def test_console_entry_point_runs_in_a_subprocess(tmp_path):
    path, _ = _relu_file(tmp_path)
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(path.read_bytes()[:20])
    r = subprocess.run(
        [sys.executable, "-m", "migx_explore", "read", str(cut)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    r = subprocess.run([sys.executable, "-m", "migx_explore", "onnx"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ONNX operators supported" in r.stdout


@pytest.mark.parametrize(
    "item,want",
    [
        ("x=1,3,224,224", {"x": [1, 3, 224, 224]}),
        ("a=2x3", {"a": [2, 3]}),
        ("s=", {"s": []}),
        ("x=1..8,64", {"x": [(1, 8), 64]}),
    ],
)
def test_input_dim_parsing(item, want):
    from migx_explore.loading import parse_input_dims

    assert parse_input_dims([item]) == want
