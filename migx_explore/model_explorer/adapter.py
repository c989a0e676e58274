"""The Model Explorer extension: `model-explorer FILE --extensions=migx_explore` (Model Explorer
loads `migx_explore.main`, which defines nothing but imports this).

FILE is an exported folder's index (`out/yolo/trace.migx`), an exported folder whose name ends in
`.migx` (`out/yolo.migx`), or an ONNX model, traced here with the default pipelines. Model
Explorer picks an adapter by the path's extension, so a folder named without one cannot reach any
adapter (its graphs.json opens with no adapter at all).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from model_explorer import Adapter, AdapterMetadata


def convert_path(model_path: str) -> dict[str, Any]:
    """`{"graphCollections": [...]}` for an exported index, a folder or an .onnx file."""
    from migx_explore.compiler.errors import MigxError

    from .export import load_manifest

    path = os.path.abspath(os.path.expanduser(model_path))
    if path.endswith(".onnx"):
        from ..session import Session
        from .export import export_trace

        folder = tempfile.mkdtemp(prefix="migx-model-explorer-")
        export_trace(Session.from_onnx(path, numeric=False), folder)
    else:
        folder = path if os.path.isdir(path) else os.path.dirname(path)
    manifest = load_manifest(folder)
    try:
        with open(os.path.join(folder, manifest["collection"]), encoding="utf-8") as f:
            collection = json.load(f)
    except (OSError, ValueError) as e:
        raise MigxError(f"{folder}: the graph collection cannot be read ({e})") from None
    return {"graphCollections": [collection]}


class MigxExploreAdapter(Adapter):
    metadata = AdapterMetadata(
        id="migx_explore",
        name="migx-explore trace",
        description="A migx-explore trace: every pass of the compiler as a graph (trace.migx, or .onnx traced here)",
        source_repo="",
        fileExts=["migx", "onnx"],
    )

    def convert(self, model_path: str, settings: dict) -> Any:
        # Model Explorer turns an adapter's answer into JSON with dataclasses.asdict: the
        # collection is its own GraphCollection, holding our graphs as the JSON they already are
        # (asdict copies dicts as they come; building every node as a dataclass took 20x longer).
        from model_explorer import graph_builder

        raw = convert_path(model_path)["graphCollections"][0]
        return {"graphCollections": [graph_builder.GraphCollection(raw["label"], raw["graphs"], raw["graphSorting"])]}


__all__ = ["MigxExploreAdapter", "convert_path"]
