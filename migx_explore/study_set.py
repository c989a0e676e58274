"""The ordering study over a set of models (ONNX paths or built-in names) on one Dask cluster, and
its rows written to parquet (pyarrow) or CSV: `migx-explore study order models/*.onnx --out R`.
Apart from migx_explore.study because it builds sessions (the session module imports the study)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .study import OrderStudy, study_order


def study_models(
    paths: Sequence[str],
    *,
    scope: str = "pass",
    progress=None,
    cluster: str | None = None,
    workers: int | None = None,
    gpus: int | None = None,
    gpu: bool = False,
    session_factory: Callable[[str], Any] | None = None,
    **kw: Any,
) -> list[OrderStudy]:
    """The study over several models (ONNX paths or built-in names) on one cluster; `kw` goes to
    study_order (numeric, modes, warmup, iters)."""
    from .sweep import Sweeper

    make = session_factory or _session_of
    out = []
    with Sweeper(cluster=cluster, workers=workers, gpus=gpus) as sw:
        for p in paths:
            out.append(study_order(make(p), scope=scope, gpu=gpu, progress=progress, sweeper=sw, **kw))
    return out


def _session_of(path: str):
    from .session import Session

    if path.endswith(".onnx"):
        return Session.from_onnx(path, numeric=False)
    return Session.from_model(path, numeric=False)


def write_rows(studies: Sequence[OrderStudy], out: str) -> str:
    """All rows of all studies to parquet (pyarrow) or, where pyarrow is absent or the name ends in
    .csv, CSV. Returns the path written (a .parquet name becomes .csv without pyarrow)."""
    import csv

    from .outputs import atomic_file, with_suffix

    rows = [r for s in studies for r in s.rows()]
    if not out.endswith(".csv"):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            out = with_suffix(out, ".csv")
        else:
            with atomic_file(out, suffix=".parquet") as tmp:
                pq.write_table(pa.Table.from_pylist(rows), tmp)
            return out
    cols = list(rows[0]) if rows else ["model"]
    with atomic_file(out, suffix=".csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return out


__all__ = ["study_models", "write_rows"]
