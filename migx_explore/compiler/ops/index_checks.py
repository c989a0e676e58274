"""Range checks for indices a program is fed (Gather, GatherND, ScatterElements, ScatterND, and
GatherElements through its flat gather): one shared function, so every reference kernel that
indexes with data it did not compute refuses the same way.

ONNX Runtime refuses an index outside [-n, n-1]; numpy would wrap one below -n a second time (or
index the flattened data), which gives a wrong answer with exit 0. OneHot is the exception: ONNX
defines out-of-range indices there as an all-`off` row, so its compute does not call this."""

from __future__ import annotations

import numpy as np

from ..errors import EvalError


def checked_indices(idx: np.ndarray, n: int, op: str, *, axis: int | None = None, what: str = "indices") -> np.ndarray:
    """`idx` as int64 with negative values counted from the end; raises EvalError naming the input,
    the first bad value and the allowed range when any value is outside [-n, n-1] (the evaluator
    prefixes the instruction; `op` names it when the caller is not an instruction's compute)."""
    i = np.asarray(idx)
    if i.dtype.kind not in "iu":
        raise EvalError(f"{op}: {what} must be integers, got {i.dtype}")
    i = i.astype(np.int64, copy=False)
    if i.size:
        bad = (i < -n) | (i >= n)
        if bad.any():
            first = tuple(int(v) for v in np.argwhere(bad)[0])
            along = f" on axis {axis}" if axis is not None else ""
            raise EvalError(
                f"{what}{list(first)} = {int(i[first])} is out of range [{-n}, {n - 1}]{along} "
                f"({int(bad.sum())} of {i.size} out of range; ONNX Runtime refuses these)"
            )
    return np.where(i < 0, i + n, i)


__all__ = ["checked_indices"]
