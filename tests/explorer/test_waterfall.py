"""Per-pass waterfall: variants, launch deltas, table/plot; GPU latency where a GPU exists."""

from __future__ import annotations

import pytest

from migx_explore.session import Session
from migx_explore.waterfall import variant_plan, waterfall


@pytest.fixture(scope="module")
def yolo():
    return Session.from_model("yolo", numeric=False)


def test_pass_waterfall_counts_launches_without_each_pass(yolo, tmp_path):
    wf = waterfall(yolo, by="pass", time_gpu=False)
    rows = {r["variant"]: r for r in wf.rows()}
    assert rows["(all passes)"]["d_launches"] == 0
    # without pointwise fusion every elementwise op launches on its own
    assert rows["-fusion.fuse_pointwise_reduce"]["d_launches"] > 20
    assert all(not r["error"] for r in rows.values())
    assert "latency not measured" in wf.table()
    wf.plot(str(tmp_path / "wf.png"))
    assert (tmp_path / "wf.png").stat().st_size > 10_000
    # the session is left as it was
    assert all(
        e.enabled == b.enabled
        for (_, e, _), b in zip(yolo.config.entries(), [e for pl in yolo.config.catalog for e in pl.entries])
    )


def test_pipeline_and_prefix_plans(yolo):
    assert [v.label for v in variant_plan(yolo, "pipeline")] == ["-optimize_rewrite", "-fusion"]
    wf = waterfall(yolo, by="prefix", time_gpu=False)
    launches = [r["launches"] for r in wf.rows()]
    assert launches[1] >= launches[2] > launches[0]  # required only >= +optimize_rewrite > everything


@pytest.mark.gpu
def test_gpu_waterfall_measures_both_modes(yolo):
    wf = waterfall(yolo, by="pipeline", iters=20)
    for r in wf.rows():
        assert r["eager_us"] and r["graph_us"] and not r["error"]
    rows = {r["variant"]: r for r in wf.rows()}
    assert rows["-fusion"]["d_eager_us"] > 0  # unfused pointwise kernels cost real time


def test_timing_path_runs_on_the_recording_fake_backend(monkeypatch):
    """The GPU timing plumbing (finalize, time both modes, read medians) without a GPU."""
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    s = Session.from_model("mlp", numeric=False)
    wf = waterfall(s, by="pipeline", iters=3, warmup=1)
    assert wf.timing_note == ""
    for r in wf.rows():
        assert not r["error"] and r["eager_us"] is not None and r["graph_us"] is not None
