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
Any other trait name is an error at registration (TRAITS is the declared set).

Adding an op is one checked contract (tests/test_op_contract.py lists every op that breaks it):
a shape rule, a reference compute, traits from TRAITS, and its GPU code, one of
  GpuCode.pointwise("mul(x, sigmoid(x))")  elementwise, written over existing ops (or no text:
                                           the gpu layer has a row for the op's own name)
  GpuCode.kernel("reduce")                 a generator the gpu layer registers for that family
  GpuCode.host("why")                      runs on the host (numpy), with the reason shown
  GpuCode.none("why")                      moves no data (views, builtins, allocation)
and how its instructions enter a program: an ONNX handler in compiler/onnx that emits it, or
`made_by=` the registered pass that creates it ("ir": only from IR text or the Python API).
docs/adding_an_op.md is the checklist; gpu/op_paths.py shows where each piece of an op lives.
Registering the same spec again is a no-op (a re-run notebook cell); a different spec under a
taken name is an error naming both definitions.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import types
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtypes
from .errors import AttributeError_, ShapeError, UnknownOpError
from .op_format import format_float, format_op, format_value  # noqa: F401  (format_float: re-exported)
from .shape import DynDim, Shape

ATTR_KINDS = ("int", "float", "bool", "str", "ints", "floats", "shape", "type", "any")
TRAITS = frozenset(
    {
        "pointwise",
        "commutative",
        "reduce",
        "view",
        "side_effect",
        "require_std_shape",
        "not_context_free",
        "in_place",
        "builtin",
        "gpu",
    }
)
GPU_CODE_KINDS = ("pointwise", "kernel", "host", "none")


@dataclass(frozen=True)
class GpuCode:
    """How an op runs on the GPU target (see the module docstring). `detail` is the pointwise
    expression, the kernel family, or the reason, by kind."""

    kind: str
    detail: str = ""

    def __post_init__(self):
        if self.kind not in GPU_CODE_KINDS:
            raise ValueError(f"GpuCode kind {self.kind!r}: must be one of {', '.join(GPU_CODE_KINDS)}")
        if self.kind in ("kernel", "host", "none") and not self.detail.strip():
            what = "a family name" if self.kind == "kernel" else "a reason"
            raise ValueError(f"GpuCode.{self.kind} needs {what}")
        if self.kind == "pointwise" and self.detail:
            parse_expression(self.detail)  # a typo fails here, at the defop

    @classmethod
    def pointwise(cls, expression: str = "") -> GpuCode:
        return cls("pointwise", expression)

    @classmethod
    def kernel(cls, family: str) -> GpuCode:
        return cls("kernel", family)

    @classmethod
    def host(cls, reason: str) -> GpuCode:
        return cls("host", reason)

    @classmethod
    def none(cls, reason: str) -> GpuCode:
        return cls("none", reason)

    def __str__(self) -> str:
        return f"{self.kind}({self.detail!r})" if self.detail else self.kind


# A pointwise expression: op calls over the inputs x, y, z (or x0, x1, ...) and numbers.
Expr = Any  # str (an input name), float (a constant), or tuple (op name, *args)


def parse_expression(text: str) -> Expr:
    """`mul(x, sigmoid(x))` -> ("mul", "x", ("sigmoid", "x")). Op names are checked when used."""
    toks = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[(),]|\S", text)
    pos = 0

    def fail(why: str):
        raise ValueError(f"pointwise expression {text!r}: {why}")

    def term() -> Expr:
        nonlocal pos
        if pos >= len(toks):
            fail("ends early")
        t = toks[pos]
        pos += 1
        if t[0].isdigit() or t[0] == "-":
            return float(t)
        if not (t[0].isalpha() or t[0] == "_"):
            fail(f"unexpected {t!r}")
        if pos < len(toks) and toks[pos] == "(":
            pos += 1
            args = [term()]
            while pos < len(toks) and toks[pos] == ",":
                pos += 1
                args.append(term())
            if pos >= len(toks) or toks[pos] != ")":
                fail(f"missing ')' after the arguments of {t}")
            pos += 1
            return (t, *args)
        if t not in INPUT_NAMES:
            fail(f"unknown input {t!r} (inputs are {', '.join(INPUT_NAMES[:3])} or x0, x1, ...)")
        return t

    tree = term()
    if pos != len(toks):
        fail(f"unexpected {toks[pos]!r} after the expression")
    return tree


INPUT_NAMES = ("x", "y", "z") + tuple(f"x{i}" for i in range(10))


def input_index(name: str) -> int:
    return "xyz".index(name) if len(name) == 1 else int(name[1:])


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
                f"{op_name}: attribute {self.name}={value!r} is not a valid {self.kind} ({e})"
            ) from None
        if self.choices is not None and v not in self.choices:
            raise AttributeError_(
                f"{op_name}: attribute {self.name}={v!r} must be one of {', '.join(map(repr, self.choices))}"
            )
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


