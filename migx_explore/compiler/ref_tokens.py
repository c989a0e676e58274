"""How the incremental evaluator (compiler/ref_incremental.py) names values: an instruction's
memo key from its value key and its inputs' tokens, a number per submodule structure, and the
bitwise identity and fingerprint that let a recomputed value keep the token of the one it equals
(what depends on it is then found unchanged: the early cutoff)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .snapshot import rebuilt_record

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Instruction, Module


def make_key(ins: Instruction, vk: tuple, shape: Any, tokens: dict[int, int], modules: ModuleTokens) -> tuple:
    """The memo key of `ins`: its value key `vk` (value_keys.py), submodule numbers, the tokens of
    the inputs its compute reads and the type and lens it writes."""
    op_key, used, mods = vk
    subs = tuple(modules(m) for m in mods) if mods else ()
    inputs = ins.inputs
    toks = tuple([tokens[i.id] for i in inputs] if used is None else [tokens[_input_at(inputs, k).id] for k in used])
    return (op_key, subs, toks, shape)


def _input_at(inputs: tuple, k: int | tuple[int, ...]) -> Instruction:
    """An input by position, or by a path of positions through inputs' inputs (value_keys.py)."""
    if isinstance(k, int):
        return inputs[k]
    ins = inputs[k[0]]
    for j in k[1:]:
        ins = ins.inputs[j]
    return ins


class ModuleTokens:
    """A number per submodule structure (each instruction's op, shape, literal, submodules and
    inputs by position): modules with the same number compute the same function, in this version
    and the one before. Keys hold the number, so the structure is hashed once per evaluation."""

    def __init__(self, before: dict[tuple, tuple], counter: Iterator[int], by_record: dict[int, tuple]):
        self.before, self.now = before, {}  # structure -> (number, the literals it names by id, itself)
        # a leaf module's structure by the snapshot record it was rebuilt from, the version before's and this one's
        self._by_record, self.records = by_record, {}
        self._memo: dict[int, int] = {}  # id(module) -> number, this evaluation
        self._counter = counter

    def __call__(self, m: Module) -> int:
        n = self._memo.get(id(m))
        if n is not None:
            return n
        src = rebuilt_record(m)  # unedited since compiler/snapshot.py built it
        if src is not None and id(src) in self._by_record:
            key, lits = self._by_record[id(src)][1:]
        else:
            struct, lits = self._structure(m)
            key = _Structure((m.bypass, struct))
        entry = self.now.get(key) or self.before.get(key) or (next(self._counter), lits, key)
        key = entry[2]  # one object per structure, so the records of its copies find it by identity
        if src is not None and not key.value[1][1]:  # a leaf module: its record fixes its structure
            self.records[id(src)] = (src, key, lits)
        self.now[key] = entry
        self._memo[id(m)] = entry[0]
        return entry[0]

    def _structure(self, m: Module) -> tuple[tuple, tuple]:
        """((rows, has submodules), the literals named by id): held, so no id is reused while the
        entry exists."""
        pos: dict[int, int] = {}
        rows, lits, nested = [], [], False
        for k, ins in enumerate(m):
            pos[ins.id] = k
            lit = None
            if ins.is_literal():
                lit = id(ins.literal.data)
                lits.append(ins.literal.data)
            name = ins.param_name if ins.is_param() else None
            subs = tuple(self(s) for s in ins.module_inputs)
            nested = nested or bool(subs)
            rows.append((ins.op, ins.shape, lit, name, subs, tuple(pos[i.id] for i in ins.inputs)))
        return (tuple(rows), nested), tuple(lits)


class _Structure:
    """A module's structure as a dict key, its hash computed once: the same module record gives
    the same object each version, found by identity (a structure tuple re-hashed its every row,
    ops and shapes, on each lookup: two thirds of a check that changed nothing)."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: tuple):
        self.value, self._hash = value, hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, _Structure) and self._hash == other._hash and self.value == other.value
        )


def identical(a: Any, b: Any) -> bool:
    """Same dtype, shape and bits (NaN payloads and the sign of zero included)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and all(identical(x, y) for x, y in zip(a, b))
        )
    if a is b:
        return True
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return _same_bits(a, b)


def fingerprint(v: Any) -> tuple:
    """Type, shape and a few elements' bits: equal for identical values, rarely for others."""
    if isinstance(v, tuple):
        return tuple(fingerprint(x) for x in v)
    if v.size > 64:
        sample = v.flat[_probe(v.size)]
    else:
        sample = v.reshape(-1)
    bits = _BITS.get(v.dtype.itemsize)
    return (v.dtype.str, v.shape, (sample.view(bits) if bits else sample).tobytes())


@functools.lru_cache(maxsize=1024)
def _probe(size: int) -> np.ndarray:
    return np.linspace(0, size - 1, 16).astype(np.intp)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    bits = _BITS.get(a.dtype.itemsize)
    if bits is None:  # complex128 and wider: by value
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a.view(bits), b.view(bits)))  # a view of any strides, same itemsize


_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


__all__ = ["ModuleTokens", "fingerprint", "identical", "make_key"]
