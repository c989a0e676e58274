"""The graph walker and the per-node context handed to op handlers.

`NodeContext` gives handlers what MIGraphX's `onnx_parser::node_info` gives its op_parsers: the
node's attributes (with ONNX schema defaults), `add` for new instructions, literals, explicit
broadcasting (`add_common`), and import-time evaluation of constant inputs (`const`), which is how
shape-computing subgraphs (Shape -> Gather -> Concat -> Reshape) end up with static shapes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .. import dtypes
from ..errors import AttributeError_, EvalError, ImportError_, MigxError, ShapeError
from ..ir import Instruction, Module
from ..limits import check_lens
from ..op import Op
from ..ops.views import common_dyn_dims
from ..ref import eval_instruction
from .tensors import to_array

_MISSING = object()
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.:/\-]+")


def param_name(onnx_name: str) -> str:
    """The @param name for an ONNX graph input: the ONNX name itself unless the IR text form could
    not print and parse it back, in which case unsafe characters become '_'."""
    if _SAFE_NAME.fullmatch(onnx_name) and not onnx_name.startswith("@"):
        return onnx_name
    return re.sub(r"[^A-Za-z0-9_.:/\-]", "_", onnx_name).lstrip("@") or "_"


def common_lens(lens_list: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """Numpy broadcasting of several lens; None if they are incompatible."""
    nd = max((len(x) for x in lens_list), default=0)
    out = []
    for i in range(nd):
        dims = {x[len(x) - nd + i] for x in lens_list if len(x) - nd + i >= 0}
        big = dims - {1}
        if len(big) > 1:
            return None
        out.append(big.pop() if big else 1)
    return tuple(out)


class ConstantInputRequired(ImportError_):
    """A shape-like operand depends on graph inputs (`params`): the static importer needs its value.
    Callers that know the input values may re-import with them frozen (parse_onnx constant_inputs)."""

    def __init__(self, message: str, params: list[str]):
        super().__init__(message)
        self.params = params


def _params_feeding(ins: Instruction) -> list[str]:
    seen, stack, out = set(), [ins], []
    while stack:
        i = stack.pop()
        if i.id in seen:
            continue
        seen.add(i.id)
        if i.is_param():
            out.append(i.param_name)
        stack.extend(i.inputs)
    return sorted(out)


class NodeContext:
    """One ONNX node being imported into `module`."""

    def __init__(
        self,
        module: Module,
        node: onnx.NodeProto,
        opset: int,
        index: int,
        *,
        importer: Any = None,
        env: dict[str, Instruction] | None = None,
    ):
        self.module = module
        # The importer and the ONNX-name environment of the graph being imported: handlers of
        # control-flow ops and function-expanded ops import nested graphs through them.
        self.importer = importer
        self.env = env if env is not None else {}
        self.node = node
        self.opset = opset
        self.op_type = node.op_type
        self.name = node.name or f"#{index} ({node.output[0] if node.output else 'no output'})"
        self.attrs = {a.name: a for a in node.attribute}

    # ---- errors ------------------------------------------------------------------------------
    def error(self, msg: str) -> ImportError_:
        return ImportError_(f"node {self.name} ({self.op_type}, opset {self.opset}): {msg}")

    def check_size(self, lens: Sequence[int], itemsize: int) -> None:
        """Refuse a tensor this node would allocate over the memory budget, before allocating it."""
        try:
            check_lens(lens, itemsize, "a constant")
        except MigxError as e:
            raise self.error(str(e)) from None

    def bad_attr(self, attr: str, msg: str) -> ImportError_:
        return self.error(f"attribute {attr!r}: {msg}")

    # ---- attributes ----------------------------------------------------------------------------
    def has_attr(self, key: str) -> bool:
        return key in self.attrs

    def attr(self, key: str, default: Any = _MISSING) -> Any:
        """Attribute value (bytes decoded, tensors as numpy); absent: `default`, else the ONNX
        schema default for this opset, else an error naming the required attribute."""
        a = self.attrs.get(key)
        if a is not None:
            return self._decode(a, key)
        if default is not _MISSING:
            return default
        try:
            schema = onnx.defs.get_schema(self.op_type, self.opset, self.node.domain)
            spec = schema.attributes.get(key)
        except onnx.defs.SchemaError:
            spec = None
        if spec is not None and spec.default_value.name:
            return self._decode(spec.default_value, key)
        raise self.bad_attr(key, "required attribute is missing")

    def _decode(self, a: onnx.AttributeProto, key: str) -> Any:
        if a.ref_attr_name:
            raise self.bad_attr(key, "refers to a function attribute (only plain graphs are supported)")
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        if isinstance(v, onnx.TensorProto):
            return to_array(v, f"node {self.name} attribute {key!r}")
        if isinstance(v, list) and v and isinstance(v[0], bytes):
            return [x.decode("utf-8", "replace") for x in v]
        if isinstance(v, list):
            return list(v)
        return v

    def attr_choice(self, key: str, choices: Sequence[str], default: Any = _MISSING) -> str:
        v = self.attr(key, default)
        if v not in choices:
            raise self.bad_attr(key, f"value {v!r} is not one of {', '.join(map(repr, choices))}")
        return v

    # ---- building ----------------------------------------------------------------------------
    def add(self, op_name: str, inputs: Sequence[Instruction] = (), **attrs: Any) -> Instruction:
        """Append `op_name(inputs)`; attribute and shape errors name this node."""
        try:
            return self.module.add_instruction(Op(op_name, attrs), list(inputs))
        except AttributeError_ as e:
            raise self.error(f"bad attribute for {op_name}: {e}") from None
        except ShapeError as e:
            raise self.error(str(e)) from None

    def literal(self, value: Any, type: str | None = None) -> Instruction:

        arr = np.asarray(value) if type is None else np.asarray(value, dtype=dtypes.np_dtype(type))
        return self.module.add_literal(arr)

    def scalar_like(self, value: float, like: Instruction) -> Instruction:
        """A literal of `like`'s element type broadcast to its lens."""

        lit = self.module.add_literal(np.asarray(value, dtype=dtypes.np_dtype(like.shape.type)))
        return self.broadcast_to(lit, like)

    def convert(self, ins: Instruction, type: str) -> Instruction:
        return ins if ins.shape.type == type else self.add("convert", [ins], target_type=type)

    def contiguous(self, ins: Instruction) -> Instruction:
        """MIGraphX's make_contiguous: a copy only when the input is not standard (reshape needs it)."""
        return ins if ins.shape.standard() else self.add("contiguous", [ins])

    def broadcast_to(self, ins: Instruction, lens: Sequence[int] | Instruction) -> Instruction:
        """ins broadcast to lens, or to the shape of an instruction (with a dynamic shape, the
        2-input multibroadcast that follows it at run time)."""
        if isinstance(lens, Instruction):
            like = lens
            if like.shape.dynamic_shape or ins.shape.dynamic_shape:
                if ins.shape.dyn_dims == like.shape.dyn_dims and ins.shape.ndim == like.shape.ndim:
                    return ins
                return self.add("multibroadcast", [ins, like])
            lens = like.shape.lens
        lens = tuple(lens)
        if ins.shape.lens == lens:
            return ins
        if common_lens([ins.shape.lens, lens]) != lens:
            raise self.error(f"cannot broadcast {list(ins.shape.lens)} to {list(lens)}")
        return self.add("multibroadcast", [ins], out_lens=lens)

    def broadcast(self, *ins: Instruction) -> list[Instruction]:
        """ONNX implicit (numpy) broadcasting made explicit with multibroadcast, as MIGraphX does.
        With a dynamic input the others use the 2-input form multibroadcast(x, dynamic_ref)."""
        if any(i.shape.dynamic_shape for i in ins):
            try:
                dims = common_dyn_dims([i.shape for i in ins])
            except ShapeError as e:
                raise self.error(str(e)) from None
            out = []
            for k, i in enumerate(ins):
                full = [r for r in ins if r.shape.dyn_dims == dims]
                refs = full[:1] or [r for j, r in enumerate(ins) if j != k]  # one full-shape ref, else all
                out.append(i if i.shape.dyn_dims == dims else self.add("multibroadcast", [i, *refs]))
            return out
        lens = common_lens([i.shape.lens for i in ins])
        if lens is None:
            shapes = " and ".join(str(list(i.shape.lens)) for i in ins)
            raise self.error(f"inputs {shapes} cannot be broadcast together")
        return [self.broadcast_to(i, lens) for i in ins]

    def add_common(self, op_name: str, *ins: Instruction, **attrs: Any) -> Instruction:
        return self.add(op_name, self.broadcast(*ins), **attrs)

    # ---- constants -------------------------------------------------------------------------------
    def const(self, ins: Instruction | None) -> np.ndarray | None:
        """The value of an input that can be computed now (literals and ops on literals), else None."""
        if ins is None or not ins.can_eval():
            return None
        if not ins.shape.is_tuple and ins.shape.dyn_dims is None:
            self.check_size(ins.shape.lens, np.dtype(dtypes.np_dtype(ins.shape.type)).itemsize)
        try:
            return np.asarray(eval_instruction(ins))
        except (EvalError, MigxError) as e:
            raise self.error(f"evaluating a constant input failed: {e}") from None

    def need_const(self, ins: Instruction | None, what: str) -> np.ndarray:
        v = self.const(ins)
        if v is None:
            if ins is None:
                raise self.error(f"input {what!r} is required")
            params = _params_feeding(ins)
            raise ConstantInputRequired(
                f"node {self.name} ({self.op_type}, opset {self.opset}): input {what!r} must be a constant "
                f"(computable at import time) but depends on graph input(s) {', '.join(params) or '?'}; "
                "dynamic shapes are not supported (freeze them with constant_inputs)",
                params,
            )
        return v

    def need_exact(self, ins: Instruction, what: str) -> np.ndarray | None:
        """The value of `ins` when an op with a data-dependent output length must give ONNX's exact
        result (the importer was asked for it and `ins` is computed from main-graph inputs, which the
        caller can freeze: ConstantInputRequired); None where the padded form stays."""
        v = self.const(ins)
        if v is not None or not getattr(self.importer, "exact_data_dependent", False):
            return v
        if self.importer is None or self.module is not self.importer.main:
            return None
        return self.need_const(ins, what)

    def const_one_int(self, ins: Instruction | None, what: str) -> int:
        """A constant operand that must hold exactly one integer (TopK's K, CumSum's axis, Trilu's
        k): ONNX Runtime refuses [1, 2] or [] rather than reading the first element."""
        v = self.need_const(ins, what)
        if v.size != 1 or v.ndim > 1:
            raise self.error(f"input {what!r} must hold one integer (a scalar or shape [1]), got shape {list(v.shape)}")
        if v.dtype.kind not in "iu":
            raise self.error(f"input {what!r} must be an integer, got {v.dtype}")
        return int(v.reshape(-1)[0])

    def const_ints(self, ins: Instruction | None, what: str) -> list[int]:
        return [int(x) for x in self.need_const(ins, what).reshape(-1)]
