"""Issue 40 item 9: an --out whose folder has a dot in its name is written inside that folder; a
changed extension replaces only the file name's own."""

from __future__ import annotations

import builtins

import pytest

from migx_explore.outputs import with_suffix
from migx_explore.study_set import write_rows


@pytest.mark.parametrize(
    "path,want",
    [
        ("/data/run.1/study", "/data/run.1/study.csv"),
        ("/data/run.1/study.parquet", "/data/run.1/study.csv"),
        ("run.1/.hidden", "run.1/.hidden.csv"),
        ("study", "study.csv"),
        ("a.b.c/d.e.parquet", "a.b.c/d.e.csv"),
    ],
)
def test_with_suffix_touches_only_the_file_name(path, want):
    assert with_suffix(path, ".csv") == want


class _Study:
    def rows(self):
        return [{"model": "mlp", "move": "a<->b", "launches": 3}]


def test_study_rows_without_pyarrow_land_in_the_named_folder(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_pyarrow(name, *a, **kw):
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    folder = tmp_path / "run.1"
    folder.mkdir()
    sentinel = tmp_path / "run.csv"
    sentinel.write_text("the user's file")
    written = write_rows([_Study()], str(folder / "study"))
    assert written == str(folder / "study.csv")
    assert (folder / "study.csv").read_text().startswith("model,move,launches")
    assert sentinel.read_text() == "the user's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.1", "run.csv"]
