"""Layers are enforced: every import (function-level too) is read with `ast` and checked.

compiler imports neither gpu nor the explorer; gpu imports nothing of the explorer; widgets reach
the GPU only through migx_explore.gpu_bridge (which loads it lazily); no file imports a private
name of another; no import cycle among files that run. The graph is tests/import_graph.py's;
tests/test_import_cycles.py holds the stricter check (type-only and function-level imports count too).
"""

from __future__ import annotations

import ast

import import_graph
import pytest

IMPORTS = import_graph.IMPORTS
FILES = import_graph.FILES
_where = import_graph.where


def _in(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def _explorer(mod: str) -> bool:
    return _in(mod, "migx_explore") and not _in(mod, "migx_explore.compiler") and not _in(mod, "migx_explore.gpu")


RULES = {
    "compiler imports gpu or the explorer": lambda m, t: (
        _in(m, "migx_explore.compiler") and not _in(t, "migx_explore.compiler")
    ),
    "gpu imports the explorer": lambda m, t: _in(m, "migx_explore.gpu") and _explorer(t),
    "a widget reaches the GPU without gpu_bridge": lambda m, t: (
        _in(m, "migx_explore.widgets") and _in(t, "migx_explore.gpu")
    ),
}
# Violations other helpers are removing now (issue 15 items 4 and 5); the lead drops these when
# their work lands, and the test fails if one is fixed (strict xfail) so the entry gets removed.
KNOWN = {}


def _marks(rule: str):
    return [pytest.mark.xfail(reason=KNOWN[rule], strict=True)] if rule in KNOWN else []


@pytest.mark.parametrize("rule", [pytest.param(r, marks=_marks(r)) for r in RULES])
def test_no_upward_import(rule):
    bad = [f"{_where(m, ln)} imports {t}" for m, imps in IMPORTS.items() for t, _, _, ln in imps if RULES[rule](m, t)]
    assert not bad, f"{rule}:\n  " + "\n  ".join(bad)


def test_no_private_name_crosses_files():
    bad = [
        f"{_where(m, ln)} imports {name} from {t}"
        for m, imps in IMPORTS.items()
        for t, name, _, ln in imps
        if name.startswith("_") and not name.startswith("__") and t != m
    ]
    assert not bad, "private names used across files (make them public or move them):\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("rule", [pytest.param("import cycle", marks=_marks("import cycle"))])
def test_no_import_cycle_among_files(rule):
    graph = {m: {t for t, _, runs, _ in imps if runs and t != m} for m, imps in IMPORTS.items()}
    cycles, state = [], {}

    def visit(m: str, path: list[str]) -> None:  # depth-first; a grey node reached again closes a cycle
        state[m] = "grey"
        for t in sorted(graph[m]):
            if state.get(t) == "grey":
                cycles.append(" -> ".join(path[path.index(t) :] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[m] = "black"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles)


def test_importing_needs_no_gpu_or_notebook_library():
    """Module-level imports (those that run on `import`) of GPU stacks or notebook libraries live only
    in gpu/runtime (loaded when a backend is asked for); everything else imports them lazily."""
    heavy = {
        "cuda",
        "hip",
        "hiprtc",
        "cupy",
        "torch",
        "triton",
        "nvmath",
        "ipywidgets",
        "IPython",
        "matplotlib",
        "anywidget",
    }
    bad = []
    for m, path in FILES.items():
        top = [n for s in ast.parse(path.read_text()).body for n in ([s] + (s.body if isinstance(s, ast.Try) else []))]
        names = [(a.name, n.lineno) for n in top if isinstance(n, ast.Import) for a in n.names]
        names += [(n.module, n.lineno) for n in top if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module]
        bad += [
            f"{_where(m, ln)} imports {name}"
            for name, ln in names
            if name.split(".")[0] in heavy and not _in(m, "migx_explore.gpu.runtime")
        ]
    assert not bad, "GPU / notebook libraries imported at module level:\n  " + "\n  ".join(bad)


def test_imports_across_parts_are_absolute():
    """An import from one layer into another names the layer (`from migx_explore.compiler.ir import
    ...` in gpu/), so a reader sees the direction it goes (scripts/absolute_imports.py rewrites them)."""
    parts = ("migx_explore.compiler", "migx_explore.gpu", "migx_explore")

    def part(mod: str) -> str:
        return next(p for p in parts if _in(mod, p))

    bad = []
    for m, path in FILES.items():
        here = m.split(".") if path.name == "__init__.py" else m.split(".")[:-1]
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.ImportFrom) and n.level:
                target = ".".join(here[: len(here) - n.level + 1] + ([n.module] if n.module else []))
                if part(target) != part(m):
                    bad.append(f"{_where(m, n.lineno)} imports {'.' * n.level}{n.module or ''} ({target})")
    assert not bad, "relative imports across parts (write them absolute):\n  " + "\n  ".join(bad)
