"""A GraphBuilder that names nodes the way exporters record module scopes, for the scoped models.

style="path": the torch legacy / Ultralytics exporters' node names, `/bert/encoder/layer.0/
attention/self/query/MatMul` (a repeated op in one scope gets `_1`, `_2`, as torch does).
style="dynamo": the torch dynamo exporter's `node_MatMul_3` names with the scope in
`metadata_props` (`namespace` and `pkg.torch.onnx.name_scopes`, cumulative module paths).
style="none": every node name empty (some exporters and hand-built graphs), so a viewer must
derive groups from the graph itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np
from onnx import helper, numpy_helper

from ._builder import GraphBuilder

STYLES = ("path", "dynamo", "none")


class ScopedBuilder(GraphBuilder):
    def __init__(self, name: str, seed: int, style: str = "path"):
        if style not in STYLES:
            raise ValueError(f"unknown naming style {style!r}; styles: {', '.join(STYLES)}")
        super().__init__(name, seed)
        self.style = style
        self._scope: list[str] = []
        self._names: dict[str, int] = {}

    @contextlib.contextmanager
    def scope(self, *parts: str) -> Iterator[None]:
        """Nodes made inside are in module `parts` (below any enclosing scope)."""
        self._scope.extend(parts)
        try:
            yield
        finally:
            del self._scope[len(self._scope) - len(parts) :]

    def _name(self, op_type: str) -> str:
        if self.style == "none":
            return ""
        if self.style == "dynamo":
            return self.fresh(f"node_{op_type}")
        base = "/" + "/".join(self._scope + [op_type])
        k = self._names.get(base, 0)
        self._names[base] = k + 1
        return base if k == 0 else f"{base}_{k}"

    def _tag(self, node) -> None:
        if self.style != "dynamo" or not self._scope:
            return
        paths, cur = [""], ""
        for part in self._scope:
            cur = f"{cur}.{part}" if cur else part
            paths.append(cur)
        paths.append(node.name.removeprefix("node_").lower())
        node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(paths))
        node.metadata_props.add(
            key="namespace",
            value="/".join(f"{p}: torch.nn.Module" for p in self._scope) + f"/{node.op_type.lower()}: aten",
        )

    def node(self, op_type: str, inputs: Sequence[str], n_out: int = 1, name: str | None = None, **attrs):
        out = name or self.fresh(op_type.lower())  # value names stay unique whatever the node name
        outs = [out if n_out == 1 else f"{out}:{i}" for i in range(n_out)]
        node = helper.make_node(op_type, list(inputs), outs, name=self._name(op_type), **attrs)
        self._tag(node)
        self.nodes.append(node)
        return outs[0] if n_out == 1 else outs

    def constant(self, value, dtype=None) -> str:
        out = self.fresh("const")
        arr = np.asarray(value, dtype=dtype)
        node = helper.make_node("Constant", [], [out], value=numpy_helper.from_array(arr), name=self._name("Constant"))
        self._tag(node)
        self.nodes.append(node)
        return out


__all__ = ["STYLES", "ScopedBuilder"]
