"""docs/architecture.md stays true: every repository path it names exists, every dotted name
resolves, and its walk through the pass machinery names every module of
migx_explore/compiler/pass_infra/ and every instrumentation the manager ships."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from test_no_silent_miss import _resolves

import migx_explore.compiler.pass_infra.instrumentation as instrumentation
from migx_explore.compiler.pass_infra import NumericChecks, PassInstrumentation

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
ROOTS = ("compiler/", "gpu/", "migx_explore/", "tests/", "scripts/", "benchmarks/", "docs/", "notebooks/")


def _tokens() -> list[tuple[int, str]]:
    return [(i, t) for i, line in enumerate(DOC.read_text().splitlines(), 1) for t in re.findall(r"`([^`]+)`", line)]


def test_every_path_the_page_names_exists():
    missing = []
    for line, token in _tokens():
        for word in token.split():
            path = re.split(r"[:#(]", word.rstrip(".,;"), maxsplit=1)[0].rstrip("/")
            if word.startswith(ROOTS) and not any(c in path for c in "<>*{}$|") and not (ROOT / path).exists():
                missing.append(f"docs/architecture.md:{line} {word}")
    assert not missing, "\n".join(missing)


def test_every_dotted_name_resolves():
    names = [(line, t.split("(")[0]) for line, t in _tokens() if re.fullmatch(r"migx_explore\.[\w.]+(\(.*\))?", t)]
    assert names, "the walk names no migx_explore.* object"
    stale = [f"line {line}: {name}" for line, name in names if not _resolves(name)]
    assert not stale, stale


def test_the_walk_names_every_pass_infra_module_and_instrumentation():
    text = DOC.read_text()
    folder = ROOT / "migx_explore" / "compiler" / "pass_infra"
    modules = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
    assert [m for m in modules if f"`{m}`" not in text and f"pass_infra/{m}" not in text] == []
    shipped = [
        cls.__name__
        for _, cls in inspect.getmembers(instrumentation, inspect.isclass)
        if issubclass(cls, PassInstrumentation) and cls is not PassInstrumentation
    ] + [NumericChecks.__name__]
    assert [c for c in shipped if f"`{c}`" not in text] == []
