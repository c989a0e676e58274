"""No import cycle of any kind among the project's modules (compiler/, gpu/, migx_explore/).

Stricter than test_layers' check: imports under `if TYPE_CHECKING:` and imports inside functions
count too. A type-only or deferred import that closes a loop still ties the modules together: neither
can be read, moved or tested without the other. Each tangle (strongly connected component) is
listed with one concrete loop through it, so the failure says what to cut.
"""

from __future__ import annotations

from import_graph import FILES, IMPORTS, cycles, loop_through


def _graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _, _ in imps if t != m} for m, imps in IMPORTS.items()}


def _describe(graph: dict[str, set[str]], comp: list[str]) -> str:
    return f"{len(comp)} modules: " + " -> ".join(loop_through(graph, comp))


def test_the_graph_covers_the_three_packages():
    assert {"migx_explore.compiler.ir", "migx_explore.gpu.pipelines", "migx_explore.session"} <= set(FILES)


def test_no_import_cycle_of_any_kind():
    graph = _graph()
    found = cycles(graph)
    new = found
    assert not new, "import cycles (type-only and function-level imports count):\n  " + "\n  ".join(
        _describe(graph, c) for c in new
    )


def test_cycle_finder_reports_type_only_and_nested_loops():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert cycles(graph) == [["a", "b", "c"], ["d"]]
    assert loop_through(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
