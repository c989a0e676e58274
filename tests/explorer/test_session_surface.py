"""`Session` is state plus a small API, and its features are modules that take a session.

Two things keep it that way: the number of public names on the class, and the direction of the
imports. Every import counts for the second (module-level, function-level and `if TYPE_CHECKING`),
so a feature can never be reached back from the session, even for a type annotation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

from migx_explore.session import Session

ROOT = Path(__file__).resolve().parents[2]
MAX_PUBLIC = 30
SESSION = "migx_explore.session"


def public_names(cls: type) -> list[str]:
    """Public names the class itself defines: methods, properties (a setter is the same name),
    class- and static methods, and any public class attribute."""
    return sorted(n for n in vars(cls) if not n.startswith("_"))


def test_session_has_at_most_30_public_names():
    names = public_names(Session)
    assert len(names) <= MAX_PUBLIC, (
        f"Session has {len(names)} public names (at most {MAX_PUBLIC}): {', '.join(names)}; put the new "
        "feature in a module of functions that take a session"
    )
    # the state notebooks build on is there
    assert {"from_model", "trace", "current", "goto", "step", "disable", "enable", "snapshots"} <= set(names)


def _module_files() -> dict[str, Path]:
    """migx_explore's own modules (compiler/ and gpu/ install inside it but never import the explorer)."""
    base = ROOT / "migx_explore"
    return {
        ".".join(["migx_explore", *p.relative_to(base).with_suffix("").parts]).removesuffix(".__init__"): p
        for p in base.rglob("*.py")
    }


def _imported(mod: str, path: Path, known: Mapping[str, Path]) -> Iterator[str]:
    """Every module of `known` that `mod` imports, wherever the import statement stands."""
    here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            yield from (a.name for a in n.names if a.name in known)
        elif isinstance(n, ast.ImportFrom):
            pkg = ".".join(here[: len(here) - n.level + 1]) if n.level else ""
            base = ".".join(x for x in (pkg, n.module) if x)
            for a in n.names:  # `from pkg import mod` names a module; `from mod import name`, the module
                sub = f"{base}.{a.name}"
                if sub in known:
                    yield sub
                elif base in known:
                    yield base


def import_graph(files: Mapping[str, Path]) -> dict[str, set[str]]:
    return {m: set(_imported(m, p, files)) - {m} for m, p in files.items()}


def chains_back(graph: Mapping[str, set[str]], start: str) -> list[str]:
    """Every import chain from `start` to a module that imports `start` back (a cycle through it),
    found breadth-first, so each is the shortest way there."""
    parent: dict[str, str] = {}
    todo = [start]
    while todo:
        m = todo.pop(0)
        for t in sorted(graph.get(m, ())):
            if t not in parent and t != start:
                parent[t] = m
                todo.append(t)
    out = []
    for m in sorted(parent):
        if start in graph[m]:
            chain = [m]
            while chain[-1] != start:
                chain.append(parent[chain[-1]])
            out.append(" -> ".join([*reversed(chain), start]))
    return out


def test_the_cycle_check_sees_a_type_only_and_a_function_level_import(tmp_path):
    pkg = tmp_path / "migx_explore"
    pkg.mkdir()
    (pkg / "session.py").write_text("def f():\n    from .feature import g\n")
    (pkg / "feature.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .session import Session\n"
    )
    files = {"migx_explore.session": pkg / "session.py", "migx_explore.feature": pkg / "feature.py"}
    graph = import_graph(files)
    assert graph == {"migx_explore.session": {"migx_explore.feature"}, "migx_explore.feature": {SESSION}}
    assert chains_back(graph, SESSION) == [f"{SESSION} -> migx_explore.feature -> {SESSION}"]


def test_no_feature_is_imported_back_by_the_session():
    graph = import_graph(_module_files())
    back = chains_back(graph, SESSION)
    assert not back, (
        "the session reaches modules that import it (features import the session, never the "
        "reverse):\n  " + "\n  ".join(back)
    )
    features = sorted(m for m, ts in graph.items() if SESSION in ts)
    # the features the issue names do import it, so the check above is not vacuous
    assert {
        "migx_explore.pass_changes",
        "migx_explore.config_compare",
        "migx_explore.verification",
        "migx_explore.gpu_bridge",
    } <= set(features)
