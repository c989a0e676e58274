"""Folders are import paths: every `migx_explore.*` import in the tree resolves to a file of a plain
checkout, found by Python's own path finder with nothing installed (so an IDE, a type checker or an
import-graph tool that walks the checkout follows it too)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("migx_explore", "tests", "benchmarks", "scripts", "notebooks")


def _imported_modules() -> tuple[dict[str, str], int]:
    """(module name -> where it is first imported, number of import statements naming the project)."""
    found: dict[str, str] = {}
    statements = 0
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                ours = [n for n in names if n == "migx_explore" or n.startswith("migx_explore.")]
                statements += bool(ours)
                for name in ours:
                    found.setdefault(name, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found, statements


# Run in a child with site-packages off (-S) and only the checkout on the path: the resolution
# cannot lean on an editable install's finder. PathFinder locates without executing anything.
_RESOLVER = r"""
import json, sys
from importlib.machinery import PathFinder
root, names = sys.argv[1], json.loads(sys.stdin.read())
out = {}
for name in names:
    path, origin = [root], None
    for part in name.split("."):
        spec = PathFinder.find_spec(part, path)
        if spec is None:
            origin = None
            break
        origin, path = spec.origin, list(spec.submodule_search_locations or [])
    out[name] = origin
print(json.dumps(out))
"""


def test_every_project_import_resolves_from_a_plain_checkout():
    import json

    modules, statements = _imported_modules()
    assert statements > 1000 and len(modules) > 100, f"the scan saw only {statements} imports of {len(modules)}"
    done = subprocess.run(
        [sys.executable, "-S", "-c", _RESOLVER, str(ROOT)],
        input=json.dumps(sorted(modules)),
        capture_output=True,
        text=True,
        check=True,
    )
    origins = json.loads(done.stdout)
    missing = [f"{modules[m]}: {m}" for m, origin in origins.items() if origin is None]
    assert not missing, "imports that do not resolve from the checkout:\n  " + "\n  ".join(missing)
    outside = [m for m, origin in origins.items() if not Path(origin).resolve().is_relative_to(ROOT)]
    assert not outside, f"resolved outside the checkout: {outside}"


def test_module_names_are_file_paths():
    """A module's file sits at its dotted name under the checkout (no package-dir mapping anywhere)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = config["tool"]["setuptools"]
    assert "package-dir" not in setuptools, "a package-dir mapping makes folders differ from import paths"
    assert not (ROOT / "setup.py").exists(), "setup.py would be a second place that says how folders map"
    import migx_explore.compiler.ir
    import migx_explore.gpu.executor

    for mod in (migx_explore.compiler.ir, migx_explore.gpu.executor):
        rel = Path(mod.__file__).resolve().relative_to(ROOT).with_suffix("")
        assert ".".join(rel.parts) == mod.__name__


def test_top_level_folders_lead_into_the_package():
    """compiler/ and gpu/ stay at the top (the design card's layout) as links to their import path."""
    for name in ("compiler", "gpu"):
        top = ROOT / name
        assert top.is_symlink() and top.resolve() == (ROOT / "migx_explore" / name).resolve(), name
