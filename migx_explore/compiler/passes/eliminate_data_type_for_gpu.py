"""eliminate_data_type_for_gpu (MIGraphX src/targets/gpu/eliminate_data_type_for_gpu.cpp): the
types and ops the GPU target cannot compute, handed to eliminate_data_type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from ..pass_infra import Pass
from .eliminate_data_type import EliminateDataType

# Ops whose 64-bit integer inputs are indices into memory, so a valid one fits in 32 bits. Only
# literal indices that fit are narrowed: a fed or computed one may be hostile (2^32 + 1 would wrap
# to a valid 1), so it stays 64-bit and is range-checked as it is. Other ops keep 64-bit
# integers: a sum or a product may need them, and converting would change results.
INDEX_OPS = (
    "gather",
    "gathernd",
    "onehot",
    "scatter_none",
    "scatter_add",
    "scatter_mul",
    "scatter_min",
    "scatter_max",
    "scatternd_none",
    "scatternd_add",
    "scatternd_mul",
    "scatternd_min",
    "scatternd_max",
)
GEMM_CONV = ("dot", "convolution")
# Integer and bool dot / convolution have no device kernel (BLAS and the generated convolutions
# compute in floating point); int8 goes through quant_dot / quant_convolution instead.
NON_FLOAT_GEMM = ("bool", "uint8", "uint16", "int16", "int32", "uint32", "int64", "uint64")


@dataclass(frozen=True)
class EliminateDataTypeForGpu(Pass):
    """MIGraphX's gpu::eliminate_data_type_for_gpu: several eliminate_data_type runs (children in
    the trace). With disable_64bit (fast_math): double -> float everywhere, and int64 -> int32 /
    uint64 -> uint32 where the values are indices (MIGraphX converts more widely; we keep
    arithmetic in 64 bit so example models stay exact). Always: integer/bool dot and convolution
    compute in float. bf16 stays (the devices we target have bf16), and there are no fp8 types."""

    name: ClassVar[str] = "eliminate_data_type_for_gpu"
    disable_64bit: bool = False

    def steps(self) -> list[EliminateDataType]:
        out = []
        if self.disable_64bit:
            out += [
                EliminateDataType(("float64",), "float32"),
                EliminateDataType(("int64",), "int32", INDEX_OPS, literals_that_fit=True),
                EliminateDataType(("uint64",), "uint32", INDEX_OPS, literals_that_fit=True),
            ]
        out.append(EliminateDataType(NON_FLOAT_GEMM, "float32", GEMM_CONV))
        return out

    def apply_module(self, module: Module, ctx) -> bool:
        return ctx.run_passes(self.steps())
