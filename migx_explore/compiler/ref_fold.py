"""Plan-level folds of the reference evaluator (compiler/ref.py).

A convolution followed by a
chain of per-channel affine operations on constants (an inference batch norm as the ONNX importer
writes it, `(conv - mean) * scale + bias`) runs as one convolution on folded weights plus one
per-channel bias:

    ((conv(x, w) - m) * s + b)[:, f]  ==  conv(x, w[f] * s[f])[:, f] + (b - m * s)[f]

The same real number; only float rounding differs (as where ONNX Runtime folds the batch norm
into the convolution). The program is not changed: the fold lives in the module's plan, the folded
weights and bias are computed once per plan (on its first evaluation, from the constant values)
and kept in it. It applies only where the chain's intermediate values are seen by nobody: each
value has one user and is no module output, and evaluations with a hook (`evaluate_all`, which
reports every value) use the unfolded plan. A chain whose constants turn out not to be per channel
(constant along every axis but the channel axis), or whose folded factors are not finite, runs
unfolded, instruction by instruction, as written.

A recurrent op (rnn, gru, lstm) whose R is a constant gets R from the plan with its last two axes
stored transposed, made once per plan: the same values, so that the R^T its every time step
multiplies by (a transposed view of R) is row-major, which OpenBLAS multiplies ~1.3x faster
than a transposed view. (A copy made in the op compute instead would be a fresh 300 KB per
forward for bilstm, which came from mmap and page-faulted every time.)
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Instruction

# the per-channel affine operations a chain may hold; `sub` only with the chain's value first
_AFFINE = ("add", "sub", "mul")
# the element types the fold keeps its rounding-only promise in (low floats round every step)
_FLOATS = ("float32", "float64")

RunOne = Callable[["Instruction", list], np.ndarray]


def _conv_foldable(ins: Instruction, constant: set[int]) -> bool:
    out = ins.shape
    return (
        ins.name == "convolution"
        and len(ins.inputs) == 2
        and not out.is_tuple
        and out.dyn_dims is None
        and out.type in _FLOATS
        and all(i.shape.type == out.type for i in ins.inputs)
        and ins.inputs[1].id in constant  # the weights: folded once per plan
    )


def _affine_next(cur: Instruction, nxt: Instruction, constant: set[int]) -> bool:
    """Whether `nxt` is `cur` op constant (constant op `cur` for add and mul), elementwise,
    in the convolution's own shape and type."""
    if nxt.name not in _AFFINE or len(nxt.inputs) != 2 or nxt.shape.is_tuple:
        return False
    a, b = nxt.inputs
    if (a is cur) == (b is cur):  # cur on neither side, or on both (cur * cur is no affine map)
        return False
    other = b if a is cur else a
    if nxt.name == "sub" and a is not cur:
        return False
    return (
        other.id in constant
        and nxt.shape.dyn_dims is None
        and nxt.shape.type == cur.shape.type
        and nxt.shape.lens == cur.shape.lens
        and other.shape.lens == cur.shape.lens
    )


def affine_chains(
    instrs: Sequence[Instruction], constant: set[int], keep: set[int]
) -> list[tuple[Instruction, list[Instruction]]]:
    """(convolution, the affine operations that follow it and fold into it: at least one) of
    `instrs`; `constant`: the ids of values computed from literals alone; `keep`: output ids."""
    uses = Counter(i.id for ins in instrs for i in ins.inputs)
    user: dict[int, Instruction] = {}
    for ins in instrs:
        for i in ins.inputs:
            user[i.id] = ins  # read only where the value has one use
    chains: list[tuple[Instruction, list[Instruction]]] = []
    for ins in instrs:
        if not _conv_foldable(ins, constant):
            continue
        chain: list[Instruction] = []
        cur = ins
        while uses[cur.id] == 1 and cur.id not in keep and _affine_next(cur, user[cur.id], constant):
            cur = user[cur.id]
            chain.append(cur)
        if chain:
            chains.append((ins, chain))
    return chains


def chain_operands(conv: Instruction, chain: Sequence[Instruction]) -> tuple[int, ...]:
    """The fused step's argument ids: the convolution's inputs, then each operation's constant."""
    prev, ids = conv, [i.id for i in conv.inputs]
    for ins in chain:
        ids.append(next(i.id for i in ins.inputs if i is not prev))
        prev = ins
    return tuple(ids)


