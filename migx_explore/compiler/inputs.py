"""Random inputs that respect the model.

Uniform random integers break real models: token ids must stay below the vocabulary size, a
token-type id below the rows of its (often 2-row) table, an attention mask must be 0/1. So each
parameter of main gets a role, read from how the program uses it (following the value through
views, converts and concats):

* index: it reaches the indices of a gather / gathernd / scatter / onehot; drawn from
  [0, smallest table extent it indexes).
* mask: it reaches a where condition, a convert to bool, a logical op, an equality test with
  0/1, or (integer inputs) an additive-mask pattern ((1 - m) * -10000, m * -1e9); drawn as
  padding masks (each row a run of ones, then zeros; never all zero, so masked softmaxes stay
  finite).
* shape: it sets a shape (the 2-input multibroadcast); refused: random values are meaningless,
  the user must pass real ones.
* value: everything else; floats uniform in [-1, 1), integers in [0, 4) (the old default, with
  the same random stream, so programs without indices or masks get the same inputs as before).

An evaluation error on generated inputs is re-raised by `explain_random_failure`, saying the
inputs were random and how to pass real ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import dtypes
from .errors import MigxError
from .limits import check_bytes
from .ref import eval_instruction

if TYPE_CHECKING:  # pragma: no cover - reads IR objects, never builds them
    from .ir import Instruction, Program

REAL_INPUTS_HINT = "pass real inputs with --inputs FEED.npz (CLI) or inputs={name: array} (Python)"

# Ops a value passes through unchanged in meaning (which rows / which mask bits it selects).
_TRANSPARENT = frozenset(
    {
        "convert",
        "reshape",
        "squeeze",
        "unsqueeze",
        "flatten",
        "broadcast",
        "contiguous",
        "transpose",
        "slice",
        "step",
        "concat",
        "identity",
        "layout",
    }
)
_LOGICAL = frozenset({"not", "logical_and", "logical_or", "logical_xor"})
_BIG_NEGATIVE = 1e3  # an additive mask pushes masked scores to -1e4, -1e9, -inf


class RandomInputsError(MigxError):
    """Random inputs cannot be made for this model (or made it fail); real ones are needed."""


@dataclass(frozen=True)
class InputRole:
    kind: str  # "value" | "index" | "mask" | "shape"
    bound: int = 0  # index: values drawn from [0, bound)
    why: str = ""  # the instruction that decided it, e.g. "gather #12 (table of 2 rows)"


def _users(ins: Instruction) -> Iterator[tuple[Instruction, int]]:
    for u in ins.outputs:
        for k, i in enumerate(u.inputs):
            if i is ins:
                yield u, k


def _const_value(ins: Instruction) -> np.ndarray | None:
    if not ins.can_eval():
        return None
    try:
        return np.asarray(eval_instruction(ins), np.float64)
    except MigxError:
        return None


def _label(ins: Instruction) -> str:
    return f"{ins.name} #{ins.id}"


def _index_bound(user: Instruction, k: int) -> tuple[int, str] | None:
    """Rows that operand k of `user` indexes, if it is an index operand."""
    name = user.name
    if name == "gather" and k == 1:
        data = user.inputs[0].shape
        axis = user.op["axis"] % max(data.ndim, 1)
        return data.lens[axis], f"{_label(user)} (table of {data.lens[axis]} along axis {axis})"
    if name == "gathernd" and k == 1:
        data, idx = user.inputs[0].shape, user.inputs[1].shape
        b = int(user.op.get("batch_dims", 0))
        dims = data.lens[b : b + idx.lens[-1]] if idx.ndim else data.lens
        return min(dims, default=1), f"{_label(user)} (data dims {list(dims)})"
    if name.startswith("scatter") and not name.startswith("scatternd") and k == 1:
        data = user.inputs[0].shape
        axis = user.op["axis"] % max(data.ndim, 1)
        return data.lens[axis], f"{_label(user)} (axis {axis} of {data.lens[axis]})"
    if name.startswith("scatternd") and k == 1:
        data = user.inputs[0].shape
        return min(data.lens, default=1), f"{_label(user)} (data dims {list(data.lens)})"
    if name == "onehot" and k == 0:
        return int(user.op["depth"]), f"{_label(user)} (depth {user.op['depth']})"
    return None


def _mask_use(user: Instruction, k: int, integral: bool) -> str | None:
    """Why operand k of `user` is a 0/1 mask (None if it is not). The additive-mask patterns count
    only for integer / bool inputs: a float input in `1 - x` is more often a blend weight."""
    name = user.name
    if name == "where" and k == 0:
        return f"the condition of {_label(user)}"
    if name == "convert" and user.shape.type == "bool":
        return f"{_label(user)} to bool"
    if name in _LOGICAL:
        return f"{_label(user)}"
    other = user.inputs[1 - k] if len(user.inputs) == 2 else None
    if other is None:
        return None
    c = _const_value(other)
    if c is None or c.size == 0:
        return None
    if name == "equal" and np.all(np.isin(c, (0.0, 1.0))):
        return f"{_label(user)} with {c.reshape(-1)[0]:g}"
    if not integral:
        return None
    if name == "sub" and k == 1 and np.all(c == 1.0):
        return f"1 - mask at {_label(user)} (additive mask)"
    if name == "mul" and np.all(c <= -_BIG_NEGATIVE):
        return f"mask * {c.reshape(-1)[0]:g} at {_label(user)} (additive mask)"
    return None


def _shape_use(user: Instruction, k: int) -> str | None:
    if user.name == "multibroadcast" and k == 1:
        return f"the target shape of {_label(user)}"
    return None


def input_role(param: Instruction) -> InputRole:
    """How the program uses one parameter (see the module docstring)."""
    index: tuple[int, str] | None = None
    mask: str | None = None
    integral = not dtypes.dtype(param.shape.type).is_float
    seen: set[int] = set()
    todo = [param]
    shape_why: str | None = None
    read = False  # some use reads the values (a shape reference alone does not)
    while todo:
        cur = todo.pop()
        if cur.id in seen:
            continue
        seen.add(cur.id)
        for user, k in _users(cur):
            why = _shape_use(user, k)
            if why:
                shape_why = shape_why or why
                continue
            read = True
            hit = _index_bound(user, k)
            if hit is not None and (index is None or hit[0] < index[0]):
                index = hit
            mask = mask or _mask_use(user, k, integral)
            if user.name in _TRANSPARENT and not (user.name == "convert" and user.shape.type == "bool"):
                todo.append(user)
    if shape_why is not None and not read:
        return InputRole("shape", why=shape_why)
    if index is not None:
        return InputRole("index", max(index[0], 1), index[1])
    if mask is not None:
        return InputRole("mask", why=mask)
    return InputRole("value")


def input_roles(program: Program) -> dict[str, InputRole]:
    return {p.param_name: input_role(p) for p in program.main.params()}


def _padding_mask(rng: np.random.Generator, lens: tuple[int, ...], np_type: np.dtype) -> np.ndarray:
    if not lens:
        return np.ones((), np_type)
    rows = int(np.prod(lens[:-1], dtype=np.int64))
    width = lens[-1]
    keep = rng.integers(1, width + 1, rows) if width else np.zeros(rows, np.int64)
    out = (np.arange(width)[None, :] < keep[:, None]).reshape(lens)
    return out.astype(np_type)


def model_inputs(program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic random inputs for every parameter of main, valid for how the model uses them.
    Raises RandomInputsError for shape-like inputs (they need real values)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise MigxError(f"the random inputs' seed must be an integer >= 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    _check_budget(program)
    for p in program.main.params():
        s = p.shape
        lens = _draw_lens(s)
        t = dtypes.dtype(s.type)
        role = input_role(p)
        if role.kind == "shape":
            raise RandomInputsError(
                f"input {p.param_name!r} is shape-like ({role.why}); random values would be "
                f"meaningless: {REAL_INPUTS_HINT}"
            )
        if role.kind == "index":
            out[p.param_name] = rng.integers(0, role.bound, lens).astype(t.np_dtype)
        elif role.kind == "mask":
            out[p.param_name] = _padding_mask(rng, lens, t.np_dtype)
        elif t.is_float:
            out[p.param_name] = rng.uniform(-1, 1, lens).astype(t.np_dtype)
        elif t.name == "bool":
            out[p.param_name] = rng.integers(0, 2, lens).astype(np.bool_)
        else:
            out[p.param_name] = rng.integers(0, 4, lens).astype(t.np_dtype)
    return out


def random_inputs(program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic inputs for every parameter of main: floats in [-1, 1), small ints, and
    indices / masks drawn to suit how the model uses them (the API's name for model_inputs)."""
    return model_inputs(program, seed)


