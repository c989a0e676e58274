"""Is a computed value close enough to its reference? The one check every numeric comparison uses
(the pass manager's per-pass column, `verify`, numeric bisect, GPU bisect).

Default: MIGraphX's `verify_rms_range` (src/include/migraphx/verify.hpp). For one output,

    rms = sqrt(sum((actual - expected)^2)) / (sqrt(n) * max(max|actual|, max|expected|))

the RMS of the error relative to the largest magnitude of either range, and it passes when
`rms <= threshold`. MIGraphX's threshold is `epsilon(element type) * 80`; its driver loosens it
to 8e-2 for programs holding fp16/bf16 values. Here the element type is the *compute* type: the
lowest-precision float type anywhere in the checked program (a float32 model quantized to fp16
keeps float32 outputs but computes in fp16), or int8 when quantize ops appear. Integer and bool
outputs must match exactly (epsilon 0), as in MIGraphX.

Because the error is measured against the range of the whole tensor, reassociating a float32
sum (GEMMs, folded batch norms) on a tensor whose values reach ~700 passes, while a dropped
bias, a wrong axis or a sign flip does not.

`--rtol/--atol` select numpy's allclose instead (|a - b| <= atol + rtol |b| per element).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtypes
from .snapshot import rebuilt_record

RMS_FACTOR = 80  # MIGraphX's get_rms_tol default

# Thresholds where epsilon * 80 is not the right figure. bf16: 80 eps = 0.625 would pass almost
# anything; MIGraphX's driver uses 8e-2 for every 16-bit program. fp8 and int8: quantization
# error, not rounding, dominates (our choice; MIGraphX's driver has no entry for them).
_THRESHOLD_OVERRIDE = {"bfloat16": 8e-2, "int8": 1e-1}
_FP8_THRESHOLD = 2e-1

# Lowest precision first (fp8 variants come before all of these).
_PRECISION_ORDER = ("int8", "bfloat16", "float16", "float32", "float64")
_QUANT_OPS = frozenset({"quantizelinear", "dequantizelinear", "quant_dot", "quant_convolution"})


def _is_fp8(type_name: str) -> bool:
    return "fp8" in type_name or "float8" in type_name


def _known(type_name: str) -> dtypes.DType | None:
    try:
        return dtypes.dtype(type_name)
    except ValueError:
        return None  # a type this build's table does not know yet (fp8 variants)


def type_epsilon(type_name: str) -> float:
    """Machine epsilon of an element type (0 for integer and bool types: they must match exactly)."""
    t = _known(type_name)
    if t is not None and not t.is_float:
        return 0.0
    npd = t.np_dtype if t is not None else type_name
    try:
        import ml_dtypes

        return float(ml_dtypes.finfo(npd).eps)
    except (ImportError, TypeError, ValueError):
        return float(np.finfo(npd).eps)


def rms_threshold(type_name: str, factor: float = RMS_FACTOR) -> float:
    """Default RMS threshold for values computed in `type_name`."""
    if _is_fp8(type_name):
        return _FP8_THRESHOLD
    if type_name in _THRESHOLD_OVERRIDE:
        return _THRESHOLD_OVERRIDE[type_name]
    return type_epsilon(type_name) * factor


def compute_type(type_names: Iterable[str], op_names: Iterable[str] = ()) -> str:
    """The lowest-precision float type among `type_names`; int8 only when a quantize op is present
    (int8/uint8 data alone, such as images or indices, is not int8 compute)."""
    present = set(type_names)
    fp8 = sorted(t for t in present if _is_fp8(t))
    if fp8:
        return fp8[0]
    if any(o in _QUANT_OPS for o in op_names):
        return "int8"
    return next((t for t in _PRECISION_ORDER[1:] if t in present), "float32")


def program_compute_type(program: Any) -> str:
    """compute_type over every instruction of a Program or ProgramSnapshot (all modules).

    A value quantized to 8 bits (a float input, an int8 / uint8 result) marks int8 compute
    whatever the op is called, so the precision stays int8 after lowering renames
    quantizelinear to a GPU kernel (the threshold must follow the precision the values were
    computed in, not the pass position)."""
    types: set[str] = set()
    ops: set[str] = set()
    modules = program.modules.values() if isinstance(program.modules, dict) else program.modules
    for m in modules:
        t, o = _module_types(m)
        types |= t
        ops |= o
    return compute_type(types, ops)


def _module_types(m: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The value types and op names of one module (a Module or a ModuleSnapshot). A snapshot's are
    kept with it: the per-pass check asks after every pass, and a pass changes few modules."""
    src = m if hasattr(m, "instrs") else rebuilt_record(m)
    if src is not None and "_compute_types" in src.__dict__:
        return src.__dict__["_compute_types"]
    types: set[str] = set()
    ops: set[str] = set()
    by_id = None
    for ins in src.instrs if src is not None else m:
        ops.add(ins.op.name)
        s = ins.shape
        for sub in s.sub_shapes if s.is_tuple else (s,):
            types.add(sub.type)
        if s.type in _EIGHT_BIT:
            if by_id is None:
                by_id = {r.id: r for r in src.instrs} if src is not None else {}
            if _quantizes(ins, by_id):
                ops.add("quantizelinear")
    out = (frozenset(types), frozenset(ops))
    if src is not None:
        src.__dict__["_compute_types"] = out  # a frozen dataclass: its cache slot, as cached_property's
    return out