def _per_channel(c: np.ndarray, lens: tuple[int, ...]) -> np.ndarray | None:
    """c's values along the channel axis (axis 1), in float64, if c is constant along every other
    axis of `lens`; else None."""
    full = np.broadcast_to(c, lens)
    v = full[(0, slice(None)) + (0,) * (len(lens) - 2)]
    if not np.array_equal(full, np.broadcast_to(v.reshape((1, -1) + (1,) * (len(lens) - 2)), lens)):
        return None
    return v.astype(np.float64)


class ConvAffine:
    """The fused step's compute: conv(x, w * s) + b' with s, b' folded from the chain's constants
    on the first call, or (when they are not per channel) the chain as written."""

    def __init__(self, conv: Instruction, chain: Sequence[Instruction]):
        self.conv, self.chain = conv, list(chain)
        self.instructions = [conv, *self.chain]
        prev, self.first = conv, []  # per operation: whether the chain's value is its first input
        for ins in self.chain:
            self.first.append(ins.inputs[0] is prev)
            prev = ins
        self.folded: tuple[np.ndarray, np.ndarray | None] | None = None
        self.unfoldable = False

    def _fold(self, w: np.ndarray, consts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None] | None:
        lens = self.conv.shape.lens
        scale, shift = np.ones(lens[1]), np.zeros(lens[1])  # y = conv * scale + shift, per channel
        for ins, c in zip(self.chain, consts):
            v = _per_channel(c, lens)
            if v is None:
                return None
            if ins.name == "mul":
                scale *= v
                shift *= v
            elif ins.name == "add":
                shift += v
            else:  # sub: the chain's value minus the constant
                shift -= v
        if not (np.isfinite(scale).all() and np.isfinite(shift).all()):
            return None  # x * 0 of an infinite x is NaN, x's folded weight 0 would hide it
        wf = (w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        wf.flags.writeable = False
        bias = None
        if shift.any():
            bias = shift.astype(w.dtype).reshape((1, -1) + (1,) * (len(lens) - 2))
            bias.flags.writeable = False
        return wf, bias

    def __call__(self, args: Sequence[np.ndarray], run_one: RunOne) -> np.ndarray:
        x, w, consts = args[0], args[1], args[2:]
        if self.folded is None and not self.unfoldable:
            self.folded = self._fold(np.asarray(w), [np.asarray(c) for c in consts])
            self.unfoldable = self.folded is None
        if self.folded is None:  # as written: one instruction after the other
            y = run_one(self.conv, [x, w])
            for ins, c, first in zip(self.chain, consts, self.first):
                y = run_one(ins, [y, c] if first else [c, y])
            return y
        wf, bias = self.folded
        y = run_one(self.conv, [x, wf])
        if bias is not None:
            if y.flags.writeable:  # the product is a fresh array: the bias goes in in place
                np.add(y, bias, out=y)
            else:
                y = y + bias
        return y

    def where(self) -> str:
        names = " -> ".join(i.name for i in self.instructions)
        return f"module {self.conv.module.name}: {names} (#{self.conv.id}..#{self.chain[-1].id}, folded)"


# ops whose compute multiplies every time step's h by R^T, R their input 2
_RECURRENT = ("rnn", "gru", "lstm")


class RelaidR:
    """A recurrent op's compute, fed R (a constant) stored with its last two axes transposed;
    remade only when the constant's value is a new array (one not kept by the plan)."""

    def __init__(self, ins: Instruction):
        self.ins = ins
        self.instructions = [ins]
        self.source: weakref.ref | None = None
        self.r: np.ndarray | None = None

    def __call__(self, args: Sequence[np.ndarray], run_one: RunOne) -> np.ndarray:
        r = args[2]
        if self.r is None or self.source is None or self.source() is not r:
            self.r = np.ascontiguousarray(np.swapaxes(r, 1, 2)).swapaxes(1, 2)  # R, row-major R^T
            self.source = weakref.ref(r)
        return run_one(self.ins, [*args[:2], self.r, *args[3:]])

    def where(self) -> str:
        return f"module {self.ins.module.name}: {self.ins.name} (#{self.ins.id})"


def relaid_recurrence(ins: Instruction, constant: set[int]) -> RelaidR | None:
    """A RelaidR for `ins` if it is a recurrent op with a constant 3-d R, else None."""
    if (
        ins.name in _RECURRENT
        and len(ins.inputs) > 2
        and ins.inputs[2].id in constant
        and ins.inputs[2].shape.ndim == 3
    ):
        return RelaidR(ins)
    return None