# A submodule an op takes (an ir.Module: a loop body, a fused pointwise body). op.py sits below ir
# (ir builds its instructions from ops), so it names no IR class; shape functions use the Module API.
Submodule = Any
ShapeFn = Callable[["Op", list[Shape], list[Submodule]], Shape]
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
    gpu: GpuCode | None = None  # how it runs on the GPU target; None: not declared (a contract failure)
    # For an op no ONNX handler emits: the registered pass that creates its instructions, or "ir"
    # (only IR text and the Python API make it). gpu/op_paths.py checks it.
    made_by: str = ""
    origin: str = field(default="", compare=False)  # where it was defined, "file:line"
    attr_index: Mapping[str, AttrSpec] = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "traits", frozenset(self.traits))
        object.__setattr__(self, "attr_index", {a.name: a for a in self.attrs})
        unknown = sorted(self.traits - TRAITS)
        if unknown:
            raise ValueError(
                f"op {self.name}: unknown trait(s) {', '.join(unknown)}; declared traits: {', '.join(sorted(TRAITS))}"
            )
        if self.gpu is None and (self.traits & {"builtin", "view"} or "::" in self.name):
            why = "a target op; its executor runs it" if "::" in self.name else "moves no data"
            object.__setattr__(self, "gpu", GpuCode.none(why))

    def has(self, trait: str) -> bool:
        return trait in self.traits


_REGISTRY: dict[str, OpSpec] = {}
# Op namespaces ("gpu::") a target package registers, so an unknown name in one says which
# package to import (the compiler never imports a target itself).
_NAMESPACES: dict[str, str] = {}


def register_namespace(prefix: str, owner: str) -> None:
    _NAMESPACES[prefix] = owner


def register(spec: OpSpec, *, replace: bool = False) -> OpSpec:
    """Add `spec` to the registry. The same spec again is a no-op (re-running a notebook cell);
    a different spec under a taken name is an error naming both definitions, unless `replace`."""
    old = _REGISTRY.get(spec.name)
    if old is not None and not replace:
        differs = spec_differences(old, spec)
        if not differs:
            return old
        raise ValueError(
            f"op {spec.name!r} is already registered (at {old.origin or 'unknown'}); this definition "
            f"(at {spec.origin or 'unknown'}) differs in {', '.join(differs)}. Use another name, or "
            f"defop(..., replace=True) to replace it"
        )
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> OpSpec | None:
    """Remove an op (a notebook experiment, a test); returns its spec."""
    return _REGISTRY.pop(name, None)


def defop(
    name: str,
    shape: ShapeFn,
    compute: ComputeFn | None = None,
    *,
    attrs: Sequence[AttrSpec] = (),
    traits: Iterable[str] = (),
    normalize: NormalizeFn | None = None,
    output_alias=None,
    nargs=None,
    doc: str = "",
    gpu: GpuCode | None = None,
    made_by: str = "",
    replace: bool = False,
) -> OpSpec:
    """Declare and register an op spec in one call (see the module docstring for the contract)."""
    spec = register(
        OpSpec(
            name,
            shape,
            compute,
            tuple(attrs),
            frozenset(traits),
            normalize,
            output_alias,
            nargs,
            doc,
            gpu,
            made_by,
            origin=_caller(),
        ),
        replace=replace,
    )
    if spec.gpu is None:  # said now, not after every pass has run: the GPU target will run it on the host
        warnings.warn(
            f"op {name} declares no GPU code (gpu=GpuCode.pointwise/kernel/host); the GPU target runs "
            f"it on the host, and tests/test_op_contract.py fails until it declares one",
            stacklevel=2,
        )
    return spec


