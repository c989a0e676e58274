"""Shared by the issue-40 tests and the hostile-input fuzz: build a one-node model, run it through
`migx-explore run` in-process and through ONNX Runtime, and say whether the two agree (equal
outputs, or we exit 2 with one line where ORT refuses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from migx_explore.cli import main

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model_bytes(nodes, inputs, outputs, opset: int = 18, inits=()) -> bytes:
    """inputs / outputs: (name, elem_type, dims) triples."""
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, d) for n, t, d in inputs],
        [helper.make_tensor_value_info(n, t, d) for n, t, d in outputs],
        initializer=list(inits),
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    return m.SerializeToString()


def run_ort(model: bytes, feed: dict[str, np.ndarray]) -> list[np.ndarray] | str:
    """ORT's outputs, or its error text when it refuses the model or the feed."""
    import onnxruntime as ort

    try:
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        return [np.asarray(o) for o in sess.run(None, feed)]
    except Exception as e:  # noqa: BLE001 - any ORT refusal counts as a refusal
        return str(e) or type(e).__name__


def run_ours(capsys, tmp: Path, model: bytes, feed: dict[str, Any], *extra: str) -> tuple[int, str, dict]:
    """(exit code, stderr, outputs by name) of `migx-explore run model --inputs feed --out out`."""
    tmp.mkdir(parents=True, exist_ok=True)
    mp, fp, op = tmp / "m.onnx", tmp / "feed.npz", tmp / "out.npz"
    mp.write_bytes(model)
    np.savez(fp, **feed)
    op.unlink(missing_ok=True)
    capsys.readouterr()
    rc = main(["run", str(mp), "--inputs", str(fp), "--out", str(op), *extra])
    err = capsys.readouterr().err
    outs = dict(np.load(op)) if rc == 0 and op.exists() else {}
    return rc, err, outs


def assert_clean_refusal(rc: int, err: str, *words: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip() and "warning:" not in ln]
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def assert_agrees_with_ort(
    capsys, tmp: Path, model: bytes, feed: dict[str, Any], out_names: list[str], *extra: str
) -> str:
    """Ours equals ORT's result (values and shapes), or both refuse (ours with one line, exit 2).
    `extra`: more `run` arguments (`--target gpu`). Returns 'refused' or 'equal'."""
    want = run_ort(model, feed)
    rc, err, got = run_ours(capsys, tmp, model, feed, *extra)
    if isinstance(want, str):
        assert_clean_refusal(rc, err)
        return "refused"
    assert rc == 0, f"ORT runs it but we exit {rc}: {err}"
    for name, w in zip(out_names, want):
        assert got[name].shape == w.shape, f"{name}: shape {got[name].shape}, ORT's is {w.shape}"
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-6, err_msg=name)
    return "equal"
