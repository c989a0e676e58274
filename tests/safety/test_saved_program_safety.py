"""Issue 14: saved programs and caches trust nothing: every malformed part is one FormatError line,
sizes are checked before decompressing, resume positions are validated."""

from __future__ import annotations

import json
import time

import pytest

from migx_explore import models
from migx_explore.cli import main as cli
from migx_explore.compiler.errors import FormatError
from migx_explore.compiler.serialize import load_program_file
from migx_explore.portable import compile_until, load_partial

from .saved_tamper import claim_size, read_members, tamper, write_members


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "part.migx"
    compile_until(models.load("mlp"), "fusion.fuse_concat", str(path), model="mlp")
    return path


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A partial saved after compile_ops on the recording fake backend: it carries kernel rows."""
    import os

    path = tmp_path_factory.mktemp("saved") / "kernels.migx"
    old = os.environ.get("MIGX_GPU_BACKEND")
    os.environ["MIGX_GPU_BACKEND"] = "fake"
    try:
        compile_until(models.load("mlp"), "backend.compile_ops", str(path), model="mlp")
    finally:
        os.environ.pop("MIGX_GPU_BACKEND") if old is None else os.environ.__setitem__("MIGX_GPU_BACKEND", old)
    return path


def refused(path, match: str) -> str:
    with pytest.raises(FormatError, match=match) as e:
        load_partial(str(path))
    assert "\n" not in str(e.value)
    return str(e.value)


def test_ids_json_a_list(partial, tmp_path):
    bad = tamper(partial, tmp_path / "b.migx", lambda m, d: d.__setitem__("ids.json", b"[1, 2]"))
    refused(bad, "ids.json must map module names")


def test_ids_json_malformed_rows(partial, tmp_path):
    def edit(m, d):
        ids = json.loads(d["ids.json"])
        ids["main"][0] = "x"
        d["ids.json"] = json.dumps(ids).encode()

    refused(tamper(partial, tmp_path / "b.migx", edit), "ids.json row 'x' of module main")


def test_missing_blob(compiled, tmp_path):
    def edit(m, d):
        name = next(n for n in d if n.startswith("blobs/"))
        del d[name], m["members"][name]

    refused(tamper(compiled, tmp_path / "b.migx", edit), "blob .* is listed but its member is missing")


@pytest.mark.parametrize(
    "rows, match",
    [
        ({"a": 1}, "kernel table is a dict"),
        ([7], "kernel row '7' is malformed"),
        ([{"key": "nope"}], "kernel 'nope': its source blob"),
    ],
)
def test_malformed_kernel_rows(compiled, tmp_path, rows, match):
    refused(tamper(compiled, tmp_path / "b.migx", lambda m, d: m["metadata"].__setitem__("kernels", rows)), match)


def test_kernel_row_with_malformed_binaries(compiled, tmp_path):
    def edit(m, d):
        m["metadata"]["kernels"][0]["binaries"] = "all of them"

    refused(tamper(compiled, tmp_path / "b.migx", edit), "binaries entry is malformed")


@pytest.mark.parametrize("position", [[9, 0], [0, 999], [-1, 0]])
def test_resume_position_out_of_range(partial, tmp_path, capsys, position):
    bad = tamper(partial, tmp_path / "b.migx", lambda m, d: m["metadata"].__setitem__("next", position))
    refused(bad, "resume position .* is outside its pipelines")
    assert cli(["compile", str(bad), "--resume"]) == 2
    assert "ran 0 passes" not in capsys.readouterr().out


def test_truncated_saved_program_is_not_reported_as_onnx(partial, tmp_path, capsys):
    cut = tmp_path / "cut.migx"
    cut.write_bytes(partial.read_bytes()[:200])
    assert cli(["read", str(cut)]) == 2
    err = capsys.readouterr().err
    assert "truncated" in err and "ONNX" not in err


def test_zip_bomb_refused_before_decompressing(partial, tmp_path):
    bomb = tmp_path / "bomb.migx"
    manifest, members = read_members(partial)
    members["program.txt"] = b"x" * 64
    write_members(bomb, manifest, members)
    manifest["members"]["program.txt"]["size"] = 1 << 30
    write_members(bomb, manifest, members, rehash=False)
    claim_size(bomb, "program.txt", 1 << 30)  # the directory now claims 1 GiB for 64 bytes of data
    t0 = time.perf_counter()
    with pytest.raises(FormatError, match="would decompress to 1,073,741,824 bytes"):
        load_program_file(bomb)
    assert time.perf_counter() - t0 < 1.0


def test_manifest_bomb_refused(partial, tmp_path):
    bomb = tmp_path / "bomb.migx"
    bomb.write_bytes(partial.read_bytes())
    claim_size(bomb, "manifest.json", 1 << 31)
    with pytest.raises(FormatError, match="manifest.json would decompress"):
        load_program_file(bomb)


def test_literal_size_must_match_its_shape(tmp_path):
    import numpy as np

    from migx_explore.compiler import parse
    from migx_explore.compiler.serialize import save_program

    p = parse("x = @param:x -> float_type, {4}\n")
    p.main.add_literal(np.ones(4, np.float32))
    src = tmp_path / "p.migx"
    save_program(p, src)

    def edit(m, d):
        m["literals"]["0"]["shape"] = [1 << 20]

    with pytest.raises(FormatError, match="literal 0 is 16 bytes but its shape"):
        load_program_file(tamper(src, tmp_path / "b.migx", edit))


def test_saved_program_in_a_folder_or_fifo_refused(tmp_path):
    import os

    with pytest.raises(FormatError, match="not a regular file"):
        load_program_file(tmp_path)
    os.mkfifo(tmp_path / "p")
    with pytest.raises(FormatError, match="not a regular file"):
        load_program_file(tmp_path / "p")
