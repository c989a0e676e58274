"""Import an ONNX op by expanding the function body its schema defines (Attention,
RotaryEmbedding, SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, ...).

ONNX defines many newer ops as functions of older ones; some bodies depend on the node (its
attributes and input types: "context-dependent functions"). Expanding the body at import is the
decomposition MIGraphX writes by hand in its parsers, taken from the standard itself: the result
is plain IR (dot, softmax, where, ...) that every pass and the GPU backend already handle.

Body names are prefixed into the node's own namespace; inside a body node's subgraphs (a Loop in
LinearAttention's body, an If in AffineGrid's) only the names read from the body are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx
from onnx import helper

from .. import dtypes

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Instruction
    from .context import NodeContext


def _input_type(ins: Instruction | None) -> onnx.TypeProto:
    if ins is None:
        return onnx.TypeProto()
    return helper.make_tensor_type_proto(dtypes.dtype(ins.shape.type).onnx_code, list(ins.shape.lens))


def _schema(ctx: NodeContext) -> onnx.defs.OpSchema:
    try:
        return onnx.defs.get_schema(ctx.node.op_type, ctx.opset, ctx.node.domain)
    except onnx.defs.SchemaError:
        raise ctx.error("no ONNX schema for this op at this opset") from None


def _defaulted(schema: onnx.defs.OpSchema, node: onnx.NodeProto) -> dict[str, onnx.AttributeProto]:
    """The node's attributes plus the schema's defaults for the ones it leaves out, by name."""
    out = {a.name: a for a in node.attribute}
    for name, spec in schema.attributes.items():
        if name not in out and spec.default_value.name:
            out[name] = spec.default_value
    return out


def _function_body(ctx: NodeContext, schema: onnx.defs.OpSchema, args: list) -> onnx.FunctionProto:
    plain = [v for v in schema.function_opset_versions if v <= ctx.opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= ctx.opset]
    if not plain and not dependent:
        raise ctx.error("the ONNX schema defines no function body to expand at this opset")
    fn = onnx.FunctionProto()
    if dependent and (not plain or max(dependent) >= max(plain)):
        # The body may depend on defaulted attributes: build it from the node with them filled in.
        full = onnx.NodeProto()
        full.CopyFrom(ctx.node)
        del full.attribute[:]
        full.attribute.extend(_defaulted(schema, ctx.node).values())
        types = [_input_type(a).SerializeToString() for a in args]
        fn.ParseFromString(
            schema.get_context_dependent_function_with_opset_version(max(dependent), full.SerializeToString(), types)
        )
    else:
        fn.ParseFromString(schema.get_function_with_opset_version(max(plain)))
    return fn


def _renamed(node: onnx.NodeProto, rename, attrs: dict[str, onnx.AttributeProto]) -> onnx.NodeProto:
    new = onnx.NodeProto()
    new.CopyFrom(node)
    new.input[:] = [rename(n) for n in node.input]
    new.output[:] = [rename(n) for n in node.output]
    del new.attribute[:]
    for a in node.attribute:
        if a.ref_attr_name:
            if a.ref_attr_name not in attrs:
                continue  # an optional attribute the node does not set: the body op's default applies
            b = onnx.AttributeProto()
            b.CopyFrom(attrs[a.ref_attr_name])
            b.name = a.name
            new.attribute.append(b)
        elif a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            b = onnx.AttributeProto()
            b.CopyFrom(a)
            for g in [b.g] if a.type == onnx.AttributeProto.GRAPH else list(b.graphs):
                _rename_subgraph(g, rename, attrs)
            new.attribute.append(b)
        else:
            new.attribute.append(a)
    return new


def _rename_subgraph(g: onnx.GraphProto, rename, attrs: dict[str, onnx.AttributeProto]) -> None:
    """In place: names the subgraph reads from the function body take the body's new names; its
    own names (inputs, initializers, node outputs) stay."""
    own = {i.name for i in g.input} | {t.name for t in g.initializer} | {o for n in g.node for o in n.output if o}

    def outer(n: str) -> str:
        return n if not n or n in own else rename(n)

    nodes = [_renamed(n, outer, attrs) for n in g.node]
    del g.node[:]
    g.node.extend(nodes)
    for o in g.output:
        o.name = outer(o.name)


def expand_function(ctx: NodeContext, args: list) -> list[Instruction | None]:
    """Import the node's function body into the current module; returns its outputs."""
    schema = _schema(ctx)
    fn = _function_body(ctx, schema, args)
    prefix = f"{ctx.node.output[0] if ctx.node.output else ctx.op_type}/{ctx.op_type}/"
    env: dict[str, Instruction] = {}
    names: dict[str, str] = {}
    for i, formal in enumerate(fn.input):
        if i < len(args) and args[i] is not None:
            env[prefix + formal] = args[i]
            names[formal] = prefix + formal
        else:
            names[formal] = ""  # a missing optional input stays missing inside the body
    attrs = _defaulted(schema, ctx.node)  # what body nodes' ref_attr_name read
    for a in fn.attribute_proto:  # defaults the function itself declares
        attrs.setdefault(a.name, a)

    def rename(n: str) -> str:
        return "" if not n else names.get(n, prefix + n)

    body_opset = next((o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")), ctx.opset)
    nodes = ctx.importer.sorted_nodes([_renamed(n, rename, attrs) for n in fn.node], set(env))
    ctx.importer.import_nodes(ctx.module, nodes, env, body_opset)
    return [env.get(prefix + o) for o in fn.output]


def import_expansion(
    ctx: NodeContext,
    bindings: dict[str, Instruction | None],
    nodes: list[onnx.NodeProto],
    outputs: list[str],
    opset: int | None = None,
) -> list[Instruction]:
    """Import hand-written ONNX nodes that stand for this node (QLinear* as DequantizeLinear -> op
    -> QuantizeLinear, ...): `bindings` names the node's values, `outputs` the results to return.
    The nodes go through the same handlers as the model's own nodes."""
    env = {k: v for k, v in bindings.items() if v is not None}
    ctx.importer.import_nodes(ctx.module, nodes, env, opset or max(ctx.opset, 21))
    return [env[o] for o in outputs]
