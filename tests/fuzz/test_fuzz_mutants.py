"""Mutated built-in models against ONNX Runtime (issue 26): every outcome of `migx-explore run` on
a mutant must be a clean refusal (exit 2, one error line) or outputs that match what onnxruntime
computes on the same feed. Running a model ORT refuses counts as a failure, as does a crash, an
exit 3, a traceback or a hang. A few hundred cases in the default run; `-m slow` adds 1,200 more.

A failure names its case; `mutant(SEED, i)` (tests/fuzz/mutate_builtin.py) rebuilds it alone.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

from .mutate_builtin import mutant
from .test_fuzz_cli import problem, run_cli

ort = pytest.importorskip("onnxruntime")

SEED = 26
DEFAULT, SLOW, BATCH = 240, 1200, 40


@pytest.fixture(autouse=True)
def budgets(monkeypatch):
    """Small memory and work budgets: a mutant that declares a huge tensor or loops without end is
    refused up front (that path is under test too) instead of spending the suite's time."""
    monkeypatch.setenv("MIGX_EXPLORE_MEMORY_BUDGET", "64M")
    monkeypatch.setenv("MIGX_EXPLORE_WORK_BUDGET", "200K")


def _ort_outputs(model: onnx.ModelProto, feed: dict) -> tuple[list | None, str]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    # ORT's fusions (Conv+BatchNorm folding and the like) reorder arithmetic; without them its
    # results are the plain per-node ones, comparable on the inf/NaN weights mutants carry.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(None, feed))), ""
    except Exception as e:  # noqa: BLE001 - any refusal by ORT
        return None, " ".join(str(e).split())[:200]


def _mismatch(ours: dict, theirs: dict, ill_conditioned: bool) -> str | None:
    for name, want in theirs.items():
        if name not in ours:
            return f"output {name!r} missing"
        got, want = np.asarray(ours[name]), np.asarray(want)
        if got.shape != want.shape:
            return f"output {name!r} shape {got.shape} vs onnxruntime {want.shape}"
        if want.dtype.kind in "biu":
            if not np.array_equal(got.astype(want.dtype), want):
                return f"output {name!r} differs from onnxruntime (exact)"
        else:
            g, w = got.astype(np.float64), want.astype(np.float64)
            same_special = (
                np.array_equal(np.isnan(g), np.isnan(w))
                and np.array_equal(np.isinf(g), np.isinf(w))
                and np.array_equal(g[np.isinf(g)], w[np.isinf(w)])
            )
            if not same_special and not ill_conditioned:
                return f"output {name!r}: NaN/inf where onnxruntime has none, or the reverse"
            finite = np.isfinite(w) & np.isfinite(g)
            if finite.any():
                # Relative to the output's scale, as both runtimes round sums in their own order;
                # looser where the mutation made the arithmetic ill-conditioned (a wrong op or
                # wrong semantics still shows as an error of the order of the scale).
                scale = float(np.max(np.abs(w[finite])))
                err = float(np.max(np.abs(g[finite] - w[finite])))
                if err > 1e-4 + (3e-2 if ill_conditioned else 1e-3) * scale:
                    return f"output {name!r} differs from onnxruntime (max|err| {err:.3g}, output scale {scale:.3g})"
    return None


def check_case(i: int, folder) -> str | None:
    case = mutant(SEED, i)
    path = folder / f"{i}.onnx"
    path.write_bytes(case.model.SerializeToString())
    argv = ["run", str(path)]
    if case.feed is not None:
        np.savez(folder / f"{i}.in.npz", **case.feed)
        argv += ["--inputs", str(folder / f"{i}.in.npz"), "--out", str(folder / f"{i}.out.npz")]
    rc, err = run_cli(argv)
    why = problem(argv, rc, err)
    if why:
        return f"{case.name}: {why}"
    if rc == 2:
        return None  # a clean refusal
    if rc != 0:
        return f"{case.name}: exit {rc}"
    if case.feed is None:
        return f"{case.name}: ran a model whose declared inputs cannot be fed"
    theirs, ort_error = _ort_outputs(case.model, case.feed)
    if theirs is None:
        return f"{case.name}: ran it, but onnxruntime refuses it ({ort_error})"
    with np.load(folder / f"{i}.out.npz") as z:
        ours = {k: z[k] for k in z.files}
    why = _mismatch(ours, theirs, case.ill_conditioned)
    return f"{case.name}: {why}" if why else None


def _run(start: int, stop: int, tmp_path) -> None:
    failures = []
    for i in range(start, stop):
        why = check_case(i, tmp_path)
        if why:
            failures.append(why)
        for p in tmp_path.iterdir():
            os.unlink(p)
    assert not failures, f"{len(failures)} of {stop - start} cases:\n" + "\n".join(failures)


@pytest.mark.parametrize("start", range(0, DEFAULT, BATCH))
def test_mutated_builtin_models(tmp_path, start):
    _run(start, start + BATCH, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("start", range(DEFAULT, DEFAULT + SLOW, BATCH * 2))
def test_mutated_builtin_models_more(tmp_path, start):
    _run(start, start + BATCH * 2, tmp_path)
