"""Symbolic dims by name (input_dims / --input-dim P=...) and dims from a feed."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.onnx.dims import feed_input_dims, importer_input_dims, symbolic_dims
from migx_explore.models import get_model
from migx_explore.models.gpt2_decode import decode_feed

PASTS = [f"past_{kv}_{i}" for i in range(4) for kv in ("key", "value")]


def _param_lens(program):
    return {p.param_name: p.shape for p in program.main.params()}


def test_symbolic_dims_lists_every_input_using_a_name():
    syms = symbolic_dims(get_model("gpt2_decode"))
    assert syms["T"] == [("input_ids", 1)]
    assert sorted(name for name, axis in syms["P"]) == sorted(PASTS)
    assert {axis for _, axis in syms["P"]} == {2}


def test_a_named_dim_binds_every_input_that_uses_it():
    shapes = _param_lens(parse_onnx(get_model("gpt2_decode"), input_dims={"P": 127, "T": 1}))
    assert shapes["input_ids"].lens == (1, 1)
    for name in PASTS:
        assert shapes[name].lens == (1, 4, 127, 32) and shapes[name].dyn_dims is None


def test_a_named_range_makes_every_user_dynamic():
    shapes = _param_lens(parse_onnx(get_model("gpt2_decode"), input_dims={"P": [(1, 255)], "T": 1}))
    for name in PASTS:
        assert str(shapes[name]) == "dynamic, float32, {1, 4, [1..255], 32}"


def test_an_input_named_directly_wins_over_its_symbolic_dim():
    dims = importer_input_dims(get_model("gpt2_decode"), {"P": 3, "past_key_0": [1, 4, 3, 32]})
    assert dims["past_key_0"] == [1, 4, 3, 32] and dims["past_value_3"] == [1, 4, 3, 32]


def test_feed_fixes_the_dims_without_flags():
    feed = decode_feed(past=127, new=1)
    shapes = _param_lens(parse_onnx(get_model("gpt2_decode"), feed=feed))
    assert shapes["past_value_2"].lens == (1, 4, 127, 32) and shapes["input_ids"].lens == (1, 1)
    assert feed_input_dims(get_model("gpt2_decode"), feed)["input_ids"] == [1, 1]


def test_feed_with_two_sizes_for_one_symbolic_dim_names_the_dim_and_its_users():
    feed = decode_feed(past=6, new=1)
    feed["past_value_1"] = feed["past_value_1"][:, :, :2]
    with pytest.raises(MigxError) as e:
        parse_onnx(get_model("gpt2_decode"), feed=feed)
    msg = str(e.value)
    assert "symbolic dim 'P'" in msg and all(n in msg for n in PASTS) and "past_value_1[2]=2" in msg


def test_unknown_name_lists_inputs_and_symbolic_dims():
    with pytest.raises(MigxError, match=r"unknown input\(s\) 'Q'.*symbolic dims are 'T' \(used by input_ids\)"):
        parse_onnx(get_model("gpt2_decode"), input_dims={"Q": 3})


def test_unfixed_symbolic_dim_warning_names_it():
    with pytest.warns(UserWarning, match=r"\('T'\) is not fixed.*--input-dim T="):
        parse_onnx(get_model("gpt2_decode"), input_dims={"P": 4})


def test_cli_run_takes_dims_from_the_feed(tmp_path, capsys):
    from migx_explore.cli import main

    path = tmp_path / "feed.npz"
    np.savez(path, **decode_feed(past=5, new=2))
    assert main(["run", "gpt2_decode", "--inputs", str(path)]) == 0
    out = capsys.readouterr().out
    assert "logits: float32 [1, 2, 512]" in out and "present_key_0: float32 [1, 4, 7, 32]" in out


def test_cli_input_dim_by_symbolic_name(capsys):
    from migx_explore.cli import main

    assert main(["read", "gpt2_decode", "--input-dim", "P=1..255", "--input-dim", "T=1"]) == 0
    assert "past_key_3 = @param:past_key_3 -> dynamic, float32, {1, 4, [1..255], 32}" in capsys.readouterr().out


def test_session_takes_dims_from_its_inputs():
    from migx_explore.session import Session

    s = Session.from_model("gpt2_decode", inputs=decode_feed(past=3, new=1), include_backend=False)
    assert s.initial.to_program().main.get_parameter("past_key_0").shape.lens == (1, 4, 3, 32)
