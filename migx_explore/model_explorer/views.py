"""Small collections for opening one pass: its before and after graphs and the module graphs they
open, cut from an export's whole collection (graphs.json).

Why: Model Explorer reads a JSON collection whole, in its page's main thread, before it draws
anything. The whole yolov10n trace is 20 MB (a before and an after graph for each of its 27
passes); opening its final graph from it took 8.4 s where the same graph in a 0.9 MB collection
took 4.5 s (the shared 2-core machine, load 12). The launcher opens the small one; graphs.json
stays the way to page through every pass.

    views/NNN.json      the pass numbered NNN (compare/NNN.json is its mapping)
    views/final.json    the final program (and views/input.json the input)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from migx_explore.compiler.errors import MigxError

VIEWS = "views"

# graphs.json parsed, by (path, mtime, size): a notebook opens pass after pass of one export.
_cache: dict[str, tuple[tuple[float, int], dict[str, Any]]] = {}


def _collection(path: str) -> dict[str, Any]:
    try:
        st = os.stat(path)
        hit = _cache.get(path)
        if hit is not None and hit[0] == (st.st_mtime, st.st_size):
            return hit[1]
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise MigxError(f"{path}: the graph collection cannot be read ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("graphs"), list):
        raise MigxError(f"{path}: not a Model Explorer graph collection (no 'graphs' list)")
    _cache.clear()  # one collection at a time: they are tens of megabytes
    _cache[path] = ((st.st_mtime, st.st_size), data)
    return data


def reachable(graphs: dict[str, dict[str, Any]], roots: Iterable[str]) -> list[str]:
    """`roots` and every graph their nodes open through `subgraphIds`, parents first."""
    out: list[str] = []
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        gid = todo.pop(0)
        if gid in seen or gid not in graphs:
            continue
        seen.add(gid)
        out.append(gid)
        for n in graphs[gid]["nodes"]:
            todo.extend(n.get("subgraphIds") or ())
    return out


def view_collection(folder: str, collection: str, roots: list[str], name: str) -> str:
    """Write (or reuse) `folder/views/<name>.json`, the collection holding `roots` and the module
    graphs they open, with the whole collection's label (node-data files target it); returns its
    absolute path."""
    src = os.path.join(folder, collection)
    out = os.path.abspath(os.path.join(folder, VIEWS, f"{name}.json"))
    try:
        if os.path.getmtime(out) >= os.path.getmtime(src):
            return out
    except OSError:
        pass
    data = _collection(src)
    by_id = {g["id"]: g for g in data["graphs"]}
    missing = [r for r in roots if r not in by_id]
    if missing:
        raise MigxError(f"{src}: no graph {missing[0]!r} in this collection")
    view = {
        "label": data.get("label", ""),
        "graphs": [by_id[g] for g in reachable(by_id, roots)],
        "graphSorting": data.get("graphSorting", "name_asc"),
    }
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = f"{out}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(view, separators=(",", ":")))
    os.replace(tmp, out)  # a page opening it never reads half a file
    return out


__all__ = ["VIEWS", "reachable", "view_collection"]
