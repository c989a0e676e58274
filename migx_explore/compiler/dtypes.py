"""Element types: one table maps our type names to numpy dtypes, ONNX codes and MIGraphX spellings.

bfloat16, the float8 variants (OCP e4m3fn / e5m2, the fnuz forms AMD's gfx94x use, e8m0 scales),
float4 e2m1 and int4/uint4 (int2/uint2) have no native numpy dtype; `ml_dtypes` (a dependency of
`onnx`) provides them, so the reference evaluator computes them in numpy like every other type.
ONNX packs the 4- and 2-bit types several to a byte; onnx's numpy_helper unpacks them, so in the
IR each element is one value (one byte in numpy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:  # ml_dtypes ships with onnx; keep the import optional so bare numpy still works
    import ml_dtypes
except ImportError:  # pragma: no cover - exercised only without onnx installed
    ml_dtypes = None


def _ml(name: str) -> np.dtype | None:
    return np.dtype(getattr(ml_dtypes, name)) if ml_dtypes is not None else None


_BF16 = _ml("bfloat16")
_FP8E4M3FN = _ml("float8_e4m3fn")


@dataclass(frozen=True)
class DType:
    name: str  # our canonical name, e.g. "float32"
    migraphx: str  # MIGraphX's printed name, e.g. "float_type" (the parser accepts it; we print `name`)
    np_dtype: np.dtype | None
    onnx_code: int
    size: int  # bytes per element
    is_float: bool
    is_signed: bool

    @property
    def is_integral(self) -> bool:
        return not self.is_float and self.name != "bool"

    def __str__(self) -> str:
        return self.name


def _t(name, mgx, npd, code, size, is_float, signed) -> DType:
    return DType(
        name,
        mgx,
        np.dtype(npd) if npd is not None and not isinstance(npd, np.dtype) else npd,
        code,
        size,
        is_float,
        signed,
    )


_TABLE = [
    _t("bool", "bool_type", np.bool_, 9, 1, False, False),
    _t("float16", "half_type", np.float16, 10, 2, True, True),
    _t("bfloat16", "bf16_type", _BF16, 16, 2, True, True),
    _t("float32", "float_type", np.float32, 1, 4, True, True),
    _t("float64", "double_type", np.float64, 11, 8, True, True),
    # OCP fp8 e4m3fn (ONNX FLOAT8E4M3FN): finite range +-448, no infinities; quantize_fp8's type.
    _t("float8e4m3fn", "fp8e4m3fn_type", _FP8E4M3FN, 17, 1, True, True),
    _t("uint8", "uint8_type", np.uint8, 2, 1, False, False),
    _t("int8", "int8_type", np.int8, 3, 1, False, True),
    _t("uint16", "uint16_type", np.uint16, 4, 2, False, False),
    _t("int16", "int16_type", np.int16, 5, 2, False, True),
    _t("int32", "int32_type", np.int32, 6, 4, False, True),
    _t("int64", "int64_type", np.int64, 7, 8, False, True),
    _t("uint32", "uint32_type", np.uint32, 12, 4, False, False),
    _t("uint64", "uint64_type", np.uint64, 13, 8, False, False),
    _t("float8e4m3fnuz", "fp8e4m3fnuz_type", _ml("float8_e4m3fnuz"), 18, 1, True, True),
    _t("float8e5m2", "fp8e5m2_type", _ml("float8_e5m2"), 19, 1, True, True),
    _t("float8e5m2fnuz", "fp8e5m2fnuz_type", _ml("float8_e5m2fnuz"), 20, 1, True, True),
    _t("uint4", "uint4_type", _ml("uint4"), 21, 1, False, False),
    _t("int4", "int4_type", _ml("int4"), 22, 1, False, True),
    _t("float4e2m1", "fp4e2m1_type", _ml("float4_e2m1fn"), 23, 1, True, True),
    _t("float8e8m0", "fp8e8m0fnu_type", _ml("float8_e8m0fnu"), 24, 1, True, False),
    _t("uint2", "uint2_type", _ml("uint2"), 25, 1, False, False),
    _t("int2", "int2_type", _ml("int2"), 26, 1, False, True),
]
# Types numpy cannot do arithmetic in directly (ml_dtypes): reference computes widen and round back.
LOW_PRECISION = frozenset(
    {
        "float8e4m3fn",
        "float8e4m3fnuz",
        "float8e5m2",
        "float8e5m2fnuz",
        "float4e2m1",
        "float8e8m0",
        "uint4",
        "int4",
        "uint2",
        "int2",
    }
)

BY_NAME: dict[str, DType] = {t.name: t for t in _TABLE}
BY_MIGRAPHX: dict[str, DType] = {t.migraphx: t for t in _TABLE}
BY_ONNX: dict[int, DType] = {t.onnx_code: t for t in _TABLE}
_BY_NP: dict[np.dtype, DType] = {t.np_dtype: t for t in _TABLE if t.np_dtype is not None}

ALL_NAMES = tuple(BY_NAME)
FLOAT_NAMES = tuple(t.name for t in _TABLE if t.is_float)


def dtype(name_or_np) -> DType:
    """Look a type up by our name, MIGraphX's name, a numpy dtype, or a DType."""
    if isinstance(name_or_np, DType):
        return name_or_np
    if isinstance(name_or_np, str):
        if name_or_np in BY_NAME:
            return BY_NAME[name_or_np]
        if name_or_np in BY_MIGRAPHX:
            return BY_MIGRAPHX[name_or_np]
        aliases = {
            "float": "float32",
            "half": "float16",
            "double": "float64",
            "bf16": "bfloat16",
            "fp8": "float8e4m3fn",
            "fp16": "float16",
            "fp32": "float32",
            "int": "int32",
            "long": "int64",
        }
        if name_or_np in aliases:
            return BY_NAME[aliases[name_or_np]]
        raise ValueError(f"unknown element type {name_or_np!r}; known: {', '.join(ALL_NAMES)}")
    npd = np.dtype(name_or_np)
    if npd in _BY_NP:
        return _BY_NP[npd]
    raise ValueError(f"numpy dtype {npd} has no IR element type; known: {', '.join(ALL_NAMES)}")


