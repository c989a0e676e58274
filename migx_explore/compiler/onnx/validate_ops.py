"""Per-node operand checks that ONNX Runtime makes when it loads or runs a model and ONNX shape
inference does not: one type for every input bound to the same type parameter, a Conv's
kernel_shape equal to its weight's window, 1-D shape-like operands, finite positive constant
Resize scales. Used by compiler/onnx/validate.py; each refusal names the node."""

from __future__ import annotations

import functools

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import ImportError_

_DEFAULT_DOMAINS = ("", "ai.onnx")
# (op, input index) operands ORT requires to be 1-D (a shape, axes, pads, repeats, starts, ...)
_ONE_D = {
    "Reshape": (1,),
    "Expand": (1,),
    "Tile": (1,),
    "ConstantOfShape": (0,),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "Slice": (1, 2, 3, 4),
    "Pad": (1,),
    "ReduceSum": (1,),
    "ReduceMean": (1,),
    "ReduceMax": (1,),
    "ReduceMin": (1,),
    "ReduceProd": (1,),
    "Split": (1,),
    "Resize": (2, 3),
}
# Axes operands a scalar may give (ONNX's own function bodies do, AffineGrid's Unsqueeze; ORT and
# onnx.reference read a scalar as one axis, and so does the importer).
_SCALAR_AXES = frozenset({"Squeeze", "Unsqueeze", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})
_CONV = ("Conv", "ConvTranspose", "ConvInteger", "QLinearConv")


def node_name(node: onnx.NodeProto) -> str:
    """As the importer names a node: its name, else the value it produces."""
    name = node.name or (f"producing {node.output[0]!r}" if node.output else "(unnamed)")
    return f"node {name} ({node.op_type})"


def _type_name(code: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(code).lower()
    except ValueError:
        return str(code)


@functools.cache
def _type_params(op_type: str, opset: int, domain: str) -> tuple[str | None, ...]:
    """Per formal input of the op's schema, the type parameter that binds it to others (None: a
    free or heterogeneous one); () for an op without a schema. Looked up once per op and opset
    (get_schema and the constraint set cost more than the check on a 100,000-node graph)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return ()
    constrained = {c.type_param_str for c in schema.type_constraints}
    # heterogeneous: Scan's / Loop's state values, one type each, not one for all
    return tuple(p.type_str if p.is_homogeneous and p.type_str in constrained else None for p in schema.inputs)


def _check_type_params(node: onnx.NodeProto, opset: int, types: dict[str, int]) -> None:
    """Inputs bound to one type parameter (T of Add, Equal, Concat, ...) must share a type."""
    formal = _type_params(node.op_type, opset, node.domain)
    if not formal:
        return
    bound: dict[str, tuple[str, int]] = {}
    for k, name in enumerate(node.input):
        if not name or name not in types:
            continue
        param = formal[min(k, len(formal) - 1)]  # variadic: the last formal input repeats
        if param is None:
            continue
        seen = bound.setdefault(param, (name, types[name]))
        if seen[1] != types[name]:
            raise ImportError_(
                f"{node_name(node)}: inputs {seen[0]!r} ({_type_name(seen[1])}) and {name!r} "
                f"({_type_name(types[name])}) must have one type ({param} of "
                f"{node.op_type})"
            )


def _check_conv_window(node: onnx.NodeProto, shapes: dict[str, list[int | None]]) -> None:
    ks = next((list(a.ints) for a in node.attribute if a.name == "kernel_shape"), None)
    k = 3 if node.op_type == "QLinearConv" else 1
    w = shapes.get(node.input[k]) if k < len(node.input) else None
    if ks is None or not w:
        return
    window = w[2:]
    if len(ks) != len(window) or any(d is not None and d != k for d, k in zip(window, ks)):
        raise ImportError_(
            f"{node_name(node)}: kernel_shape {ks} does not match the weight's window {window} (weight dims {w})"
        )


def _check_one_d(node: onnx.NodeProto, shapes: dict[str, list[int | None]]) -> None:
    for k in _ONE_D.get(node.op_type, ()):
        if k < len(node.input) and node.input[k] and node.input[k] in shapes:
            rank = len(shapes[node.input[k]])
            if rank != 1 and not (rank == 0 and node.op_type in _SCALAR_AXES):
                raise ImportError_(
                    f"{node_name(node)}: input {k} ({node.input[k]!r}) must be 1-D, but it has rank {rank}"
                )


def check_node_operands(
    graph: onnx.GraphProto, shapes: dict[str, list[int | None]], types: dict[str, int], opset: int
) -> None:
    for node in graph.node:
        if node.domain not in _DEFAULT_DOMAINS:
            continue
        _check_type_params(node, opset, types)
        if node.op_type in _CONV:
            _check_conv_window(node, shapes)
        _check_one_d(node, shapes)


def constant_tensors(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """Initializers and Constant-node values of a graph, by value name."""
    out = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    out[node.output[0]] = a.t
    return out


def check_constant_scales(graph: onnx.GraphProto) -> None:
    """Resize / Upsample scales known before import must be finite and positive (ORT refuses the
    rest; the importer would compute an output size from them)."""
    consts = constant_tensors(graph)
    for node in graph.node:
        k = 2 if node.op_type == "Resize" else 1 if node.op_type == "Upsample" else None
        if k is None or k >= len(node.input) or node.input[k] not in consts:
            continue
        scales = numpy_helper.to_array(consts[node.input[k]]).astype(np.float64)
        if scales.size and not (np.all(np.isfinite(scales)) and np.all(scales > 0)):
            raise ImportError_(f"{node_name(node)}: scales {scales.reshape(-1).tolist()} must be finite and positive")
