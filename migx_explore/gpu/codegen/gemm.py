"""A generated tiled GEMM: the device path for `quant_dot` (int8 x int8 -> int32, fp8 x fp8 ->
float32) wherever vendor BLAS cannot take the product (cuBLASLt's int8 and fp8 kernels want the
"TN" layout and aligned sizes, fp8 needs sm_89+, hip-python has no fp8 BLAS), and the executor's
fallback when the library refuses a planned call at finalize. Never the host.

One 16x16 output tile per 256-thread block; A and B tiles are staged through shared memory
already converted to the accumulator type (int32 for 8-bit integers, float otherwise), so the
inner loop is 16 multiply-adds from shared memory per k step. Any strides (batch broadcast,
transposed views) are compile-time constants, like every other generated kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from migx_explore.compiler.shape import Shape

from ..blas_plan import view_strides
from .common import (
    CodegenUnsupported,
    KernelSource,
    RequestGenerator,
    decompose,
    index_type,
    kernel_params,
    source,
)
from .templates import render

TILE = 16


def accumulator(t: str) -> str:
    """C++ accumulator of a product of `t` values: exact int32 for 8-bit integers, float for
    fp8 / half / bf16 / float32 (fp32 accumulation), double for double."""
    if t in ("int8", "uint8", "int16", "uint16", "int32"):
        return "int"
    if t == "float64":
        return "double"
    return "float"


def gemm_kernel(shapes: Sequence[Shape], alpha: float = 1.0) -> KernelSource:
    """Params (a, b, out): out = alpha * a[..., m, k] . b[..., k, n]; out may be any buffer the
    product's lens can view without a copy (a conv output seen as [n, k_out, h*w])."""
    a, b, c = shapes[0], shapes[1], shapes[-1]
    if a.ndim < 2 or a.ndim != b.ndim:
        raise CodegenUnsupported(f"gemm of ranks {a.ndim} and {b.ndim}")
    batch = list(a.lens[:-2])
    m, k, n = a.lens[-2], a.lens[-1], b.lens[-1]
    cs = view_strides(c.lens, c.strides, batch + [m, n])
    if cs is None:
        raise CodegenUnsupported(f"gemm output {c} cannot view the product's lens {batch + [m, n]}")
    if m * n * k == 0:
        raise CodegenUnsupported("empty gemm")
    acc = accumulator(a.type)
    it = index_type(shapes)
    tm, tn = -(-m // TILE), -(-n // TILE)
    nb = math.prod(batch) if batch else 1
    name = f"gemm_tiled_{a.type}_{m}x{n}x{k}" + (f"_b{nb}" if nb > 1 else "")
    src = render(
        "gemm.hpp",
        "kernel",
        name=name,
        params=kernel_params([a, b, c], [False, False, True]),
        acc=acc,
        tile=TILE,
        pitch=TILE + 1,
        it=it,
        tiles_n=tn,
        tiles_m=tm,
        offsets=_batch_offsets(batch, [a.strides, b.strides, cs], it),
        k=k,
        m=m,
        n=n,
        a_row=a.strides[-2],
        a_col=a.strides[-1],
        b_row=b.strides[-2],
        b_col=b.strides[-1],
        c_row=cs[-2],
        c_col=cs[-1],
        scale="" if alpha == 1.0 else f" * ({acc}){alpha!r}",
    )
    local = TILE * TILE
    return KernelSource(name + "_kernel", source(src), nb * tm * tn * local, local)


def _batch_offsets(batch: list[int], strides: list[Sequence[int]], it: str) -> list[str]:
    """Lines setting oa, ob and oc: each operand's offset at the block's batch coordinates."""
    if not batch:
        return [f"const {it} oa = 0, ob = 0, oc = 0;"]
    coords = [f"g{d}" for d in range(len(batch))]

    def base(s: Sequence[int]) -> str:
        return " + ".join(f"{c_} * {st}" for c_, st in zip(coords, s[:-2]) if st) or "0"

    return decompose("blk", batch, it, "g") + [f"const {it} o{x} = {base(s)};" for x, s in zip("abc", strides)]


# quant_dot where 8-bit BLAS cannot take it (MIGX_WIDEN_8BIT=0): tiled, int32 / fp32 accumulation
GENERATORS: dict[str, RequestGenerator] = {"quant_gemm": lambda r: gemm_kernel(r.shapes)}
