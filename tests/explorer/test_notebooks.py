"""Run each example notebook top to bottom with nbclient (no GPU needed: GPU cells print why they
skip) and check the saved widget state shows real content, as JupyterLab would on opening it.

The committed notebooks must also be what build_notebooks.py generates (so they stay reviewable
as code): their cell sources are compared."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipywidgets")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))
import build_notebooks  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("notebooks")]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _run(name: str, tmp_path: Path) -> nbformat.NotebookNode:
    nb = build_notebooks.build(name)
    t0 = time.perf_counter()
    build_notebooks.execute(nb, cwd=tmp_path, timeout=600)
    print(f"{name}: {time.perf_counter() - t0:.1f} s")
    return nb


def _widget_models(nb) -> dict[str, dict]:
    return nb.metadata["widgets"][WIDGET_STATE]["state"]


def _values(models: dict, name: str, cls: str | None = None, key: str = "value") -> list[str]:
    out = []
    for m in models.values():
        st = m["state"]
        if m["model_name"] == name and (cls is None or cls in st.get("_dom_classes", [])):
            out.append(st.get(key, ""))
    return out


def _graphs(models: dict) -> list[str]:
    """The SVG markup of the explorer's graph view (its traits live on a plain VBox model,
    widgets/hosted.py)."""
    return _values(models, "VBoxModel", "migx-graph-view", key="svg")


def _outputs_text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            parts.append(o.get("text", "") or str(o.get("data", {}).get("text/plain", "")))
            parts.append(str(o.get("data", {}).get("text/html", "")))
    return "\n".join(parts)


def _errors(nb) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]


@pytest.mark.parametrize("name", list(build_notebooks.NOTEBOOKS))
def test_committed_notebook_matches_the_builder(name):
    committed = nbformat.read(NOTEBOOKS / name, as_version=4)
    built = build_notebooks.build(name)
    assert [c.source for c in committed.cells] == [c.source for c in built.cells], (
        f"{name} is stale: run `python notebooks/build_notebooks.py --execute {name}`"
    )


def test_tour_runs_and_saves_the_explorer(tmp_path):
    nb = _run("01_tour.ipynb", tmp_path)
    assert not _errors(nb)
    models = _widget_models(nb)
    diff = _graphs(models)
    assert diff and "<svg" in diff[0] and "migx_node" in diff[0]
    stats = _values(models, "HTMLModel", "migx-stats")
    assert stats and "fusion.fuse_pointwise_reduce" in stats[0]  # where the notebook left the explorer
    checkboxes = [m for m in models.values() if "migx-pass-checkbox" in m["state"].get("_dom_classes", [])]
    assert len(checkboxes) > 50
    text = _outputs_text(nb)
    assert "re-traced" in text and ("Skipping GPU timing" in text or "eager" in text)


def test_pipeline_ordering_lesson_runs(tmp_path):
    nb = _run("02_pipeline_ordering.ipynb", tmp_path)
    assert not _errors(nb)
    text = _outputs_text(nb)
    for variant in (
        "default pipelines",
        "optimize_module after fuse_pointwise_reduce",
        "layout_convolution disabled",
        "channels_last=True",
    ):
        assert variant in text
    diff = _graphs(_widget_models(nb))
    assert diff and "<svg" in diff[0]


def test_prototype_fusion_runs_and_highlights(tmp_path):
    nb = _run("03_prototype_fusion.ipynb", tmp_path)
    assert not _errors(nb)
    text = _outputs_text(nb)
    assert "matches" in text and "near misses" in text and "st_added" in text  # the highlighted graph
    assert "numeric check against the original model: ok" in text
    # adding an op end to end: the contract, the rule, every pass, the generated kernel
    assert "silu: contract complete" in text and "differs in" in text and "18 matches on yolo" in text
    assert "fusion.fuse_silu 18 rewrites" in text and "failed: none" in text and "expf(-" in text
    diff = _graphs(_widget_models(nb))
    assert diff and "<svg" in diff[0]


def test_graph_capture_runs_without_failing(tmp_path):
    nb = _run("04_graph_capture.ipynb", tmp_path)
    assert not _errors(nb)
    text = _outputs_text(nb)
    assert "launching instructions" in text and "yolo" in text and "mobilenet" in text
    from migx_explore import gpu_bridge

    if gpu_bridge.unavailable_reason():
        assert "Skipping GPU timing" in text and "Recorded on NVIDIA H200, 2026-11-21" in text
    else:
        assert "launches x cost" in text


def test_decode_notebook_runs(tmp_path):
    nb = _run("05_decode.ipynb", tmp_path)
    assert not _errors(nb)
    text = _outputs_text(nb)
    assert "dimensions_of(past_key_0)" in text and "split_single_dyn_dim" in text
    assert "concat_past_present[axis=2]" in text and "max |ours - onnxruntime|" in text
    assert "recorded on NVIDIA H100" in text or "live" in text


def test_precision_notebook_runs(tmp_path):
    nb = _run("06_precision.ipynb", tmp_path)
    assert not _errors(nb)
    text = _outputs_text(nb)
    assert "truncate_float" in text and "quantize_8bits" in text  # the stage at fp16 and int8
    assert "quant_dot(" in text and "-> float16" in text  # the graphs at int8 and fp16
    assert "'quantizelinear': 12" in text  # a pair per dot input after the stage (6 dots)
    assert "int8->int32" in text and "float16" in text  # int8 GEMMs on BLAS; half GEMMs
    assert "<svg" in text and "relative RMS error" in text
    assert "recorded on NVIDIA H100" in text or "live" in text
