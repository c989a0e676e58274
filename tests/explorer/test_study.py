"""The ordering study and sweeps on Dask: planning legal moves, a planted ordering dependency found
and ranked first on a local cluster of 2 processes, failed variants as rows, the serial fallback,
results across models to parquet / CSV, and the CLI."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from migx_explore.bisect import perf_bisect
from migx_explore.session import Session
from migx_explore.study import plan_order_variants, study_order
from migx_explore.study_set import study_models, write_rows
from migx_explore.sweep import Sweeper, dask_available, sweep
from tests.planted_orderings import NAME, recompute_shared_kernels

ROOT = Path(__file__).resolve().parents[2]
needs_dask = pytest.mark.skipif(not dask_available(), reason="dask.distributed is not installed (the [sweep] extra)")


@pytest.fixture
def workers_import_tests(monkeypatch):
    """Dask worker processes unpickle the planted pass by reference: they must import `tests`."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def _planted(model: str = "resnet_block") -> Session:
    s = Session.from_model(model, numeric=False)
    s.insert_pass(recompute_shared_kernels, name=NAME, after="fusion.fuse_pointwise_reduce")
    return s


def test_plan_swaps_neighbours_and_skips_moves_the_rules_forbid():
    s = Session.from_model("mlp", numeric=False)
    plan, skipped = plan_order_variants(s.pipelines, "pass")
    labels = [v.label for v in plan]
    assert "fuse_pointwise_reduce before optimize_module" in labels
    # the boundary between pipelines is crossed: the last of optimize_rewrite trades with fusion's first
    across = [v for v in plan if v.across]
    assert any("optimize_rewrite | fusion" in v.label for v in across)
    # no cleanup (DCE) moves, nothing from the backend
    assert not any("dead_code_elimination" in v.label for v in plan)
    assert not any(v.moved.startswith("backend.") for v in plan)
    # fuse_concat must follow fuse_pointwise_reduce: that swap is listed with its rule, not run
    rules = {k.label: k.reason for k in skipped}
    assert "constraint fuse_concat.must_follow" in rules["fuse_concat before fuse_pointwise_reduce"]
    # the session's own configuration is untouched by planning
    assert s.config.spec() == Session.from_model("mlp", numeric=False).config.spec()
    pplan, _ = plan_order_variants(s.pipelines, "pipeline")
    assert [v.label for v in pplan] == [
        "required before dynamic_shapes",
        "optimize_rewrite before required",
        "fusion before optimize_rewrite",
    ]


@needs_dask
def test_planted_dependency_is_found_and_ranked_first_on_a_local_cluster(workers_import_tests, tmp_path):
    s = _planted()
    before = s.config.label()
    st = study_order(s, workers=2)
    assert st.where == "local Dask cluster (2 worker processes)"
    ranked = st.ranked()
    assert ranked, st.report()
    top = ranked[0]
    assert top["label"] == f"{NAME} before fuse_pointwise_reduce", st.report()
    row = next(r for r in st.rows() if r["variant"] == top["label"])
    assert row["d_launches"] < 0 and row["changed"]
    assert f"{NAME} changes" in st.describe(top) and "fewer instructions" in st.describe(top)
    assert top["numeric_ok"] and st.baseline["numeric_ok"]
    assert s.config.label() == before  # the session's configuration is left as it was
    st.plot(str(tmp_path / "study.png"))
    assert (tmp_path / "study.png").stat().st_size > 5_000


def test_serial_study_measures_the_same_figures_and_says_how_to_scale_out(monkeypatch):
    s = _planted()
    st = study_order(s, workers=0)
    assert st.where == "serial (workers=0)"
    assert st.ranked()[0]["label"] == f"{NAME} before fuse_pointwise_reduce"
    import migx_explore.sweep as sw

    monkeypatch.setattr(sw, "dask_available", lambda: False)
    run = sweep(s, _launches, [None, None], ["a", "b"])
    assert run.where == "serial" and "[sweep]" in run.note and "MIGX_DASK_SCHEDULER" in run.note
    assert [r["launches"] for r in run.records] == [r["launches"] for r in run.records[:1]] * 2


def _launches(session, payload) -> dict:
    from migx_explore.stats import launch_count

    return {"launches": launch_count(session.final())}


def _fails_on_b(session, payload) -> dict:
    if payload == "b":
        raise ValueError("planted failure")
    return {"ok": True}


@needs_dask
def test_a_failed_variant_is_a_row_and_the_sweep_goes_on():
    s = Session.from_model("mlp", numeric=False)
    run = sweep(s, _fails_on_b, ["a", "b", "c"], ["a", "b", "c"], workers=2)
    assert [r["label"] for r in run.records] == ["a", "b", "c"]
    assert run.records[1]["error"].startswith("ValueError: planted failure")
    assert run.records[0]["ok"] and run.records[2]["ok"] and not run.records[0]["error"]


@needs_dask
def test_study_across_built_in_models_with_fake_gpu_timing(monkeypatch, tmp_path):
    """The CI run: built-in models on one local cluster of 2 processes, timed on the fake backend."""
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    studies = study_models(["mlp", "transformer"], workers=2, gpu=True, warmup=1, iters=2)
    assert [st.model for st in studies] == ["mlp", "transformer"]
    for st in studies:
        assert st.baseline["eager_us"] is not None and st.baseline["graph_us"] is not None
        assert all(not r["error"] for r in st.variants), st.report()
        assert st.baseline["numeric_ok"]
    out = write_rows(studies, str(tmp_path / "results.csv"))
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert {r["model"] for r in rows} == {"mlp", "transformer"}
    assert len(rows) == sum(len(st.variants) + 1 for st in studies)


