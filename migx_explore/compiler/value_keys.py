"""What an instruction's reference compute reads, for the incremental evaluator's memo
(compiler/ref_incremental.py): two instructions with equal value keys compute the same value.

By default that is the op (every attribute), the submodules and every input. Some ops read less:
a kernel launch does not read its symbol name or thread counts, a GEMM not the BLAS plan chosen
for it, a kernel not the contents of the output buffer it writes, and a convolution reads its
padding only as begin and end values. Their value keys leave the rest out, so a pass that only
names a kernel, plans a BLAS call, moves a buffer into the arena or writes a symmetric padding
out costs no recomputation in the per-pass check. A value key is the compute's own reading of
the op, never a claim that two different computations agree: a lowered GEMM keys as the `dot`
it came from only where its compute is that product, bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import MigxError

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Instruction, Module
    from .op import Op
    from .shape import Shape

# (what the compute reads of the op, positions of the inputs whose values it reads (None: all;
# a tuple of positions is a path through inputs' inputs, for a value that is a function of
# theirs: a lowered convolution's GEMM keys on the convolution's data and weights), the
# submodules it runs)
ValueKey = tuple[Hashable, "Sequence[int] | None", "Sequence[Module]"]
ValueKeyFn = Callable[["Instruction"], ValueKey]

_VALUE_KEYS: dict[str, ValueKeyFn] = {}
_CANONICAL: dict[str, Callable[[Op, int], Op]] = {}


def register_value_key(*names: str) -> Callable[[ValueKeyFn], ValueKeyFn]:
    """Declare (as a decorator) the value key of the ops `names`."""

    def deco(fn: ValueKeyFn) -> ValueKeyFn:
        for n in names:
            _VALUE_KEYS[n] = fn
        return fn

    return deco


# A value computed in two steps whose first is an instruction of its own elsewhere: (that
# part's value key, its shape key, finish(part value, the instruction's args, the compute's
# SubmoduleRunner) -> the value).
ValueSplit = tuple[ValueKey, Hashable, Callable[[Any, list, Any], Any]]
_SPLITS: dict[str, Callable[[Instruction], ValueSplit | None]] = {}


def register_value_split(*names: str) -> Callable:
    """Declare (as a decorator) how the ops `names` split into a stored part and a finish."""

    def deco(fn: Callable[[Instruction], ValueSplit | None]) -> Callable:
        for n in names:
            _SPLITS[n] = fn
        return fn

    return deco


def value_split(ins: Instruction) -> ValueSplit | None:
    fn = _SPLITS.get(ins.op.name)
    return None if fn is None else fn(ins)


def value_key(ins: Instruction) -> ValueKey:
    fn = _VALUE_KEYS.get(ins.op.name)
    if fn is not None:
        return fn(ins)
    return canonical_op(ins.op, _rank(ins)), None, ins.module_inputs


def canonical_op(op: Op, rank: int) -> Op:
    """`op` with its attributes as its compute reads them (a convolution's padding written as
    begin and end values), for an input of `rank`; `op` itself for most ops."""
    fn = _CANONICAL.get(op.name)
    return op if fn is None else _canonical(fn, op, rank)


@functools.lru_cache(maxsize=4096)
def _canonical(fn: Callable[[Op, int], Op], op: Op, rank: int) -> Op:
    try:
        return fn(op, rank)
    except (MigxError, ValueError, TypeError, IndexError):  # a bad attribute: the compute will say so
        return op


def _rank(ins: Instruction) -> int:
    return ins.inputs[0].shape.ndim if ins.inputs and not ins.inputs[0].shape.is_tuple else 0


def _padding_as_read(params: Callable) -> Callable[[Op, int], Op]:
    def canon(op: Op, rank: int) -> Op:
        pb, pe, _, _ = params(op, rank - 2)
        return op.with_(padding=tuple(pb) + tuple(pe))

    return canon


def _register_canonical() -> None:
    from .ops.nn import conv_params, pool_params

    for name in ("convolution", "quant_convolution"):
        _CANONICAL[name] = _padding_as_read(conv_params)
    _CANONICAL["pooling"] = _padding_as_read(pool_params)


_register_canonical()


def shape_key(s: Shape) -> Hashable:
    """A value's element type and lens (strides are GPU layout; the reference ignores them)."""
    return tuple(shape_key(x) for x in s.sub_shapes) if s.is_tuple else (s.type, s.lens)


__all__ = [
    "ValueKey",
    "ValueSplit",
    "canonical_op",
    "register_value_key",
    "register_value_split",
    "shape_key",
    "value_key",
    "value_split",
]
