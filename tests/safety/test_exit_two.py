"""Issue 40 items 3 and 4: inputs that used to hang or end in exit 3 (internal error) are one line
naming the problem, exit 2."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from migx_explore import models
from migx_explore.cli import main
from migx_explore.compiler.errors import MigxError
from migx_explore.portable import compile_until
from migx_explore.session import Session
from tests.safety.hostile import F, assert_clean_refusal, model_bytes

from .saved_tamper import tamper


def relu(name="x", node="n0", rank=2, node_meta=None, model_meta=None) -> bytes:
    dims = [1] * rank
    g = helper.make_graph(
        [helper.make_node("Relu", [name], ["y"], name=node)],
        "g",
        [helper.make_tensor_value_info(name, F, dims)],
        [helper.make_tensor_value_info("y", F, dims)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    for k, v in (node_meta or {}).items():
        m.graph.node[0].metadata_props.add(key=k, value=v)
    for k, v in (model_meta or {}).items():
        m.metadata_props.add(key=k, value=v)
    return m.SerializeToString()


def cli(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def test_a_fifo_as_inputs_is_refused_at_once(capsys, tmp_path):
    fifo = tmp_path / "feed.npz"
    os.mkfifo(fifo)
    assert_clean_refusal(*cli(capsys, "run", "mlp", "--inputs", fifo), "is a FIFO")
    assert_clean_refusal(*cli(capsys, "verify", "mlp", "--inputs", fifo), "is a FIFO")


# every name is 5 bytes, so swapping in 5 bytes of invalid UTF-8 keeps the protobuf well formed
BAD = b"N\xff\xfeQ\xc3"


@pytest.mark.parametrize(
    "model,field",
    [
        (relu(node="NODEX"), "graph.node[0].name"),
        (relu(name="INPUT"), "graph.input[0].name"),
        (relu(node_meta={"namespace": "SPACE"}), "metadata_props[0]"),
        (relu(model_meta={"producer": "SPACE"}), "metadata_props[0]"),
    ],
    ids=["node_name", "input_name", "node_namespace", "model_metadata"],
)
def test_invalid_utf8_in_a_string_field_is_one_line(capsys, tmp_path, model, field):
    token = next(t for t in (b"NODEX", b"INPUT", b"SPACE") if t in model)
    path = tmp_path / "m.onnx"
    path.write_bytes(model.replace(token, BAD))
    for verb in ("read", "run"):
        assert_clean_refusal(*cli(capsys, verb, path), field, "not valid UTF-8")


def test_a_symlink_loop_as_external_data_is_one_line(capsys, tmp_path):
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    onnx.external_data_helper.set_external_data(w, location="loop.bin")
    w.ClearField("raw_data")
    m = model_bytes([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [4])], [("y", F, [4])], inits=[w])
    (tmp_path / "m.onnx").write_bytes(m)
    os.symlink("loop2.bin", tmp_path / "loop.bin")
    os.symlink("loop.bin", tmp_path / "loop2.bin")
    assert_clean_refusal(*cli(capsys, "read", tmp_path / "m.onnx"), "'w'", "loop.bin")


@pytest.mark.parametrize(
    "header",
    [b"{'descr'", b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", b"\xff\xfe garbage", b"(" * 5000],
)
def test_a_garbage_npy_header_in_a_feed_is_one_line(capsys, tmp_path, header):
    feed = tmp_path / "feed.npz"
    padded = header + b" " * ((-len(header) - 11) % 16) + b"\n"
    with zipfile.ZipFile(feed, "w") as z:
        z.writestr("x.npy", b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded + bytes(16))
    assert_clean_refusal(*cli(capsys, "run", "mlp", "--inputs", feed), "feed.npz")


def test_ids_json_nested_100000_deep_is_one_line(capsys, tmp_path):
    good = tmp_path / "p.migx"
    compile_until(models.load("mlp"), "fusion.fuse_concat", str(good), model="mlp")

    def nest(manifest, members):
        members["ids.json"] = b"[" * 100_000 + b"]" * 100_000

    bad = tamper(good, tmp_path / "bad.migx", nest)
    assert_clean_refusal(*cli(capsys, "read", bad), "ids.json")


@pytest.mark.parametrize("verb", ["run", "verify"])
def test_a_negative_seed_is_one_line(capsys, verb):
    assert_clean_refusal(*cli(capsys, verb, "mlp", "--seed", "-5"), "seed", "-5")


def test_a_rank_200_input_is_one_line(capsys, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(relu(rank=200))
    for verb in ("read", "run"):
        assert_clean_refusal(*cli(capsys, verb, path), "input 'x'", "rank 200")


def test_session_from_a_number_is_one_line():
    with pytest.raises(MigxError, match="not int 42"):
        Session.from_onnx(42)