def _draw_lens(s) -> tuple[int, ...]:
    return tuple(d.min if d.min > 0 else 1 for d in s.dyn_dims) if s.dyn_dims is not None else s.lens


def _check_budget(program: Program) -> None:
    """Refuse inputs over the memory budget before drawing any (float64 draws precede the cast:
    8 bytes per element at least)."""
    sizes = [
        (p.param_name, _draw_lens(p.shape), max(8, dtypes.np_dtype(p.shape.type).itemsize))
        for p in program.main.params()
    ]
    check_bytes(
        sum(math.prod(lens) * size for _, lens, size in sizes),
        "random inputs " + ", ".join(f"{name} {list(lens)}" for name, lens, _ in sizes),
    )


def explain_random_failure(error: BaseException) -> BaseException:
    """The error of evaluating a model on generated inputs, saying so and how to pass real ones (a
    work budget stop is returned as it is: other inputs would not make a huge loop shorter)."""
    from .limits import WorkBudgetError

    if isinstance(error, WorkBudgetError):
        return error
    return RandomInputsError(f"{error} (on random inputs: {REAL_INPUTS_HINT})")


__all__ = [
    "REAL_INPUTS_HINT",
    "InputRole",
    "RandomInputsError",
    "explain_random_failure",
    "input_role",
    "input_roles",
    "model_inputs",
]
