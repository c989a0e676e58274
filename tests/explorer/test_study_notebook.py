"""Notebook 07 (the ordering study) runs top to bottom with nbclient on a local Dask cluster of 2
processes, and its outputs show the ranked moves and the planted dependency ranked first."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("nbclient")
pytest.importorskip("dask.distributed")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))
import build_notebooks  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("notebooks")]


def test_ordering_study_notebook_runs(tmp_path):
    nb = build_notebooks.execute(build_notebooks.build("07_ordering_study.ipynb"), cwd=tmp_path, timeout=600)
    errors = [f"{o.ename}: {o.evalue}" for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    text = "\n".join(
        o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        for o in c.get("outputs", [])
    )
    assert "yolo: ordering study (pass scope)" in text and "local Dask cluster (2 worker processes)" in text
    assert "1. recompute_shared_kernels before fuse_pointwise_reduce" in text
    assert "not run: fuse_concat before fuse_pointwise_reduce" in text
