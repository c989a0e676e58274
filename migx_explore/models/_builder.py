"""A small graph builder over onnx.helper for the built-in models: seeded weights, unique names,
and helpers that emit the node patterns real exporters (torch.onnx, tf2onnx) produce."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18  # Reduce* take axes as an input, Split takes sizes as an input
IR_VERSION = 9  # what onnxruntime of the last years reads


class GraphBuilder:
    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._count: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        k = self._count.get(prefix, 0)
        self._count[prefix] = k + 1
        return f"{prefix}_{k}"

    # ---- values ------------------------------------------------------------------------------------
    def input(self, name: str, dims: Sequence[int | str], elem_type: int = TensorProto.FLOAT) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(dims)))
        return name

    def output(self, name: str, elem_type: int = TensorProto.FLOAT, dims: Sequence | None = None) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, dims))

    def init(self, value: np.ndarray, prefix: str = "w") -> str:
        name = self.fresh(prefix)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, shape: Sequence[int], fan_in: int | None = None, prefix: str = "w") -> str:
        """He-initialised float32 weights (keeps activations O(1) through deep stacks)."""
        fan = fan_in if fan_in is not None else int(np.prod(shape[1:]))
        std = math.sqrt(2.0 / max(fan, 1))
        return self.init(self.rng.standard_normal(tuple(shape), dtype=np.float32) * np.float32(std), prefix)

    def bias(self, n: int, prefix: str = "b") -> str:
        return self.init(self.rng.normal(0.0, 0.05, n).astype(np.float32), prefix)

    def constant(self, value, dtype=None) -> str:
        """A Constant node, as exporters emit for scalars and small shape tensors."""
        out = self.fresh("const")
        arr = np.asarray(value, dtype=dtype)
        self.nodes.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(arr), name=out))
        return out

    # ---- nodes ---------------------------------------------------------------------------------------
    def node(self, op_type: str, inputs: Sequence[str], n_out: int = 1, name: str | None = None, **attrs):
        base = name or self.fresh(op_type.lower())
        outs = [base if n_out == 1 else f"{base}:{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=base, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1, bias: bool = False) -> str:
        w = self.weight([c_out, c_in // group, k, k])
        ins = [x, w] + ([self.bias(c_out)] if bias else [])
        p = k // 2
        return self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p], group=group)

    def batchnorm(self, x: str, c: int) -> str:
        r = self.rng
        scale = self.init(r.uniform(0.5, 1.5, c).astype(np.float32), "bn_scale")
        bias = self.init(r.normal(0.0, 0.1, c).astype(np.float32), "bn_bias")
        mean = self.init(r.normal(0.0, 0.1, c).astype(np.float32), "bn_mean")
        var = self.init(r.uniform(0.5, 1.5, c).astype(np.float32), "bn_var")
        return self.node("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5)

    def dynamic_reshape(self, x: str, keep: Sequence[int], tail: Sequence[int]) -> str:
        """torch.onnx's `x.view(x.size(0), ..., *tail)`: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
        shape = self.node("Shape", [x])
        parts = []
        for axis in keep:
            dim = self.node("Gather", [shape, self.constant(np.int64(axis))], axis=0)
            parts.append(self.node("Unsqueeze", [dim, self.constant(np.array([0], np.int64))]))
        parts.append(self.constant(np.asarray(tail, np.int64)))
        target = self.node("Concat", parts, axis=0)
        return self.node("Reshape", [x, target])

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializers)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="migx-explore")
        m.ir_version = IR_VERSION
        if any(not o.type.tensor_type.HasField("shape") for o in m.graph.output):
            # Output shapes left out: ONNX shape inference fills them (slow for big models, so the
            # built-in models declare theirs). The importer runs the checker on every load.
            inferred = onnx.shape_inference.infer_shapes(m)
            known = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
            for out in m.graph.output:
                if not out.type.tensor_type.HasField("shape") and out.name in known:
                    out.type.CopyFrom(known[out.name].type)
        return m
