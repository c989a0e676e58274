"""Evaluating successive versions of one program on fixed inputs, recomputing only what can differ.

The per-pass numeric check evaluates the program after every pass that changed it, and a pass
changes a few instructions of hundreds. `IncrementalEvaluator` keeps the values of the version it
evaluated last, each under a key made of what determines it: the instruction's op and
submodules, and the *values* of its inputs (each distinct value gets a number, its token). An
instruction whose key was seen takes the stored value; one that was not is computed, and when its
value holds the same numbers its stable id (or an instruction it came from) had before, it keeps
that value's token, so what depends on it is found unchanged too (a fused kernel that computes
what the chain it replaced computed invalidates nothing downstream). The same numbers in another
memory layout (a `contiguous` copy of a transposed view) count as the same value: a product over
them may round differently in its last bits, well inside any check's tolerance, and re-running
everything downstream of each layout change would cost a forward pass per backend pass.

Memory is bounded by one version's values: after each evaluation only the values of the version
just evaluated are kept (views share their base's memory; literals are the program's own data).
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .limits import work_meter
from .ref import arithmetic, bind_params, one_blas_thread, run_instruction, with_buffer_params
from .value_keys import shape_key, value_key, value_split

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Instruction, Module, Program


@dataclass
class EvalStats:
    computed: int = 0  # instructions run
    reused: int = 0  # instructions whose value was kept from the version before
    finished: int = 0  # of those computed, how many from a stored part (value_keys.value_split)


class IncrementalEvaluator:
    """`evaluate(program)` returns main's outputs on the inputs given here, as compiler.ref.evaluate
    does, reusing what the previously evaluated version already computed. Thread-safe (one
    evaluation at a time)."""

    def __init__(self, inputs: Mapping[str, Any]):
        self.inputs = inputs  # not copied: the NumericConfig that owns this evaluator holds the same
        self.last = EvalStats()
        # (token, value, fingerprint) by key, by stable id and by fingerprint
        self._by_key: dict[tuple, tuple] = {}
        self._by_id: dict[int, tuple] = {}
        self._by_print: dict[tuple, tuple] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()

    def evaluate(self, program: Program) -> list[np.ndarray]:
        with self._lock, np.errstate(all="ignore"), work_meter() as meter, one_blas_thread():
            main = program.main
            params = bind_params(main, with_buffer_params(program, self.inputs), True)
            stats, by_key, by_id, by_print = EvalStats(), {}, {}, {}
            module_keys: dict[int, tuple] = {}
            tokens: dict[int, int] = {}
            values: dict[int, Any] = {}
            for ins in main:
                if ins.is_return():
                    break
                meter.spend(lambda ins=ins: f"module {main.name}: {ins.name} (#{ins.id})", arithmetic(ins))
                key = self._key(ins, tokens, module_keys)
                hit = by_key.get(key) or self._by_key.get(key)
                if hit is None:
                    if ins.is_param():
                        value = params[ins.id]
                    elif ins.is_literal():
                        value = ins.literal.data
                    else:
                        args = [values[i.id] for i in ins.inputs]
                        value = self._from_part(ins, args, tokens, module_keys, by_key)
                        if value is None:
                            value = run_instruction(ins, args, True)
                        else:
                            stats.finished += 1
                        stats.computed += 1
                    fp = _fingerprint(value)
                    same = self._as_before(ins, value, fp)
                    # the old token (what depends on it is unchanged), with this version's array
                    hit = (same[0] if same else next(self._tokens), value, fp)
                elif not (ins.is_param() or ins.is_literal()):
                    stats.reused += 1
                by_key[key] = by_id[ins.id] = hit
                by_print.setdefault(hit[2], hit)
                tokens[ins.id], values[ins.id] = hit[0], hit[1]
            outputs = [values[o.id] for o in main.output_instructions()]
            # drop what this version lacks
            self._by_key, self._by_id, self._by_print, self.last = by_key, by_id, by_print, stats
            return outputs

    def _key(self, ins: Instruction, tokens: dict[int, int], module_keys: dict[int, tuple]) -> tuple:
        if ins.is_param():
            return ("@param", ins.param_name, ins.shape)
        if ins.is_literal():
            # By identity: literal data is immutable and shared between versions, and the stored
            # value holds it, so the id cannot be reused while the key exists.
            return ("@literal", id(ins.literal.data), ins.shape)
        # What the compute reads (compiler/value_keys.py): the op as it reads it, the inputs whose
        # values it reads, its submodules and the element type and lens it writes (a lowered
        # GEMM writes its buffer's lens; strides are GPU layout, which the reference ignores).
        return _make_key(ins, value_key(ins), shape_key(ins.shape), tokens, module_keys)

    def _from_part(self, ins: Instruction, args: list, tokens: dict[int, int], module_keys: dict, by_key: dict):
        """The value finished from a stored value of its first part (a fused GEMM's product, the
        GEMM it was before the epilogue joined it), or None: only the epilogue then runs."""
        split = value_split(ins)
        if split is None:
            return None
        part, part_shape, finish = split
        key = _make_key(ins, part, part_shape, tokens, module_keys)
        hit = by_key.get(key) or self._by_key.get(key)
        return None if hit is None else finish(hit[1], args)

    def _as_before(self, ins: Instruction, value: Any, fp: tuple) -> tuple | None:
        """A previous value that is the same bit for bit: this instruction's, one it came from, or
        any with the same fingerprint (an output buffer now a parameter, still zeros)."""
        for stable in (ins.id, *ins.origin):
            prev = self._by_id.get(stable)
            if prev is not None and prev[2] == fp and _identical(prev[1], value):
                return prev
        prev = self._by_print.get(fp)
        return prev if prev is not None and _identical(prev[1], value) else None


def _make_key(ins: Instruction, vk: tuple, shape: Any, tokens: dict[int, int], module_keys: dict) -> tuple:
    op_key, used, mods = vk
    subs = tuple(_module_key(m, module_keys) for m in mods) if mods else ()
    inputs = ins.inputs
    toks = tuple(tokens[i.id] for i in inputs) if used is None else tuple(tokens[inputs[k].id] for k in used)
    return (op_key, subs, toks, shape)


def _module_key(m: Module, memo: dict[int, tuple]) -> tuple:
    """A submodule's structure: each instruction's op, shape, literal, submodules and inputs (by
    position), so two modules with equal keys compute the same function."""
    k = memo.get(id(m))
    if k is not None:
        return k
    pos: dict[int, int] = {}
    rows = []
    for n, ins in enumerate(m):
        pos[ins.id] = n
        lit = id(ins.literal.data) if ins.is_literal() else None
        name = ins.param_name if ins.is_param() else None
        rows.append(
            (
                ins.op,
                ins.shape,
                lit,
                name,
                tuple(_module_key(s, memo) for s in ins.module_inputs),
                tuple(pos[i.id] for i in ins.inputs),
            )
        )
    k = memo[id(m)] = (m.bypass, tuple(rows))
    return k


def _identical(a: Any, b: Any) -> bool:
    """Same dtype, shape and bits (NaN payloads and the sign of zero included)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and all(_identical(x, y) for x, y in zip(a, b))
        )
    if a is b:
        return True
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return _same_bits(a, b)


def _fingerprint(v: Any) -> tuple:
    """Type, shape and a few elements' bits: equal for identical values, rarely for others."""
    if isinstance(v, tuple):
        return tuple(_fingerprint(x) for x in v)
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


__all__ = ["EvalStats", "IncrementalEvaluator"]
