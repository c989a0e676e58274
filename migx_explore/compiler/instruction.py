"""Instructions and literal data (the nodes of a Module; see compiler/ir.py for the mutation API).

Instruction fields are read-only properties: all mutation goes through Module methods, which keep
use lists consistent and bump the module's version counter (snapshots rely on it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import dtypes
from .errors import IRError
from .op import Op
from .shape import Shape


class Literal:
    """Immutable literal data shared between snapshots and program copies (never copied)."""

    __slots__ = ("shape", "data", "_hash")

    def __init__(self, data: Any, shape: Shape | None = None):
        arr = np.asarray(data)
        if shape is None:
            t = dtypes.dtype(arr.dtype).name
            shape = Shape.of(t, arr.shape)
        else:
            arr = np.asarray(arr, dtype=dtypes.np_dtype(shape.type))
            if arr.size == 1 and shape.elements() == 1:
                arr = arr.reshape(shape.lens)
            elif arr.shape != shape.lens:
                if arr.size != shape.elements():
                    raise IRError(f"literal data has {arr.size} elements but shape {shape} needs {shape.elements()}")
                arr = arr.reshape(shape.lens)
        arr = np.ascontiguousarray(arr).reshape(arr.shape)  # ascontiguousarray makes rank 0 into rank 1
        arr.flags.writeable = False
        self.data = arr
        self.shape = shape
        self._hash = None

    def content_hash(self) -> int:
        if self._hash is None:
            self._hash = hash((self.shape, self.data.tobytes()))
        return self._hash

    def same_as(self, other: Literal) -> bool:
        if self is other:
            return True
        return (
            self.shape == other.shape
            and self.content_hash() == other.content_hash()
            and np.array_equal(self.data.reshape(-1).view(np.uint8), other.data.reshape(-1).view(np.uint8))
        )

    def __repr__(self) -> str:
        return f"Literal({self.shape})"


# The ir.Module an instruction belongs to. ir.py builds instructions, so this file names no IR class
# (evaluating a constant subtree is ref.eval_instruction(ins), printing is printer's).
OwningModule = Any


class Instruction:
    __slots__ = (
        "_id",
        "_op",
        "_inputs",
        "_module_inputs",
        "_shape",
        "_outputs",
        "_origin",
        "_literal",
        "_module",
        "_prev",
        "_next",
        "_alive",
    )

    def __init__(
        self,
        module: OwningModule,
        op: Op,
        inputs: Sequence[Instruction],
        module_inputs,
        shape: Shape,
        origin: tuple[int, ...],
        literal: Literal | None,
        id: int,
    ):
        self._id = id
        self._op = op
        self._inputs = list(inputs)
        self._module_inputs = list(module_inputs)
        self._shape = shape
        self._outputs: list[Instruction] = []
        self._origin = origin
        self._literal = literal
        self._module = module
        self._prev = None
        self._next = None
        self._alive = True

    # read-only views ---------------------------------------------------------------------------
    id = property(lambda s: s._id)
    op = property(lambda s: s._op)
    name = property(lambda s: s._op.name)
    inputs = property(lambda s: tuple(s._inputs))
    module_inputs = property(lambda s: tuple(s._module_inputs))
    shape = property(lambda s: s._shape)
    outputs = property(lambda s: tuple(s._outputs))
    origin = property(lambda s: s._origin)
    literal = property(lambda s: s._literal)
    module = property(lambda s: s._module)
    alive = property(lambda s: s._alive)

    @property
    def next(self) -> Instruction | None:
        n = self._next
        return None if n is None or n._op is None else n

    @property
    def prev(self) -> Instruction | None:
        p = self._prev
        return None if p is None or p._op is None else p

    def is_param(self) -> bool:
        return self._op.name == "@param"

    def is_literal(self) -> bool:
        return self._op.name == "@literal"

    def is_return(self) -> bool:
        return self._op.name == "@return"

    def is_builtin(self) -> bool:
        return self._op.name.startswith("@")

    @property
    def param_name(self) -> str:
        return self._op["name"]

    def can_eval(self, _cache: dict | None = None) -> bool:
        """True for a literal, or a context-free non-param op whose inputs can all be evaluated."""
        if _cache is not None:  # asked again in a sweep (is_constant on many roots): one lookup
            known = _cache.get(self._id)
            if known is not None:
                return known
        cache = {} if _cache is None else _cache
        stack = [self]
        while stack:
            ins = stack[-1]
            if ins._id in cache:
                stack.pop()
                continue
            if ins.is_literal():
                cache[ins._id] = True
                stack.pop()
                continue
            if (
                ins.is_builtin()
                or ins._op.has("not_context_free")
                or ins._op.has("side_effect")
                or ins._op.spec.compute is None
                or ins._shape.dynamic_shape
            ):
                cache[ins._id] = False
                stack.pop()
                continue
            # One input at a time, stopping at the first non-constant one: deciding that a value
            # deep in a network is not constant must not walk everything above it.
            pending = None
            for i in ins._inputs:
                known = cache.get(i._id)
                if known is False:
                    cache[ins._id] = False
                    break
                if known is None and pending is None:
                    pending = i
            if ins._id in cache:
                stack.pop()
            elif pending is not None:
                stack.append(pending)
            else:
                cache[ins._id] = True
                stack.pop()
        return cache[self._id]

    def __repr__(self) -> str:
        return f"<{self._op.name} #{self._id} {self._shape}>"


class Sentinel(Instruction):
    __slots__ = ()

    def __init__(self):  # noqa: D401 - a list end marker, never a real instruction
        self._op = None
        self._module = None
        self._prev = self._next = None
        self._id = -1
        self._alive = False
