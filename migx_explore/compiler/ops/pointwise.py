"""Elementwise ops. One table row per op: name, numpy compute, and what differs from the default
(inputs of one type and identical lens; output of the input type). Broadcasting is explicit in
the IR (multibroadcast), as in MIGraphX, so every row here sees equal-shaped inputs.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import EvalError, ShapeError
from ..op import GpuCode, defop
from .common import A, pointwise_shape, same_type

# erf(x) ~ x P(x^2) / Q(x^2) on [-4, 4] (beyond, erf is 1 to float32 precision): the rational
# approximation Eigen, TensorFlow and XLA use for float32, within 2 float32 ulps of the exact value.
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)  # fmt: skip
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)  # fmt: skip


def _erf(x: np.ndarray) -> np.ndarray:
    """erf without scipy, evaluated in float64: the float32 rational above for float32 and
    narrower types, the Maclaurin series (|x| < 2) and the continued fraction of erfc (beyond)
    for float64, accurate to a few float64 ulps."""
    arr = np.asarray(x)
    if arr.dtype == np.float64 or not dtypes.is_float_np(arr.dtype):
        return _erf_float64(arr.astype(np.float64))
    t = np.clip(arr.astype(np.float64), -4.0, 4.0)
    t2 = t * t
    return (t * _horner(_ERF_P, t2) / _horner(_ERF_Q, t2)).astype(arr.dtype)


def _horner(coeffs: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    """The polynomial with `coeffs` (highest power first) at x, in place (np.polyval allocates
    a temporary per coefficient)."""
    acc = np.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        acc *= x
        acc += c
    return acc


def _erf_float64(x: np.ndarray) -> np.ndarray:
    small = np.abs(x) < 2.0
    s = np.where(small, x, 0.0)
    term, total = s.copy(), s.copy()
    for n in range(1, 40):  # erf x = 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        term *= -s * s / n
        total += term / (2 * n + 1)
    # erfc z = exp(-z^2) / sqrt(pi) / (z + (1/2) / (z + 1 / (z + (3/2) / (z + ...)))), z >= 2
    z = np.where(small, 2.0, np.abs(x))
    cf = z.copy()
    for n in range(60, 0, -1):
        cf = z + (n / 2) / cf
    tail = np.copysign(1.0 - np.exp(-z * z) / (np.sqrt(np.pi) * cf), x)
    return np.copysign(np.where(small, total * (2 / np.sqrt(np.pi)), tail), x)  # erf(-0) = -0


def _no_zero_divisor(b: np.ndarray, what: str) -> None:
    """Integer division by zero has no value: ONNX Runtime refuses it ("Integer division by zero"),
    numpy would give 0 with a warning, so it is refused rather than answered."""
    if np.any(b == 0):
        raise EvalError(f"{what}: integer division by zero (the divisor holds a 0; ONNX Runtime refuses it)")


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        _no_zero_divisor(b, "div")
        bz = np.where(b == 0, 1, b)
        q = np.abs(a) // np.abs(bz)
        return np.where((a < 0) ^ (b < 0), -q, q).astype(a.dtype)
    return np.divide(a, b)


def _pow(a, b):
    if a.dtype.kind in "iu":
        return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    return np.power(a, b)


def _recip(x):
    return np.reciprocal(x) if dtypes.is_float_np(x.dtype) else (1 // np.where(x == 0, 1, x))


def _sigmoid(x):
    # In the input's float type (float32 for narrower ones): exp(-x) overflows to inf for very
    # negative x, and 1 / inf is the 0 the function tends to.
    t = x.astype(np.float32) if dtypes.is_low_float(x.dtype) or x.dtype.kind != "f" else x
    e = np.exp(np.negative(t))  # 1 / (1 + exp(-x)), in one buffer (each step rounds as written out)
    e += 1
    return np.reciprocal(e, out=e).astype(x.dtype, copy=False)


def _mod(a, b):
    if a.dtype.kind in "iu":
        _no_zero_divisor(b, "mod")
        return np.mod(a, np.where(b == 0, 1, b))
    return np.mod(a, b)


def _fmod(a, b):
    if a.dtype.kind in "iu":
        _no_zero_divisor(b, "fmod")
        return np.fmod(a, np.where(b == 0, 1, b))
    return np.fmod(a, b)


def _bool_out(op, inputs):
    return "bool"


def _first_type(op, inputs):
    return same_type(op.name, inputs)


def _where_type(op, inputs):
    if inputs[0].type != "bool":
        raise ShapeError("where: condition must be bool")
    return same_type("where", inputs, start=1)


def _convert_type(op, inputs):
    return op["target_type"]


def elementwise(
    name: str,
    fn,
    nargs: int = 1,
    *,
    traits=(),
    attrs=(),
    out_type=_first_type,
    doc: str = "",
    gpu: GpuCode | None = None,
    replace: bool = False,
):
    """Declare an elementwise op from `fn(op, *inputs)`: equal-lens inputs, output of the first
    input's type unless `out_type(op, input_shapes)` says otherwise. Its GPU code is a row of
    gpu/codegen/expr.py unless `gpu` gives an expression, e.g. GpuCode.pointwise("mul(x, sigmoid(x))")."""

    def shape(op, inputs, mods):
        return pointwise_shape(name, inputs, out_type(op, inputs))

    def compute(op, args, out, run):
        return fn(op, *args)

    return defop(
        name,
        shape,
        compute,
        attrs=attrs,
        traits={"pointwise", *traits},
        nargs=nargs,
        doc=doc,
        gpu=gpu or GpuCode.pointwise(),
        replace=replace,
    )


def unary(name: str, f, **kw):
    """An elementwise op of one input from a numpy function `f(x)` (see `elementwise`)."""
    return elementwise(name, lambda op, x: f(x), 1, **kw)


def binary(name: str, f, **kw):
    """An elementwise op of two inputs from a numpy function `f(a, b)` (see `elementwise`)."""
    return elementwise(name, lambda op, a, b: f(a, b), 2, **kw)


# --- unary --------------------------------------------------------------------------------------
for _name, _f in {
    "abs": np.abs,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "ceil": np.ceil,
    "cos": np.cos,
    "cosh": np.cosh,
    "exp": np.exp,
    "floor": np.floor,
    "log": np.log,
    "log2": np.log2,
    "neg": np.negative,
    "nearbyint": np.rint,
    "sin": np.sin,
    "sinh": np.sinh,
    "sqrt": np.sqrt,
    "tan": np.tan,
    "tanh": np.tanh,
    "sign": np.sign,
    "erf": _erf,
    "recip": _recip,
    "sigmoid": _sigmoid,
    "rsqrt": lambda x: (1.0 / np.sqrt(x.astype(np.float64))).astype(x.dtype),
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
}.items():
    unary(_name, _f)

unary("isnan", np.isnan, out_type=_bool_out)
unary("isinf", np.isinf, out_type=_bool_out)
unary("not", lambda x: np.logical_not(x) if x.dtype == np.bool_ else (x == 0).astype(x.dtype))

elementwise(
    "leaky_relu",
    lambda op, x: np.where(x >= 0, x, x * np.asarray(op["alpha"], x.dtype)),
    1,
    attrs=[A("alpha", "float", 0.01, show=True)],
)
elementwise(
    "elu",
    lambda op, x: np.where(
        x >= 0, x, (np.asarray(op["alpha"], np.float64) * np.expm1(x.astype(np.float64))).astype(x.dtype)
    ),
    1,
    attrs=[A("alpha", "float", 1.0, show=True)],
)
elementwise(
    "convert",
    lambda op, x: _convert(x, op["target_type"], op["saturate"]),
    1,
    attrs=[
        A("target_type", "type", "float32", show=True),
        A(
            "saturate",
            "bool",
            True,
            doc="float narrowing: clamp out-of-range finite values to the "
            "target's largest finite value (MIGraphX's convert; ONNX Cast "
            "saturate=1 for float8/float4, which clamps infinities too) "
            "instead of giving inf/NaN",
        ),
    ],
    out_type=_convert_type,
    doc="Element type conversion (float to int truncates; to bool tests != 0; a "
    "narrower float clamps finite values to its range).",
)


def _convert(x: np.ndarray, t: str, saturate: bool = True) -> np.ndarray:
    target = dtypes.dtype(t)
    src = dtypes.dtype(x.dtype)
    if target.is_integral and target.name in dtypes.LOW_PRECISION:
        lo, hi = dtypes.int_limits(t)
        if src.is_float:
            # Out of range is undefined in ONNX's Cast for a float source; ONNX's own test data
            # and onnx.reference give 0 there (ml_dtypes' conversion), and so do we.
            v = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0, posinf=0.0, neginf=0.0)
            return np.where((v < lo) | (v > hi), 0, v).astype(np.int64).astype(target.np_dtype)
        # From an integer the spec says: discard the higher bits (two's complement).
        v = x.astype(np.int64)
        return ((v - lo) % (hi - lo + 1) + lo).astype(target.np_dtype)
    if target.is_integral and src.is_float:
        lo, hi = dtypes.int_limits(t)
        x = np.clip(np.nan_to_num(np.trunc(x.astype(np.float64))), lo, hi)
    elif target.name in dtypes.LOW_PRECISION and target.is_float and saturate:
        return dtypes.saturate_to(x, t)
    elif saturate and src.is_float and target.is_float and dtypes.narrows(src.name, target.name):
        x = dtypes.clamp_finite(x, t)
    if src.name in dtypes.LOW_PRECISION and target.name in dtypes.LOW_PRECISION:
        x = x.astype(np.float32)  # ml_dtypes converts between its own types through float32
    return x.astype(target.np_dtype)


# --- binary -------------------------------------------------------------------------------------
binary("add", np.add, traits={"commutative"})
binary("sub", np.subtract)
binary("mul", np.multiply, traits={"commutative"})
binary("div", _int_div)
binary("pow", _pow)
binary("max", np.maximum, traits={"commutative"})
binary("min", np.minimum, traits={"commutative"})
binary("mod", _mod)
binary("fmod", _fmod)
binary("sqdiff", lambda a, b: (a - b) * (a - b), traits={"commutative"})
binary("prelu", lambda x, s: np.where(x < 0, x * s, x))
binary("equal", np.equal, traits={"commutative"}, out_type=_bool_out)
binary("greater", np.greater, out_type=_bool_out)
binary("less", np.less, out_type=_bool_out)
binary("logical_and", np.logical_and, traits={"commutative"}, out_type=_bool_out)
binary("logical_or", np.logical_or, traits={"commutative"}, out_type=_bool_out)
binary("logical_xor", np.logical_xor, traits={"commutative"}, out_type=_bool_out)
binary("bitwise_and", np.bitwise_and, traits={"commutative"})

# --- ternary ------------------------------------------------------------------------------------
elementwise("where", lambda op, c, a, b: np.where(c, a, b), 3, out_type=_where_type)
elementwise("clip", lambda op, x, lo, hi: np.minimum(np.maximum(x, lo), hi), 3)