_EIGHT_BIT = frozenset({"int8", "uint8"})


def _quantizes(ins: Any, by_id: dict) -> bool:
    """An instruction (IR, or a snapshot record whose inputs are ids) that makes an 8-bit value
    out of a float one."""
    for i in ins.inputs:
        rec = by_id.get(i) if isinstance(i, int) else i
        t = _known(rec.shape.type) if rec is not None and not rec.shape.is_tuple else None
        if t is not None and t.is_float:
            return True
    return False


@dataclass(frozen=True)
class Tolerance:
    """How close is close enough. Default: relative RMS (MIGraphX) with a per-type threshold;
    `rms` fixes the threshold; `rtol`/`atol` (either set) switch to elementwise allclose."""

    rms: float | None = None
    rtol: float | None = None
    atol: float | None = None
    factor: float = RMS_FACTOR

    def __post_init__(self) -> None:
        # a NaN threshold passes nothing and fails nothing (every comparison is False), inf passes
        # everything, a negative one fails everything: none of them is a check
        from .errors import MigxError

        for key, flag in (("rms", "--rms-tol"), ("rtol", "--rtol"), ("atol", "--atol"), ("factor", "factor")):
            v = getattr(self, key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise MigxError(f"tolerance {flag} takes a finite number >= 0, not {v!r}")

    @property
    def allclose(self) -> bool:
        return self.rtol is not None or self.atol is not None

    def threshold(self, compute: str, value_type: str) -> float:
        if self.rms is not None:
            return self.rms
        t = _known(value_type)
        if t is not None and not t.is_float:
            return 0.0  # integer / bool values: exact, whatever the compute type
        return rms_threshold(compute, self.factor)

    def describe(self, compute: str = "float32") -> str:
        if self.allclose:
            return f"allclose rtol {self.rtol or 0:g}, atol {self.atol or 0:g}"
        thr = self.threshold(compute, "float32")
        how = "fixed" if self.rms is not None else f"{compute}"
        return f"relative RMS <= {thr:.3g} ({how})"


@dataclass(frozen=True)
class ValueCheck:
    """One output (or intermediate value) against its reference."""

    ok: bool
    rms: float  # relative RMS error (MIGraphX's rms_range); inf on a shape mismatch
    threshold: float  # rms threshold, or nan in allclose mode
    max_abs: float
    max_rel: float
    note: str = ""

    def describe(self) -> str:
        if self.note:
            return self.note
        if math.isnan(self.threshold):
            return f"max|err| {self.max_abs:.3e}, max rel {self.max_rel:.3e}"
        return f"rms {self.rms:.3e} (threshold {self.threshold:.3e}), max|err| {self.max_abs:.3e}"


def _np_type_name(npd: np.dtype) -> str:
    try:
        return dtypes.dtype(npd).name
    except ValueError:
        return str(npd)


def rms_range(actual: np.ndarray, expected: np.ndarray) -> float:
    """MIGraphX's verify::rms_range, with NaN/inf that agree on both sides counted as equal and a
    non-finite value on one side only counted as an infinite error."""
    a = np.asarray(actual, np.float64).reshape(-1)
    b = np.asarray(expected, np.float64).reshape(-1)
    if a.size != b.size:
        return math.inf
    return _rms64(a, b, (a == b) | (np.isnan(a) & np.isnan(b)))


def _rms64(a: np.ndarray, b: np.ndarray, same: np.ndarray) -> float:
    """rms_range of flat float64 arrays of one size, `same` where they agree (NaN with NaN)."""
    if a.size == 0:
        return 0.0
    finite = np.isfinite(a) & np.isfinite(b)
    if np.any(~same & ~finite):
        return math.inf
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, a - b)
    mag = max(
        float(np.max(np.abs(np.where(finite, a, 0.0)))),
        float(np.max(np.abs(np.where(finite, b, 0.0)))),
        np.finfo(np.float64).tiny,
    )
    return float(np.sqrt(np.sum(diff * diff)) / (math.sqrt(a.size) * mag))


