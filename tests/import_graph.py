"""The project's module import graph, read with `ast` (nothing is imported).

Shared by tests/test_layers.py (layering rules) and tests/test_import_cycles.py (cycles). Every
import counts: top-level, inside functions, and under `if TYPE_CHECKING:` (flagged as typing-only
so a rule may choose to skip it). `from pkg import mod` is an edge to the module `pkg.mod`;
`from pkg import name` is an edge to `pkg` itself (its `__init__`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders are import paths: a file's module name is its path from the checkout root.
FILES = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
    for p in (ROOT / "migx_explore").rglob("*.py")
}


def _imports(mod: str, path: Path) -> Iterator[tuple[str, str, bool, int]]:
    """(imported module, imported name, runs at import/call time, line) for every import in a file."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for i in ast.walk(tree)
        if isinstance(i, ast.If) and "TYPE_CHECKING" in ast.unparse(i.test)
        for n in ast.walk(i)
    }
    here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    for n in ast.walk(tree):
        runs = id(n) not in typing_only
        if isinstance(n, ast.Import):
            yield from ((a.name, "", runs, n.lineno) for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            base = ".".join(x for x in [".".join(here[: len(here) - n.level + 1]) if n.level else "", n.module] if x)
            for a in n.names:  # `from pkg import mod` imports the module; `from mod import name`, a name
                sub = f"{base}.{a.name}"
                yield (sub, "", runs, n.lineno) if sub in FILES else (base, a.name, runs, n.lineno)


# module -> its imports of project modules, as (target, name, runs, line)
IMPORTS = {m: [i for i in _imports(m, p) if i[0] in FILES] for m, p in FILES.items()}


def where(mod: str, line: int) -> str:
    return f"{FILES[mod].relative_to(ROOT)}:{line}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (or a module importing itself),
    each sorted: one entry per tangle, however many loops run through it (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def loop_through(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One concrete loop inside a component, starting at its first module: what to cut first."""
    members, start = set(comp), comp[0]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:  # breadth-first, so the loop shown is a short one
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp
