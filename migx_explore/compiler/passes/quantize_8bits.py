"""quantize_8bits: calibrated int8 / fp8 quantization (MIGraphX src/quantize_8bits.cpp and
src/quantization.cpp's quantize_8bits).

The program (with the probes capture_arguments inserted) is evaluated on every calibration feed;
each probe keeps the largest magnitude it saw. A probe whose input is float and not already of the
target type becomes a symmetric per-tensor quantize / dequantize pair:

    capture[ins_index=k](x)  ->  dequantizelinear(quantizelinear(x, s, 0), s, 0)
    s = max_abs_k / R   (R = 127 for int8, 448 for fp8 e4m3fn), clamped to [eps, max] of x's type

simplify_qdq (required pipeline) then turns dot / convolution of two dequantized values into
quant_dot / quant_convolution with int32 (fp8: float32) accumulation and drops the pairs no
quantized op consumed. A probe that saw only zeros gets scale 1, as MIGraphX does.

Calibration feeds are data, not options: they are given to the pass when the quantize stage is
built (`calibration=`) and never appear in the pipeline spec. With none, the pass calibrates on
seeded random inputs and says so in a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .. import dtypes
from ..errors import MigxError
from ..ir import Program
from ..op import Op
from ..pass_infra import Pass
from .capture_arguments import QUANTIZABLE_TYPES
from .rule_helpers import broadcast_literal

# Largest magnitude of each 8-bit target (MIGraphX's type_ranges).
QUANT_RANGES = {"int8": 127.0, "float8e4m3fn": 448.0}


@dataclass(frozen=True)
class QuantizeEightBits(Pass):
    name: ClassVar[str] = "quantize_8bits"
    must_follow: ClassVar[tuple[str, ...]] = ("capture_arguments",)
    precision: str = "int8"
    # Feeds to calibrate on: a tuple of {input name: array}. Data, not an option (see module doc).
    calibration: tuple[Mapping[str, Any], ...] = field(default=(), compare=False, repr=False, metadata={"spec": False})

    def __post_init__(self):
        t = dtypes.dtype(self.precision).name
        if t not in QUANT_RANGES:
            raise MigxError(
                f"quantize_8bits: precision must be one of {', '.join(QUANT_RANGES)}, got {self.precision!r}"
            )
        object.__setattr__(self, "precision", t)

    def non_default_options(self) -> dict[str, Any]:
        return {k: v for k, v in super().non_default_options().items() if k != "calibration"}

    def apply_program(self, program: Program, ctx) -> bool:
        module = program.main
        probes = [ins for ins in module if ins.name == "capture"]
        if not probes:
            return False
        max_abs = calibrate(program, self.calibration)
        qrange = QUANT_RANGES[self.precision]
        for ins in probes:
            x = ins.inputs[0]
            if x.shape.type not in QUANTIZABLE_TYPES or x.shape.type == self.precision:
                module.replace_all_uses(ins, x)
                module.remove_instruction(ins)
                continue
            seen = max_abs.get(ins.op["ins_index"], 0.0)
            info = dtypes.finfo(x.shape.type)
            scale = 1.0 if seen == 0.0 else float(np.clip(seen / qrange, info.eps, info.max))
            with program.provenance([ins]):
                lens = x.shape.lens
                s = broadcast_literal(module, ins, scale, x.shape.type, lens)
                z = broadcast_literal(module, ins, 0, self.precision, lens)
                q = module.insert_instruction(ins, Op("quantizelinear"), [x, s, z])
                dq = module.insert_instruction(ins, Op("dequantizelinear"), [q, s, z])
            module.replace_all_uses(ins, dq)
            module.remove_instruction(ins)
        return True


def calibrate(program: Program, feeds: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Largest |value| each capture probe sees over the feeds (seeded random inputs if none)."""
    from ..inputs import random_inputs
    from ..ref import evaluate

    if not feeds:
        warnings.warn(
            "quantize_8bits: no calibration data given; calibrating on seeded random inputs "
            "(pass --calibration FEED.npz or --inputs FEED.npz for representative scales)",
            stacklevel=2,
        )
        feeds = (random_inputs(program, seed=0),)
    seen: dict[int, float] = {}

    def hook(ins, value) -> None:
        if ins.name == "capture":
            k = ins.op["ins_index"]
            v = np.asarray(value, np.float64)
            seen[k] = max(seen.get(k, 0.0), float(np.max(np.abs(v))) if v.size else 0.0)

    for feed in feeds:
        evaluate(program, feed, hook=hook)
    return seen
