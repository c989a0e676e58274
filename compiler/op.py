"""Declarative op specs.

One `OpSpec` per op name is the single place that gives its attributes (with defaults and
validation), shape rule, numpy reference compute, normalization and traits. An `Op` is an
immutable, hashable (name, attributes) value built from a spec; instructions hold Ops.

Traits used across the code base:
  pointwise          elementwise; fusible into `pointwise` submodules
  commutative        binary op whose two inputs may be swapped
  reduce             reduction over `axes`
  view               output is a view of input 0 (no data movement: reshape of standard input,
                     transpose, broadcast, slice, ...)
  side_effect        must not be removed by dead code elimination
  require_std_shape  inputs must be standard (auto_contiguous inserts `contiguous` before it)
  not_context_free   cannot be evaluated at compile time (propagate_constant skips it)
  in_place           updates its last input's buffer on the GPU (lowering makes that input the
                     output buffer; the reference compute returns the updated copy)
  builtin            @param / @literal / @return
  gpu                an op of the lowered GPU program
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import dtypes
from .errors import AttributeError_, ShapeError, UnknownOpError
from .shape import DynDim, Shape

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Module

ATTR_KINDS = ("int", "float", "bool", "str", "ints", "floats", "shape", "type", "any")


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: str
    default: Any = None
    choices: tuple | None = None
    # Always printed, even when equal to the default (MIGraphX prints e.g. conv padding/stride).
    show: bool = False
    doc: str = ""

    def __post_init__(self):
        if self.kind not in ATTR_KINDS:
            raise ValueError(f"attribute {self.name}: unknown kind {self.kind!r}")

    def coerce(self, value: Any, op_name: str) -> Any:
        """Convert a user/parsed value to the canonical Python type for this kind."""
        try:
            v = _coerce(self.kind, value)
        except (TypeError, ValueError) as e:
            raise AttributeError_(
                f"{op_name}: attribute {self.name}={value!r} is not a valid {self.kind} ({e})") from None
        if self.choices is not None and v not in self.choices:
            raise AttributeError_(
                f"{op_name}: attribute {self.name}={v!r} must be one of {', '.join(map(repr, self.choices))}")
        return v


def _coerce(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "int":
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        if isinstance(value, float) and not value.is_integer():
            raise ValueError("not an integer")
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "bool":
        if isinstance(value, str):
            if value in ("true", "1"):
                return True
            if value in ("false", "0"):
                return False
            raise ValueError("not a bool")
        return bool(value)
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError("not a string")
        return value
    if kind == "ints":
        if isinstance(value, (int, np.integer)):
            return (int(value),)
        return tuple(_coerce("int", v) for v in value)
    if kind == "floats":
        if isinstance(value, (int, float, np.number)):
            return (float(value),)
        return tuple(float(v) for v in value)
    if kind == "shape":
        if not isinstance(value, Shape):
            raise ValueError("not a Shape")
        return value
    if kind == "type":
        return dtypes.dtype(value).name
    return _freeze(value)


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


ShapeFn = Callable[["Op", list[Shape], list["Module"]], Shape]
# compute(op, args, out_shape, run_module) -> ndarray.  run_module(module, args) -> list[ndarray]
ComputeFn = Callable[["Op", list[np.ndarray], Shape, Any], Any]
NormalizeFn = Callable[["Op", list[Shape]], "Op"]


@dataclass(frozen=True)
class OpSpec:
    name: str
    shape: ShapeFn
    compute: ComputeFn | None = None
    attrs: tuple[AttrSpec, ...] = ()
    traits: frozenset[str] = frozenset()
    normalize: NormalizeFn | None = None
    # Index of the input whose memory the output aliases (views, ops writing into an allocation).
    output_alias: Callable[[Op, list[Shape]], int] | None = None
    nargs: int | tuple[int, int] | None = None  # exact count, or (min, max); max -1 = unbounded
    doc: str = ""
    attr_index: Mapping[str, AttrSpec] = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "traits", frozenset(self.traits))
        object.__setattr__(self, "attr_index", {a.name: a for a in self.attrs})

    def has(self, trait: str) -> bool:
        return trait in self.traits


_REGISTRY: dict[str, OpSpec] = {}
# Op families defined outside the compiler package, imported on first lookup of a name with
# that prefix so the compiler never imports them eagerly (keeps the GPU layer optional).
_LAZY_PROVIDERS = {"gpu::": "migx_explore.gpu.ops", "hip::": "migx_explore.gpu.ops"}


def register(spec: OpSpec, *, replace: bool = False) -> OpSpec:
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"op {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def defop(name: str, shape: ShapeFn, compute: ComputeFn | None = None, *,
          attrs: Sequence[AttrSpec] = (), traits: Iterable[str] = (), normalize: NormalizeFn | None = None,
          output_alias=None, nargs=None, doc: str = "") -> OpSpec:
    """Declare and register an op spec in one call."""
    return register(OpSpec(name, shape, compute, tuple(attrs), frozenset(traits), normalize, output_alias,
                           nargs, doc))


def get_spec(name: str) -> OpSpec:
    spec = _REGISTRY.get(name)
    if spec is None:
        for prefix, module in _LAZY_PROVIDERS.items():
            if name.startswith(prefix):
                try:
                    importlib.import_module(module)
                except ImportError:
                    break
                spec = _REGISTRY.get(name)
                break
    if spec is None:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownOpError(f"unknown op {name!r}{hint}")
    return spec


def registered_ops() -> list[str]:
    return sorted(_REGISTRY)


class Op:
    """An immutable op value: name plus fully-defaulted, validated attributes."""

    __slots__ = ("name", "_attrs", "_hash", "spec")

    def __init__(self, name: str, attrs: Mapping[str, Any] | None = None, /, **kw: Any):
        spec = get_spec(name)
        given = dict(attrs or {}, **kw)
        unknown = [k for k in given if k not in spec.attr_index]
        if unknown:
            valid = ", ".join(spec.attr_index) or "none"
            raise AttributeError_(f"{name}: unknown attribute(s) {', '.join(unknown)}; valid: {valid}")
        values = []
        for a in spec.attrs:
            v = given.get(a.name, a.default)
            values.append((a.name, a.coerce(v, name) if a.name in given else _coerce(a.kind, v)))
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "_attrs", tuple(values))
        object.__setattr__(self, "_hash", hash((name, _hashable(self._attrs))))

    def __setattr__(self, key, value):
        raise TypeError("Op is immutable; use op.with_(...)")

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._attrs)

    def __getitem__(self, key: str) -> Any:
        for k, v in self._attrs:
            if k == key:
                return v
        raise KeyError(f"{self.name} has no attribute {key!r}")

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self._attrs:
            if k == key:
                return v
        return default

    def with_(self, **kw: Any) -> Op:
        return Op(self.name, {**self.attrs, **kw})

    def has(self, trait: str) -> bool:
        return trait in self.spec.traits

    def non_default_attrs(self) -> list[tuple[str, Any]]:
        out = []
        for (k, v), a in zip(self._attrs, self.spec.attrs):
            if a.show or not _attr_equal(v, _coerce(a.kind, a.default)):
                out.append((k, v))
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Op) and self.name == other.name and _attrs_equal(self._attrs, other._attrs)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        from .printer import format_op

        return f"Op({format_op(self)})"

    def __reduce__(self):  # copy/deepcopy support without exposing pickle-based saving
        return (Op, (self.name, self.attrs))


def _hashable(v):
    if isinstance(v, tuple):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def _attr_equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_attr_equal(x, y) for x, y in zip(a, b))
    return a == b


def _attrs_equal(a, b) -> bool:
    return len(a) == len(b) and all(k1 == k2 and _attr_equal(v1, v2) for (k1, v1), (k2, v2) in zip(a, b))


def make_op(name: str, /, **attrs: Any) -> Op:
    return Op(name, attrs)


def compute_shape(op: Op, inputs: list[Shape], mods: Sequence[Module] = ()) -> Shape:
    """Run an op's shape rule with argument-count checking and a uniform error message."""
    spec = op.spec
    n = spec.nargs
    if n is not None:
        lo, hi = (n, n) if isinstance(n, int) else n
        if len(inputs) < lo or (hi >= 0 and len(inputs) > hi):
            want = str(lo) if lo == hi else f"{lo}..{'' if hi < 0 else hi}"
            raise ShapeError(f"{op.name}: expects {want} inputs, got {len(inputs)}")
    try:
        if op.name not in NATIVE_DYNAMIC_OPS and any(s.dynamic_shape for s in inputs):
            return _lifted_dynamic_shape(spec, op, list(inputs), list(mods))
        return spec.shape(op, list(inputs), list(mods))
    except ShapeError:
        raise
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as e:
        ins = "; ".join(str(s) for s in inputs)
        raise ShapeError(f"{op.name}: cannot compute output shape from inputs [{ins}]: {e}") from None


