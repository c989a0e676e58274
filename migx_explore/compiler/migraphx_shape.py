"""Shapes as MIGraphX prints them (src/shape.cpp operator<<), every period: static
`float_type, {lens}, {strides}`, dynamic `dynamic, float_type, {dd, ...}` with the dynamic
dimension printed `[1, 4, 2]` (ROCm 5.3-5.6), `[ 1, 4, {2} ]` (5.7-7.2) or `[1..4]` (develop
2026), symbolic dims (develop 2026, kept as unknown ranges) and tuples `[shape, shape]`."""

from __future__ import annotations

import re

from . import dtypes
from .errors import MigxError
from .parser import ValueReader, atom_value, matching_bracket, split_top
from .shape import DynDim, Shape


def parse_migraphx_shape(text: str) -> Shape:
    """A shape as MIGraphX prints it: static `float_type, {lens}, {strides}`, dynamic
    `dynamic, float_type, {dd, ...}` (dd printed `[1, 4, 2]`, `[ 1, 4, {2} ]` or `[1..4]` by
    period), or a tuple `[shape, shape]`."""
    t = text.strip()
    if not t:
        raise ValueError("empty shape")
    if t.startswith("["):
        end = matching_bracket(t, 0)
        return Shape.tuple_of(_tuple_shapes(t[1:end]))
    head, _, rest = t.partition(",")
    head = head.strip()
    if head == "dynamic":
        typ, _, dims = rest.strip().partition(",")
        return Shape.dynamic(_type(typ.strip()), _dyn_dims(dims.strip()))
    if head == "tuple_type":
        inner = rest.strip()
        return Shape.tuple_of(_tuple_shapes(inner[1:-1] if inner.startswith(("[", "{")) else inner))
    typ = _type(head)
    r = ValueReader(rest)
    lens = atom_value(r.value()) if rest.strip() else ()
    strides = None
    if r.peek() == ",":
        r.i += 1
        strides = atom_value(r.value())
    if r.peek():
        raise ValueError(f"unexpected {r.s[r.i :][:20]!r}")
    if strides is None and lens:
        raise ValueError("no strides (MIGraphX prints lens and strides: a cut line?)")
    if any(not isinstance(x, int) for x in lens):  # symbolic dims (develop 2026): kept as ranges
        return Shape.dynamic(typ, [x if isinstance(x, int) else DynDim(0, 2**31 - 1) for x in lens])
    return Shape.of(typ, lens, strides if strides is not None and all(isinstance(x, int) for x in strides) else None)


# MIGraphX's fp4x2_type packs two fp4 e2m1 values in a byte, and its lens count bytes: read as
# the byte container it is (our float4e2m1 holds one value per element).
_PACKED = {"fp4x2_type": "uint8"}


def _type(name: str) -> str:
    if name in _PACKED:
        return _PACKED[name]
    try:
        return dtypes.dtype(name).name
    except (MigxError, ValueError, KeyError, TypeError):
        raise ValueError(f"unknown type {name!r}") from None


def _tuple_shapes(inner: str) -> list[Shape]:
    """Sub-shapes of a tuple: each starts at a type name."""
    parts = split_top(inner)
    subs, cur = [], []
    for p in parts:
        if (
            cur
            and (p.endswith("_type") or p == "dynamic" or p.startswith("["))
            and not (cur[0] == "dynamic" and len(cur) == 1)
        ):
            subs.append(parse_migraphx_shape(", ".join(cur)))
            cur = []
        cur.append(p)
    if cur:
        subs.append(parse_migraphx_shape(", ".join(cur)))
    return subs


def _dyn_dims(text: str) -> list[DynDim]:
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise ValueError(f"dynamic dimensions {t[:30]!r} are not in {{...}}")
    out = []
    for d in split_top(t[1:-1]):
        out.append(_dyn_dim(d))
    return out


def _dyn_dim(d: str) -> DynDim:
    d = d.strip()
    if re.fullmatch(r"-?\d+", d):
        return DynDim(int(d), int(d))
    m = re.fullmatch(r"\[\s*(\d+)\s*\.\.\s*(\d+)\s*\]", d)  # develop 2026: [1..4]
    if m:
        return DynDim(int(m.group(1)), int(m.group(2)))
    if d.startswith("[") and d.endswith("]"):
        parts = split_top(d[1:-1])
        lo, hi = int(parts[0]), int(parts[1])
        opts: tuple[int, ...] = ()
        if len(parts) > 2:
            o = parts[2].strip()
            if o.startswith("{"):  # ROCm 5.7-7.2: [ 1, 4, {2} ]
                opts = tuple(int(x) for x in split_top(o[1:-1]) if x)
            elif o not in ("0", ""):  # ROCm 5.3-5.6: [1, 4, 2] (0: no optimum)
                opts = (int(o),)
        return DynDim(lo, hi, tuple(x for x in opts if lo <= x <= hi))
    return DynDim(0, 2**31 - 1)  # a symbol expression: its range is unknown here


__all__ = ["parse_migraphx_shape"]