def np_dtype(name: str) -> np.dtype:
    t = dtype(name)
    if t.np_dtype is None:
        raise ValueError(f"element type {name} needs the ml_dtypes package (pip install ml_dtypes)")
    return t.np_dtype


def common_type(*names: str) -> str:
    """Result type when mixing element types (numpy promotion, bf16 kept as bf16 with itself)."""
    uniq = list(dict.fromkeys(names))
    if len(uniq) == 1:
        return uniq[0]
    return dtype(np.result_type(*[np_dtype(n) for n in uniq])).name


def is_float_np(npd) -> bool:
    """Is this numpy dtype a float type? True for bfloat16 and fp8 too, which ml_dtypes gives numpy
    kind 'V' (so `dtype.kind == "f"` silently treats them as integers)."""
    npd = np.dtype(npd)
    return npd.kind == "f" or (npd in _BY_NP and _BY_NP[npd].is_float)


def is_low_float(npd: np.dtype) -> bool:
    """float16, bfloat16 and fp8 arrays: the reference evaluator accumulates these in float32, as
    the GPU kernels and BLAS do (ml_dtypes types report numpy kind 'V', so kind alone misses them)."""
    npd = np.dtype(npd)
    return npd.itemsize < 4 and npd in _BY_NP and _BY_NP[npd].is_float


def finfo(name_or_np):
    """np.finfo that also knows bfloat16 and fp8 (through ml_dtypes)."""
    npd = np_dtype(dtype(name_or_np).name)
    if npd in (np.float16, np.float32, np.float64):  # some ml_dtypes types report kind 'f' too
        return np.finfo(npd)
    return ml_dtypes.finfo(npd)


def int_limits(name: str) -> tuple[int, int]:
    """(min, max) of an integer type, the ml_dtypes ones (int4, uint4, ...) included."""
    npd = np_dtype(name)
    info = ml_dtypes.iinfo(npd) if name in LOW_PRECISION else np.iinfo(npd)
    return int(info.min), int(info.max)


def float_max(name: str) -> float:
    """Largest finite value of a float type (float8 / float4 saturate to it)."""
    return float(finfo(name).max)


def narrows(src: str, dst: str) -> bool:
    """dst's finite range is smaller than src's (float32 -> float16 / bfloat16, float16 -> fp8, ...)."""
    return float_max(dst) < float_max(src)


def clamp_finite(x: np.ndarray, name: str) -> np.ndarray:
    """MIGraphX's convert to a narrower float: finite values beyond the target's range become its
    largest finite value of that sign (the float32 minimum of an HF attention mask becomes -65504
    in half, not -inf); infinities and NaN pass through."""
    m = float_max(name)
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(x), np.clip(x, -m, m), x).astype(x.dtype, copy=False)


def saturate_to(x: np.ndarray, name: str) -> np.ndarray:
    """Convert with ONNX's saturate=1 rule for float8 / float4 targets: out-of-range values and
    infinities become the largest finite value of the sign (NaN stays NaN)."""
    t = dtype(name)
    if name == "float8e8m0":
        return _to_e8m0(np.asarray(x, np.float32)).astype(t.np_dtype)
    if name in LOW_PRECISION and t.is_float:
        m = float_max(name)
        x = np.clip(x.astype(np.float32), -m, m)
    return x.astype(t.np_dtype)


def _to_e8m0(x: np.ndarray) -> np.ndarray:
    """float8 e8m0 (a power of two 2^-127 .. 2^127) with ONNX Cast's defaults: round up to the next
    power of two, saturate to the range (0 and tiny values give 2^-127); NaN and negatives are NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.ceil(np.log2(np.where(x > 0, x, np.float32(2.0**-127))))
    v = np.exp2(np.clip(e, -127, 127)).astype(np.float32)
    return np.where(np.isnan(x) | (x < 0), np.float32(np.nan), v)
