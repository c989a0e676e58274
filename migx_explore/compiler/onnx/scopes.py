"""The model's own scope of an ONNX node: the module path an exporter wrote for it.

Two conventions are read:
- the node name's path, as the torch legacy (TorchScript) exporter and Ultralytics write it:
  `/model.8/m.0/cv1/conv/Conv` -> `model.8/m.0/cv1/conv` (the last part names the node itself);
- the torch dynamo exporter's `metadata_props`: `pkg.torch.onnx.name_scopes`, the repr of a list of
  cumulative module paths (`['', 'model', 'model.layers.2', 'model.layers.2.mlp', 'linear_7']`,
  the last entry the node's own name) -> `model/layers.2/mlp`; else `namespace`
  (`/`-separated `name: Class` entries, read the same way).

A scope is `/`-joined parts, "" for none. Nothing here fails: a name or property that does not
parse gives no scope (a node is still imported).
"""

from __future__ import annotations

import ast

import onnx

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
NAMESPACE = "namespace"


def node_scope(node: onnx.NodeProto) -> str:
    """The scope of `node` ("" when its exporter recorded none)."""
    props = {p.key: p.value for p in node.metadata_props} if len(node.metadata_props) else {}
    if NAME_SCOPES in props:
        return _from_name_scopes(props[NAME_SCOPES])
    if NAMESPACE in props:
        return _from_namespace(props[NAMESPACE])
    return _from_name(node.name)


def _from_name(name: str) -> str:
    if not name.startswith("/"):
        return ""
    parts = [p for p in name.split("/")[1:-1] if p]
    return "/".join(parts)


def _from_name_scopes(text: str) -> str:
    try:
        paths = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ""
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) for p in paths):
        return ""
    parts, prev = [], ""
    for path in paths[:-1]:  # the last entry names the node itself
        if not path:
            continue
        # each path extends the one before it ("model.layers.2" after "model"): keep the new part,
        # so "layers.2" stays one part the way the module tree names it
        part = path[len(prev) + 1 :] if prev and path.startswith(prev + ".") else path
        parts.append(part)
        prev = path
    return "/".join(parts)


def _from_namespace(text: str) -> str:
    entries = [e.split(":", 1)[0].strip() for e in text.split("/")]
    names = [e for e in entries if e]
    return "/".join(names[:-1]) if len(names) > 1 else ""


__all__ = ["NAMESPACE", "NAME_SCOPES", "node_scope"]
