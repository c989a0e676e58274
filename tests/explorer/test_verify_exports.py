"""verify on third-party-shaped exports (tests/export_models.py): a BERT-style model with token
types and an attention mask, a YOLO-style model with outputs up to ~700; with random inputs and
with real ones (--inputs / inputs=), through the CLI and the Session."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from migx_explore.bisect import numeric_bisect
from migx_explore.cli import main
from migx_explore.compiler.errors import MigxError
from migx_explore.feeds import load_with_feed
from migx_explore.session import Session
from migx_explore.verification import verify_session
from tests.export_models import bert_feed, bert_like, yolo_feed, yolo_like


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    d = tmp_path_factory.mktemp("exports")
    paths = {}
    for name, model, feed in (("bert", bert_like(), bert_feed()), ("yolo", yolo_like(), yolo_feed())):
        onnx.save(model, d / f"{name}.onnx")
        np.savez(d / f"{name}.npz", **feed)
        paths[name] = (str(d / f"{name}.onnx"), str(d / f"{name}.npz"))
    return paths


BERT_DIMS = ["--input-dim", "input_ids=2,8", "--input-dim", "token_type_ids=2,8", "--input-dim", "attention_mask=2,8"]


@pytest.mark.parametrize("model", ["bert", "yolo"])
@pytest.mark.parametrize("real", [False, True], ids=["random", "real"])
def test_verify_passes_with_defaults(exports, capsys, model, real):
    path, feed = exports[model]
    extra = ["--inputs", feed] if real else (BERT_DIMS if model == "bert" else [])
    assert main(["verify", path, *extra]) == 0
    out = capsys.readouterr().out
    assert "OK: every pass keeps the outputs within tolerance" in out
    assert "relative RMS <= 9.54e-06 (float32)" in out
    assert ("inputs from" in out) == real


def test_old_allclose_tolerance_still_available(exports, capsys):
    path, feed = exports["yolo"]
    # the false alarm: float32 reassociation on outputs up to ~700 under rtol 1e-4 / atol 1e-5
    code = main(["verify", path, "--inputs", feed, "--no-backend", "--rtol", "1e-6", "--atol", "1e-7", "--bisect"])
    out = capsys.readouterr().out
    assert code == 1 and "allclose rtol 1e-06, atol 1e-07" in out and "FAIL: pass" in out
    assert "first diverging" in out


def test_bert_random_inputs_respect_the_tables(exports):
    path, _ = exports["bert"]
    s = Session.from_onnx(
        path, input_dims={n: [2, 8] for n in ("input_ids", "token_type_ids", "attention_mask")}, include_backend=False
    )
    report = verify_session(s)
    assert report.ok, str(report)
    feeds = s.traces.numeric_config().inputs
    assert feeds["token_type_ids"].max() <= 1 and feeds["input_ids"].max() < 30
    assert set(np.unique(feeds["attention_mask"])) <= {0, 1}


def test_session_takes_real_inputs_and_their_shapes_fix_symbolic_dims(exports):
    path, feed = exports["bert"]
    s = Session.from_onnx(path, inputs=feed, include_backend=False)
    assert s.initial.to_program().main.get_parameter("input_ids").shape.lens == (2, 8)
    report = verify_session(s)
    assert report.ok and report.inputs == "the given inputs"
    np.testing.assert_array_equal(s.traces.numeric_config().inputs["attention_mask"], bert_feed()["attention_mask"])
    assert numeric_bisect(s) is None
    assert numeric_bisect(s, inputs=bert_feed()) is None


def test_feed_that_contradicts_a_static_dim_is_a_clear_error(exports, tmp_path):
    path, _ = exports["yolo"]
    bad = tmp_path / "bad.npz"
    np.savez(bad, images=np.zeros((1, 3, 16, 16), np.float32))
    with pytest.raises(MigxError, match=r"input 'images' has shape \[1, 3, 16, 16\] but the model fixes dim 2 to 32"):
        load_with_feed(path, str(bad))
    assert main(["verify", path, "--inputs", str(bad)]) == 2


def test_feed_key_errors(exports, tmp_path):
    path, _ = exports["yolo"]
    with pytest.raises(MigxError, match="unknown input 'pixels'"):
        load_with_feed(path, {"images": yolo_feed()["images"], "pixels": np.zeros(1)})
    with pytest.raises(MigxError, match="missing input"):
        load_with_feed(path, {})
    with pytest.raises(MigxError, match="not found"):
        load_with_feed(path, str(tmp_path / "nope.npz"))


def test_builtin_model_with_inputs(tmp_path, capsys):
    from migx_explore import models
    from migx_explore.compiler.inputs import random_inputs

    feed = random_inputs(models.load("mlp"), seed=4)
    np.savez(tmp_path / "mlp.npz", **feed)
    assert main(["verify", "mlp", "--inputs", str(tmp_path / "mlp.npz"), "--no-backend"]) == 0
    assert (
        main(["trace", "mlp", "--inputs", str(tmp_path / "mlp.npz"), "--no-backend", "--out", str(tmp_path / "tr")])
        == 0
    )
    out = capsys.readouterr().out
    assert "rms " in out  # the numeric column, through the same check


def test_shape_like_inputs_need_real_values(tmp_path):
    from onnx import TensorProto, helper

    from tests.onnx.onnx_util import make_model, vi

    m = make_model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [vi("x", TensorProto.FLOAT, [2, 6]), vi("shape", TensorProto.INT64, [2])],
        [vi("y")],
    )
    path = tmp_path / "reshape.onnx"
    onnx.save(m, path)
    with pytest.raises(MigxError, match="shape-like.*--inputs FEED.npz"):
        load_with_feed(str(path))
    prog, feed = load_with_feed(
        str(path), {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "shape": np.array([3, 4])}
    )
    assert list(feed) == ["x"] and prog.main.output_shapes()[0].lens == (3, 4)


def test_waterfall_and_compile_take_inputs(tmp_path, capsys):
    from migx_explore import models
    from migx_explore.compiler.inputs import random_inputs

    feed = tmp_path / "mlp.npz"
    np.savez(feed, **random_inputs(models.load("mlp"), seed=2))
    assert main(["waterfall", "mlp", "--inputs", str(feed), "--no-gpu", "--by", "pipeline"]) == 0
    bad = tmp_path / "bad.npz"
    np.savez(bad, nope=np.zeros(3))
    assert main(["waterfall", "mlp", "--inputs", str(bad), "--no-gpu"]) == 2
    assert "unknown input 'nope'" in capsys.readouterr().err