def _errors(a: np.ndarray, b: np.ndarray, atol: float) -> tuple[np.ndarray, float, float, float]:
    """Elementwise absolute errors, their max, the max relative error and rms_range, from one
    float64 conversion of each side (check_value's figures, each computed as on its own)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if a.size and _finite_narrow(a) and _finite_narrow(b):
        return _errors_finite(a64, b64, atol)
    same = (np.isnan(a64) & np.isnan(b64)) | (a64 == b64)
    with np.errstate(all="ignore"):
        err = np.nan_to_num(np.where(same, 0.0, np.abs(a64 - b64)), nan=np.inf)
        rel = np.nan_to_num(err / (np.abs(b64) + max(atol, 1e-30)), nan=np.inf)
    rms = _rms64(a64.reshape(-1), b64.reshape(-1), same.reshape(-1))
    return err, float(err.max(initial=0.0)), float(rel.max(initial=0.0)), rms


def _finite_narrow(x: np.ndarray) -> bool:
    """Integers or finite floats of at most 32 bits: float64 differences of such values are
    exact enough never to overflow, and no NaN or inf needs the masks of the general scan."""
    k = x.dtype.kind
    if k in "iub":
        return True
    return k == "f" and x.dtype.itemsize <= 4 and bool(np.isfinite(x).all())


def _errors_finite(a64: np.ndarray, b64: np.ndarray, atol: float) -> tuple[np.ndarray, float, float, float]:
    """_errors where both sides are finite and narrow (_finite_narrow), in a third of the passes
    over the data and with the very same figures: where a == b, a - b is +0.0, the value the
    general scan's mask writes; no difference overflows, so its nan_to_num calls change nothing;
    and rms sums the same squares in the same (logical, flat) order."""
    d = a64 - b64
    err = np.abs(d)
    babs = np.abs(b64)
    rel = err / (babs + max(atol, 1e-30))
    flat = d.reshape(-1)
    mag = max(float(np.max(np.abs(a64))), float(np.max(babs)), np.finfo(np.float64).tiny)
    rms = float(np.sqrt(np.sum(flat * flat)) / (math.sqrt(flat.size) * mag))
    return err, float(err.max(initial=0.0)), float(rel.max(initial=0.0)), rms


def check_value(actual: Any, expected: Any, tol: Tolerance = Tolerance(), *, compute: str = "float32") -> ValueCheck:
    """Compare one value with its reference under `tol` (see the module docstring)."""
    a, b = np.asarray(actual), np.asarray(expected)
    value_type = "float32" if b.dtype.kind in "fcV" else _np_type_name(b.dtype)
    if a is b and b.dtype.kind in "fciub":
        # The reference's own array (a pass that left an output alone): what the scan below finds,
        # without converting both sides to float64 (a NaN's relative error reads as inf there).
        nan = b.dtype.kind in "fc" and bool(np.isnan(b).any())
        thr = math.nan if tol.allclose else tol.threshold(compute, value_type)
        return ValueCheck(True, 0.0, thr, 0.0, math.inf if nan else 0.0)
    if a.shape != b.shape:
        if a.size != b.size:
            return ValueCheck(False, math.inf, math.nan, math.inf, math.inf, f"shape {a.shape} != {b.shape}")
        a = a.reshape(b.shape)
    err, max_abs, max_rel, rms = _errors(a, b, tol.atol or 0.0)
    if tol.allclose:
        rtol, atol = tol.rtol or 0.0, tol.atol or 0.0
        ok = bool(np.all(err <= atol + rtol * np.abs(np.nan_to_num(b.astype(np.float64)))))
        return ValueCheck(ok, rms, math.nan, max_abs, max_rel)
    thr = tol.threshold(compute, value_type)
    return ValueCheck(rms <= thr, rms, thr, max_abs, max_rel)


@dataclass
class OutputsCheck:
    """All outputs of a program against the reference outputs."""

    ok: bool
    outputs: list[ValueCheck] = field(default_factory=list)
    note: str = ""

    @property
    def worst(self) -> int:
        """Index of the output furthest over (or nearest to) its threshold."""

        def ratio(c: ValueCheck) -> float:
            if math.isnan(c.threshold):
                return c.max_rel
            return c.rms / c.threshold if c.threshold > 0 else (math.inf if c.rms > 0 else 0.0)

        return max(range(len(self.outputs)), key=lambda k: ratio(self.outputs[k]), default=0)


def check_outputs(
    outs: Sequence[Any],
    ref: Sequence[Any],
    tol: Tolerance = Tolerance(),
    *,
    compute: str = "float32",
    known: Sequence[ValueCheck | None] = (),
) -> OutputsCheck:
    """`known[k]`: output k's check where the caller knows it already (the very array compared
    under this tolerance and compute type before), so only the other outputs are compared."""
    if len(outs) != len(ref):
        return OutputsCheck(False, [], f"{len(outs)} outputs, the reference has {len(ref)}")
    known = list(known) + [None] * (len(outs) - len(known))
    checks = [c if c is not None else check_value(a, b, tol, compute=compute) for a, b, c in zip(outs, ref, known)]
    return OutputsCheck(all(c.ok for c in checks), checks)


__all__ = [
    "OutputsCheck",
    "RMS_FACTOR",
    "Tolerance",
    "ValueCheck",
    "check_outputs",
    "check_value",
    "compute_type",
    "program_compute_type",
    "rms_range",
    "rms_threshold",
    "type_epsilon",
]
