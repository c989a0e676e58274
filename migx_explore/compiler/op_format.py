"""Text of attribute values and ops, shared by the printer and Op.__repr__ (compiler/op.py keeps
the op registry; this is only how its values print)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .shape import Shape


def format_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, Shape):
        return "{" + str(v) + "}"
    if isinstance(v, tuple):
        return "{" + ", ".join(format_value(x) for x in v) + "}"
    if v is None:
        return "none"
    s = str(v)
    if (
        s
        and all(c.isalnum() or c in "_:.-" for c in s)
        and s not in ("true", "false", "none", "inf", "nan")
        and not _looks_numeric(s)
    ):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _looks_numeric(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def format_float(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    r = repr(float(v))
    return r[:-2] if r.endswith(".0") else r


def format_op(op: Any) -> str:
    """An op as the printer writes it: `name[attr=value,...]` with non-default attributes only."""
    printed = getattr(op, "printed", None)  # an op read from MIGraphX text prints as MIGraphX wrote it
    if printed is not None:
        return printed
    attrs = op.non_default_attrs()
    if not attrs:
        return op.name
    return op.name + "[" + ",".join(f"{k}={format_value(v)}" for k, v in attrs) + "]"
