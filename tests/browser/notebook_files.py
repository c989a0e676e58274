"""Notebook files for the browser tests: code cells under the plain Python 3 kernel."""

from __future__ import annotations

from pathlib import Path

import nbformat

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def write_notebook(path: Path, *cells: str) -> Path:
    """A notebook of one code cell per source in `cells`, written to `path`."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nbformat.write(nb, path)
    return path
