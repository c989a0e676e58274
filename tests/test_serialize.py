"""Saved programs: lossless round trip, stable ids kept, tampered/truncated files rejected."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from ir_samples import FUSED

from migx_explore.compiler import Op, Program, Shape, evaluate, parse
from migx_explore.compiler.errors import FormatError
from migx_explore.compiler.serialize import load_program_file, save_program


def _program():
    p = parse(FUSED)
    w = p.main.add_literal(np.arange(6, dtype=np.float32).reshape(2, 3) / 7)
    b = p.main.add_literal(np.arange(6, dtype=np.float16).reshape(2, 3))
    ret = p.main.return_instruction()
    add = p.main.insert_instruction(ret, Op("add"), [ret.inputs[0], w])
    conv = p.main.insert_instruction(ret, Op("convert", target_type="float32"), [b])
    p.main.replace_return([add, conv])
    return p


def test_round_trip_is_exact_and_keeps_ids(tmp_path):
    p = _program()
    f = save_program(p, tmp_path / "p.migx", metadata={"resume_after": "fusion"}, blobs={"kernels/a.cu": b"x"})
    saved = load_program_file(f)
    q = saved.program
    assert q == p
    assert [i.id for i in q.main] == [i.id for i in p.main]
    assert saved.metadata == {"resume_after": "fusion"} and saved.blobs == {"kernels/a.cu": b"x"}
    x = np.ones((2, 3), np.float32)
    for a, b in zip(evaluate(p, {"x": x, "y": x}), evaluate(q, {"x": x, "y": x})):
        np.testing.assert_array_equal(a, b)
    # new instructions continue the id sequence instead of reusing saved ids
    new = q.main.add_parameter("z", Shape.of("float32", (1,)))
    assert new.id >= max(i.id for m in p.modules.values() for i in m) + 1


def test_bfloat16_and_bool_literals(tmp_path):
    p = Program()
    a = p.main.add_literal(np.array([1.5, -2.25], dtype=Shape.of("bfloat16", (2,)).dtype.np_dtype))
    b = p.main.add_literal(np.array([True, False]))
    p.main.add_return([a, b])
    assert load_program_file(save_program(p, tmp_path / "t.migx")).program == p


def _rewrite_member(src, dst, name, data):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, data if item.filename == name else zin.read(item.filename))


def test_tampered_member_is_rejected(tmp_path):
    f = save_program(_program(), tmp_path / "p.migx")
    bad = tmp_path / "bad.migx"
    with zipfile.ZipFile(f) as z:
        text = z.read("program.txt").replace(b"add(", b"mul(")
    _rewrite_member(f, bad, "program.txt", text)
    with pytest.raises(FormatError, match="program.txt fails its SHA-256 check"):
        load_program_file(bad)


def test_truncated_file_is_rejected(tmp_path):
    f = save_program(_program(), tmp_path / "p.migx")
    data = open(f, "rb").read()
    cut = tmp_path / "cut.migx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="truncated|corrupt|missing"):
        load_program_file(cut)


def test_wrong_version_and_foreign_files(tmp_path):
    f = save_program(_program(), tmp_path / "p.migx")
    with zipfile.ZipFile(f) as z:
        man = json.loads(z.read("manifest.json"))
    man["version"] = 99
    newer = tmp_path / "newer.migx"
    _rewrite_member(f, newer, "manifest.json", json.dumps(man).encode())
    with pytest.raises(FormatError, match="version 99 is not supported"):
        load_program_file(newer)
    junk = tmp_path / "junk.migx"
    junk.write_bytes(b"\x80\x04 definitely not a zip")
    with pytest.raises(FormatError, match="not a zip archive"):
        load_program_file(junk)