def test_parquet_needs_pyarrow_else_csv(tmp_path):
    s = Session.from_model("mlp", numeric=False)
    st = study_order(s, scope="pipeline", workers=0, numeric=False)
    # swapping whole pipelines breaks what later pipelines assume: each is a row, none end the study
    assert len(st.variants) == 3
    out = write_rows([st], str(tmp_path / "r.parquet"))
    try:
        import pyarrow.parquet as pq
    except ImportError:
        assert out.endswith("r.csv") and Path(out).exists()
    else:
        assert out.endswith("r.parquet")
        assert pq.read_table(out).num_rows == 4


def test_cli_study_order_across_models(tmp_path, capsys):
    from migx_explore.cli import main

    rc = main(
        [
            "study",
            "order",
            "mlp",
            "transformer",
            "--workers",
            "0",
            "--no-numeric",
            "--out",
            str(tmp_path / "r.csv"),
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "mlp: ordering study (pass scope)" in out and "transformer: ordering study (pass scope)" in out
    assert "not run: fuse_concat before fuse_pointwise_reduce" in out
    with open(tmp_path / "r.csv") as f:
        assert {r["model"] for r in csv.DictReader(f)} == {"mlp", "transformer"}
    assert (tmp_path / "r.json").exists()
    assert main(["study", "order", "mlp", "transformer", "--png", str(tmp_path / "x.png")]) == 2
    assert "--png draws one model's study" in capsys.readouterr().err


def test_cli_waterfall_says_where_the_variants_ran(capsys):
    from migx_explore.cli import main

    assert main(["waterfall", "mlp", "--by", "pipeline", "--no-gpu", "--workers", "0"]) == 0
    assert "variants ran on: serial (workers=0)" in capsys.readouterr().out


def _visible_gpu(session, payload) -> dict:
    return {"device": os.environ.get("CUDA_VISIBLE_DEVICES")}


@needs_dask
def test_one_worker_per_gpu_pins_each_worker_to_its_device():
    """--gpus N without dask-cuda: one worker process per GPU, each seeing only its own device."""
    pytest.importorskip("distributed")
    try:
        import dask_cuda  # noqa: F401

        pytest.skip("dask-cuda is installed: LocalCUDACluster pins the devices")
    except ImportError:
        pass
    s = Session.from_model("mlp", numeric=False)
    run = sweep(s, _visible_gpu, list(range(6)), [str(k) for k in range(6)], gpus=2)
    assert run.where == "local Dask cluster, one worker per GPU (2)"
    assert {r["device"] for r in run.records} <= {"0", "1"} and all(not r["error"] for r in run.records)


def test_unreachable_scheduler_is_one_clear_error(monkeypatch):
    if not dask_available():
        pytest.skip("dask.distributed is not installed")
    from migx_explore.compiler.errors import MigxError

    monkeypatch.setenv("MIGX_DASK_SCHEDULER", "tcp://127.0.0.1:9")
    s = Session.from_model("mlp", numeric=False)
    with pytest.raises(MigxError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        with Sweeper() as sw:
            sweep(s, _launches, [None, None], ["a", "b"], sweeper=sw)


@needs_dask
def test_perf_bisect_rounds_run_as_dask_tasks():
    from migx_explore.compiler import Op
    from migx_explore.stats import launch_count

    s = Session.from_model("mlp", numeric=False, include_backend=False)

    def slow(module):
        # planted regression: two redundant copies after the last kernel (same values, +2 launches)
        ret = module.return_instruction()
        a = module.insert_instruction(ret, Op("contiguous"), [ret.inputs[0]])
        b = module.insert_instruction(ret, Op("contiguous"), [a])
        module.replace_return([b])
        return True

    s.insert_pass(slow, after="fusion.fuse_concat")
    s.disable("fusion.slow")
    toggles = {
        "fusion.slow": True,
        "required.eliminate_identity#1": False,
        "optimize_rewrite.rewrite_gelu": False,
        "optimize_rewrite.rewrite_reduce": False,
    }
    serial = perf_bisect(s, toggles, lambda sess: launch_count(sess.final()))
    res = perf_bisect(s, toggles, lambda sess: launch_count(sess.final()), workers=2)
    assert res.culprits == serial.culprits == ["fusion.slow"]
    assert (res.good, res.bad) == (serial.good, serial.bad) and res.bad > res.good
    assert s.trace.find("fusion.slow").status == "disabled"


def test_study_panel_shows_the_ranked_moves():
    from migx_explore.widgets.explorer import Explorer

    ex = Explorer(_planted())
    ex.study.workers = 0
    st = ex.study.run()
    assert f"<code>{NAME} before fuse_pointwise_reduce</code>" in ex.study.table.value
    assert "not run (ordering constraints)" in ex.study.table.value and "<svg" in ex.study.plot.value
    assert ex.study.progress.value == ex.study.progress.max == len(st.variants) + 1
    assert ex.errors.messages == []


def _interrupt(k: int, n: int, label: str) -> None:
    raise KeyboardInterrupt


@needs_dask
def test_ctrl_c_cancels_the_tasks_and_closes_the_cluster():
    s = Session.from_model("mlp", numeric=False)
    sw = Sweeper(workers=2)
    with pytest.raises(KeyboardInterrupt):
        sweep(s, _launches, [None] * 4, ["a", "b", "c", "d"], sweeper=sw, progress=_interrupt)
    assert not sw.started