def _caller() -> str:
    """Where the op was defined: the outermost frame, in the first file outside this one and the
    op-library helpers (elementwise, unary, ...), that led to the defop: the table line of a loop,
    the notebook cell, the test."""
    helpers = os.path.join(os.path.dirname(__file__), "ops") + os.sep
    frame = sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename == __file__
        or (frame.f_code.co_filename.startswith(helpers) and frame.f_code.co_name != "<module>")
    ):
        frame = frame.f_back
    if frame is None:
        return ""
    where = frame
    while frame is not None and frame.f_code.co_filename == where.f_code.co_filename:
        where, frame = frame, frame.f_back
    return f"{where.f_code.co_filename}:{where.f_lineno}"


def spec_differences(a: OpSpec, b: OpSpec) -> list[str]:
    """Which parts of two specs differ; functions compare by their code, constants and closures."""
    out = [f for f in ("attrs", "traits", "nargs", "doc", "gpu", "made_by") if getattr(a, f) != getattr(b, f)]
    for f in ("shape", "compute", "normalize", "output_alias"):
        if function_fingerprint(getattr(a, f)) != function_fingerprint(getattr(b, f)):
            out.append(f if f != "shape" else "shape rule")
    return out


def function_fingerprint(fn: Any, depth: int = 0) -> Any:
    """What makes two functions the same definition: name, code, constants, closure contents (a
    re-run notebook cell gives equal fingerprints; an edited body does not)."""
    code = getattr(fn, "__code__", None)
    if code is None or depth > 3:
        return fn if fn is None or depth > 3 else repr(fn)
    cells = []
    for c in fn.__closure__ or ():
        try:
            v = c.cell_contents
        except ValueError:  # an empty cell
            v = None
        cells.append(function_fingerprint(v, depth + 1) if callable(v) else repr(v))
    return fn.__qualname__, _code_fingerprint(code), tuple(cells)


def _code_fingerprint(code: types.CodeType) -> tuple:
    consts = tuple(_code_fingerprint(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    return code.co_code, consts, code.co_names


def get_spec(name: str) -> OpSpec:
    spec = _REGISTRY.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        prefix = name.split("::")[0] + "::" if "::" in name else None
        if prefix is not None and prefix not in _NAMESPACES:
            hint += f" ({prefix} ops are registered by their target package; import it first)"
        raise UnknownOpError(f"unknown op {name!r}{hint}")
    return spec


def contract_problems(spec: OpSpec) -> list[str]:
    """What the target-independent half of the op contract misses (the gpu layer checks the GPU
    code against what it implements)."""
    out = []
    if not callable(spec.shape):
        out.append("no shape rule: give defop a shape function (op, input shapes, modules) -> Shape")
    if spec.compute is None and not spec.has("builtin"):
        out.append("no reference compute: give defop a compute function (op, args, out_shape, run) -> ndarray")
    if spec.gpu is None:
        out.append(
            "no GPU code: add gpu=GpuCode.pointwise('<expression over existing ops>'), "
            "GpuCode.kernel('<family>') or GpuCode.host('<reason>') to its defop"
        )
    elif spec.gpu.kind == "none" and not (
        spec.traits & {"builtin", "view"} or "::" in spec.name or spec.name in STRUCTURAL_OPS
    ):
        out.append(f"GpuCode.none is only for ops that move no data (views, builtins, {', '.join(STRUCTURAL_OPS)})")
    elif spec.gpu.kind == "pointwise" and not spec.has("pointwise"):
        out.append("GpuCode.pointwise on an op without the 'pointwise' trait")
    return out


# Ops the lowering handles without a kernel: buffers and tuple access.
STRUCTURAL_OPS = ("allocate", "load", "get_tuple_elem")


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


def compute_shape(op: Op, inputs: list[Shape], mods: Sequence[Submodule] = ()) -> Shape:
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
# The GPU wrappers pass their inputs on to the wrapped op's compute_shape, which lifts when that
# op needs it: lifting the wrapper too would show a natively dynamic op (a lowered select_module)
# only the range's ends, as static shapes its submodules cannot take.
NATIVE_DYNAMIC_OPS = frozenset(
    {
        "select_module",
        "multibroadcast",
        "range",
        "dimensions_of",
        "reshape_with_dims",
        "broadcast_with_dims",
        "fill_with_dims",
        "slice_with_bounds",
        "broadcast_for_dot",
        "@return",
        "gpu::precompile_op",
        "gpu::code_object",
        "gpu::host_op",
    }
)


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
