"""Model-level validation: refuse what ONNX Runtime refuses, before any node is imported.

The per-op handlers check what they read (input counts, attribute forms); this module checks the
model as a whole, as ORT's loader does: the opset range it implements, element types on the
graph's values, attribute ranges of the windowed ops (a kernel of 0 or -1), ONNX shape inference
in strict mode (the errors an op's inference function raises; declared shapes are merged
leniently, as ORT does), and indices into constant data that are out of range. After import,
`check_declared_outputs` warns (once) about declared output dims that contradict what it computes,
as ONNX Runtime does, and the computed shape is used.

Each refusal is one ImportError_ line naming the node (or the value) and what is wrong.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import ImportError_
from .validate_ops import check_constant_scales, check_node_operands, constant_tensors, node_name

# ONNX Runtime implements ai.onnx from opset 7 (and still runs most opset-6 models: the backend
# test suite has 112 of them); before 6 operators had other attributes (consumed_inputs) and
# other semantics, which the importer would silently read with modern ones.
_DEFAULT_DOMAINS = ("", "ai.onnx")
_WINDOWED = {
    "Conv",
    "ConvTranspose",
    "ConvInteger",
    "QLinearConv",
    "MaxPool",
    "AveragePool",
    "LpPool",
    "MaxUnpool",
    "DeformConv",
    "GlobalLpPool",
}
_POSITIVE = ("kernel_shape", "strides", "dilations")
# Initializers above this many bytes are handed to shape inference as typed inputs, not data: no
# copy of the weights, and shape-like operands (small) keep their values.
_INLINE_BYTES = 4096
MAX_GRAPH_DEPTH = 64  # If/Loop/Scan bodies inside bodies; protobuf itself stops parsing near 32
_VALID_TYPES = {v for v in onnx.TensorProto.DataType.values() if v != onnx.TensorProto.UNDEFINED}


def validate_model(model: onnx.ModelProto, what: str) -> None:
    """Refuse `model` (ImportError_) where ONNX Runtime would refuse it: the checks that must come
    before import (the importer would read these with wrong meanings or loop on them)."""
    _check_opset(model, what)
    _check_value_types(model.graph)
    for node in _all_nodes(model.graph):
        _check_attributes(node)
    _check_windowed_weights(model.graph)
    check_constant_scales(model.graph)


def validate_imported(model: onnx.ModelProto, output_shapes: list, check_outputs: bool = True) -> None:
    """After import (whose per-node errors are more precise, so they come first): strict shape
    inference, constant Gather indices, and the declared output dims."""
    shapes, types = _infer_strict(model)
    _check_constant_gathers(model.graph, shapes)
    check_node_operands(model.graph, shapes, types, _default_opset(model))
    if check_outputs and (mismatches := check_declared_outputs(model, output_shapes)):
        warnings.warn(
            "; ".join(mismatches)
            + "; using the computed shape"
            + ("s" if len(mismatches) > 1 else "")
            + " (ONNX Runtime runs such models, warning as here)",
            stacklevel=3,
        )


def _default_opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), 13)


def _check_opset(model: onnx.ModelProto, what: str) -> None:
    for o in model.opset_import:
        if o.domain in _DEFAULT_DOMAINS and 1 <= o.version < 7:
            _check_legacy_ops(model.graph, o.version, what)


def _check_legacy_ops(graph: onnx.GraphProto, opset: int, what: str) -> None:
    """In a model of opset 1-6, an operator whose definition at that opset is not the one opset 7
    has is a legacy version (Add/Mul with a `broadcast` attribute, BatchNormalization with
    `spatial`, Relu with `consumed_inputs`, ...): ONNX Runtime implements only the newer one, and
    the importer would read it with the newer semantics. One whose definition is unchanged since
    (Not, Neg-6, ...) means the same at any opset and is read as it is."""
    for node in graph.node:
        if node.domain not in _DEFAULT_DOMAINS:
            continue
        try:
            at_7 = onnx.defs.get_schema(node.op_type, 7).since_version
            mine = onnx.defs.get_schema(node.op_type, opset).since_version
        except onnx.defs.SchemaError:
            continue  # unknown at that opset: the importer names it
        if mine != at_7:
            raise ImportError_(
                f"{node_name(node)}: {what} uses {node.op_type}-{mine} (opset {opset}), whose semantics "
                f"changed by opset 7 ({node.op_type}-{at_7}); ONNX Runtime implements only the newer "
                "version; convert the model with onnx.version_converter.convert_version(model, 13)"
            )


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node, subgraphs (If/Loop/Scan bodies) included; refuses nesting deeper than
    MAX_GRAPH_DEPTH (the importer and the evaluator recurse once per level). Iterative, so a
    hostile depth cannot exhaust the Python stack here."""
    stack = [(graph, 0)]
    while stack:
        g, depth = stack.pop()
        for node in g.node:
            yield node
            subs = [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
            subs += [sg for a in node.attribute if a.type == onnx.AttributeProto.GRAPHS for sg in a.graphs]
            if subs and depth + 1 > MAX_GRAPH_DEPTH:
                raise ImportError_(
                    f"{node_name(node)}: subgraphs nested more than {MAX_GRAPH_DEPTH} deep; refusing "
                    "(the importer and the evaluator recurse once per level)"
                )
            stack.extend((sg, depth + 1) for sg in subs)


def _check_value_types(graph: onnx.GraphProto) -> None:
    for kind, values in (("input", graph.input), ("output", graph.output), ("value", graph.value_info)):
        for vi in values:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type not in _VALID_TYPES:
                raise ImportError_(
                    f"graph {kind} {vi.name!r} declares element type {vi.type.tensor_type.elem_type}, "
                    "which is not an ONNX tensor type"
                )


def _check_attributes(node: onnx.NodeProto) -> None:
    if node.op_type not in _WINDOWED or node.domain not in (*_DEFAULT_DOMAINS, "com.microsoft"):
        return
    for a in node.attribute:
        if a.name in _POSITIVE and any(v <= 0 for v in a.ints):
            raise ImportError_(f"{node_name(node)}: attribute {a.name} is {list(a.ints)}; every value must be positive")
        if a.name == "group" and a.i <= 0:
            raise ImportError_(f"{node_name(node)}: attribute group is {a.i}; it must be positive")


def _check_windowed_weights(graph: onnx.GraphProto) -> None:
    """A Conv whose weight (a constant) has a zero-size dimension has no kernel to apply."""
    inits = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type in _WINDOWED and len(node.input) > 1 and node.input[1] in inits:
            dims = list(inits[node.input[1]].dims)
            if 0 in dims:
                raise ImportError_(f"{node_name(node)}: weight {node.input[1]!r} has a zero-size dimension {dims}")


def _lean_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model for shape inference: big initializers become typed graph inputs (inference needs
    their shapes, not their values), declared output shapes and value_info are dropped (ORT merges
    them leniently; check_declared_outputs compares outputs after import)."""
    lean = onnx.ModelProto()
    _copy_without_weights(model, lean)
    g = lean.graph
    del g.value_info[:]
    for o in g.output:
        if o.type.HasField("tensor_type"):
            o.type.tensor_type.ClearField("shape")
    return lean


def _copy_without_weights(model: onnx.ModelProto, lean: onnx.ModelProto) -> None:
    for field in ("ir_version", "producer_name", "domain", "model_version"):
        setattr(lean, field, getattr(model, field))
    lean.opset_import.extend(model.opset_import)
    lean.functions.extend(model.functions)
    g, src = lean.graph, model.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    declared = {vi.name for vi in src.input}
    for t in src.initializer:
        if len(t.raw_data) + 4 * (len(t.float_data) + len(t.int32_data)) + 8 * len(t.int64_data) <= _INLINE_BYTES:
            g.initializer.append(t)
        elif t.name not in declared:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    lean = _lean_copy(model)  # inside the caller's try: a malformed name raises UnicodeDecodeError here
    try:
        return onnx.shape_inference.infer_shapes(lean, check_type=False, strict_mode=True)
    except onnx.shape_inference.InferenceError as e:
        if _inference_op(_one_line(e)) not in NARROWER_INFERENCE:
            raise
    # The op's inference function rejects a form its spec (and MIGraphX, onnx.reference) allows and
    # our importer has already checked: infer the rest, leaving that op's outputs unknown.
    return onnx.shape_inference.infer_shapes(lean, check_type=False, strict_mode=False)


def _infer_strict(model: onnx.ModelProto) -> tuple[dict[str, list[int | None]], dict[str, int]]:
    """Strict ONNX shape inference on a lean copy; returns the inferred dims (None for an unknown
    dim) and element types, by value name. An inference error names its node."""
    try:
        inferred = _infer(model)
    except onnx.shape_inference.InferenceError as e:
        raise ImportError_(_inference_error(_one_line(e))) from None
    except (ValueError, RuntimeError, onnx.checker.ValidationError) as e:
        raise ImportError_(f"ONNX shape inference fails on the model: {_one_line(e)}") from None
    shapes: dict[str, list[int | None]] = {}
    types: dict[str, int] = {}
    g = inferred.graph
    for vi in (*g.input, *g.value_info, *g.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.elem_type:
            types[vi.name] = tt.elem_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            shapes[vi.name] = [int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim]
    for t in model.graph.initializer:
        shapes[t.name] = list(t.dims)
        types[t.name] = t.data_type
    return shapes, types


def _check_constant_gathers(graph: onnx.GraphProto, shapes: dict[str, list[int | None]]) -> None:
    """Gather with constant indices: each must lie in [-n, n-1] for the data's axis of size n (ORT
    refuses it when it runs; here the values are known before anything runs)."""
    consts = constant_tensors(graph)
    for node in graph.node:
        if node.op_type != "Gather" or len(node.input) < 2 or node.input[1] not in consts:
            continue
        dims = shapes.get(node.input[0])
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if not dims or not -len(dims) <= axis < len(dims) or dims[axis] is None:
            continue
        n = dims[axis]
        t = consts[node.input[1]]
        if np.prod(t.dims, dtype=np.int64) > 1 << 20:
            continue
        idx = numpy_helper.to_array(t)
        bad = idx[(idx < -n) | (idx >= n)] if idx.size else idx
        if bad.size:
            raise ImportError_(
                f"{node_name(node)}: index {int(bad.flat[0])} is out of range for axis {axis} of "
                f"{node.input[0]!r}, which has {n} elements (valid: {-n} to {n - 1})"
            )


def overrides_fixed_dims(model: onnx.ModelProto, dims: dict) -> bool:
    """Whether the importer's input dims change a dim the model fixes (input_dims may): then the
    declared output dims describe another model and are not checked."""
    declared = {vi.name: vi.type.tensor_type.shape.dim for vi in model.graph.input}
    for name, lens in dims.items():
        for d, n in zip(declared.get(name, ()), lens):
            if d.HasField("dim_value") and d.dim_value > 0 and (np.ndim(n) != 0 or int(n) != d.dim_value):
                return True
    return False


def check_declared_outputs(model: onnx.ModelProto, output_shapes: list) -> list[str]:
    """Graph outputs whose declared dims contradict the shape the model computes (a different
    rank, or a fixed dim of another size), as messages; unknown and symbolic dims match anything,
    as does a declared shape with no dims (exporters write it for an unknown rank).

    ONNX Runtime warns about such a declaration ("Error merging shape info for output ...
    Falling back to lenient merge") and runs the model with the computed shape; so do we:
    `validate_imported` turns these into one warning."""
    out = []
    for vi, shape in zip(model.graph.output, output_shapes):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape") or not len(tt.shape.dim) or shape.is_tuple:
            continue
        declared = [int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim]
        lens = list(shape.lens)
        shown = ["?" if d is None else d for d in declared]
        if len(declared) != len(lens):
            out.append(
                f"graph output {vi.name!r} is declared with rank {len(declared)} {shown}, but the model "
                f"computes rank {len(lens)} {lens}"
            )
            continue
        dyn = shape.dyn_dims
        for i, (d, n) in enumerate(zip(declared, lens)):
            fixed = dyn is None or dyn[i].is_fixed
            if d is not None and d > 0 and fixed and d != n:
                out.append(f"graph output {vi.name!r} is declared {shown}, but the model computes {lens} (dim {i})")
                break
    return out


# Ops whose ONNX shape-inference function is narrower than the operator's spec: rank-1
# BatchNormalization (no channel axis), Einsum with broadcast `...` operands of different ranks,
# RMSNormalization with a wider scale type than its input, MeanVarianceNormalization with its
# default axes (its function body's Constant gets no value in strict mode; ORT runs it). The
# importer implements the spec.
NARROWER_INFERENCE = frozenset({"BatchNormalization", "Einsum", "RMSNormalization", "MeanVarianceNormalization"})


def _inference_op(text: str) -> str:
    m = re.search(r"\(op_type:([\w.]+)", text)
    return m.group(1) if m else ""


def _inference_error(text: str) -> str:
    """onnx's `[ShapeInferenceError] Inference error(s): (op_type:Conv, node name: c1): [...] msg`
    as `node c1 (Conv): msg (ONNX shape inference)`."""
    m = re.search(r"\(op_type:([\w.]+)(?:, node name: ([^)]*))?\): (?:\[\w+\] )?(.*)", text)
    if not m:
        return f"ONNX shape inference refuses the model: {text}"
    op, name, msg = m.groups()
    return f"node {name or '(unnamed)'} ({op}): {msg} (ONNX shape inference, as ONNX Runtime runs it)"


def _one_line(e: BaseException) -> str:
    text = " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip())
    return text[:400] or type(e).__name__