# Ops whose shape rules read dynamic dims themselves; every other op's static rule is lifted.
NATIVE_DYNAMIC_OPS = frozenset({"select_module", "multibroadcast", "range", "dimensions_of", "@return"})


def _at_end(s: Shape, end: str) -> Shape:
    """A dynamic shape at the low or high end of its ranges (static shapes are returned as they are)."""
    if not s.dynamic_shape:
        return s
    lens = [d.min if end == "min" else d.max for d in s.dyn_dims]
    return Shape(s.type, s.lens, s.strides) if end == "max" else s.with_lens(lens)


def _lifted_dynamic_shape(spec: OpSpec, op: Op, inputs: list[Shape], mods: list) -> Shape:
    """A static shape rule applied to dynamic inputs: run it with every dynamic dim at its minimum
    and at its maximum (the single-dynamic-dimension case split_single_dyn_dim handles: all of
    them move together), and make each output axis that differs a [min..max] range."""
    lo = spec.shape(op, [_at_end(s, "min") for s in inputs], mods)
    hi = spec.shape(op, [_at_end(s, "max") for s in inputs], mods)
    if lo.is_tuple or hi.is_tuple or lo.ndim != hi.ndim:
        raise ShapeError(f"{op.name}: has no shape rule for dynamic inputs")
    if lo.lens == hi.lens:
        return hi
    # Dynamic shapes carry no layout (they print without strides and never reach the GPU).
    return Shape.dynamic(hi.type, [DynDim(min(a, b), max(a, b)) for a, b in zip(lo.lens, hi.lens)])
