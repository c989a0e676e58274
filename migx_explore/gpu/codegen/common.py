"""Shared pieces of kernel generation: the generated-kernel record, C++ types, index arithmetic.

Shapes are static, so every length and stride is a compile-time constant in the source: the
compiler turns the index divisions into multiply-shifts, and a kernel's only run-time arguments
are the buffer pointers (one per instruction input, in order), which is what lets the executor
pre-pack every argument block once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape


class CodegenUnsupported(MigxError):
    """No generated kernel for this op/configuration (compile_ops then falls back to a host op)."""


@dataclass(frozen=True)
class KernelSource:
    """A generated kernel: `name` is the extern "C" symbol, launched as global/local threads."""

    name: str
    source: str
    global_size: int
    local_size: int

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.name}\0{self.source}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class KernelRequest:
    """What a generator gets: the wrapped op, every param's shape (inputs, then outputs), the
    number of outputs, the op's own submodule (pointwise, fused_reduce) or a GEMM/conv epilogue."""

    inner: Op
    shapes: list[Shape]
    nout: int
    module: Module | None
    epilogue: Module | None
    modules: list[Module]
    # (own input, axis) of gathers fused into the kernel's loads; their indices are the params
    # before the outputs (gather_load.py). Generators that do not read them get none.
    gathers: tuple[tuple[int, int], ...] = ()


# A kernel family's generator. Each codegen module keeps a GENERATORS table of its families next to
# the code (gpu/codegen/__init__.py merges them), so a new family is one function and one row there.
RequestGenerator = Callable[[KernelRequest], KernelSource]


# Storage type (what a pointer points at) and compute type (what arithmetic uses).
STORAGE = {
    "float32": "float",
    "float64": "double",
    "float16": "migx::half_t",
    "bfloat16": "migx::bf16_t",
    "float8e4m3fn": "migx::fp8e4m3_t",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short",
    "uint16": "unsigned short",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
    "bool": "bool",
}
COMPUTE = dict(STORAGE, float16="float", bfloat16="float", float8e4m3fn="float")


def storage_type(t: str) -> str:
    try:
        return STORAGE[t]
    except KeyError:
        raise CodegenUnsupported(f"no device type for {t}") from None


def compute_type(t: str) -> str:
    return COMPUTE[t] if t in COMPUTE else storage_type(t)


def is_float(t: str) -> bool:
    return t in ("float8e4m3fn", "float16", "bfloat16", "float32", "float64")


def literal(value, t: str) -> str:
    """A C++ literal of compute type t."""
    ct = compute_type(t)
    if t == "bool":
        return "true" if bool(value) else "false"
    if is_float(t):
        v = float(value)
        if v != v:
            return "migx::nan_f()" if ct == "float" else "(double)migx::nan_f()"
        if v in (float("inf"), float("-inf")):
            s = "migx::inf_f()" if ct == "float" else "migx::inf_d()"
            return s if v > 0 else f"(-{s})"
        r = repr(v)
        if "e" not in r and "." not in r:
            r += ".0"
        return r + ("f" if ct == "float" else "")
    return f"(({ct}){int(value)}ll)"


def index_type(shapes: Sequence[Shape]) -> str:
    """32-bit index math when every offset and count fits, else 64-bit."""
    big = max((max(s.element_space(), s.elements()) for s in shapes if not s.is_tuple), default=0)
    return "int" if big < 2**31 - 1 else "long long"


def collapse(lens: Sequence[int], strides_list: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Merge adjacent axes that are contiguous in every tensor (fewer divisions per element).

    Axes of length 1 are dropped first; returns at least one axis."""
    keep = [i for i, n in enumerate(lens) if n != 1]
    if not keep:
        return [1], [[0] for _ in strides_list]
    out_lens = [lens[keep[0]]]
    out_strides = [[s[keep[0]]] for s in strides_list]
    for i in keep[1:]:
        n = lens[i]
        if all(st[-1] == s[i] * n for st, s in zip(out_strides, strides_list)):
            out_lens[-1] *= n
            for st, s in zip(out_strides, strides_list):
                st[-1] = s[i]
        else:
            out_lens.append(n)
            for st, s in zip(out_strides, strides_list):
                st.append(s[i])
    return out_lens, out_strides


def decompose(var: str, lens: Sequence[int], it: str, prefix: str = "c") -> list[str]:
    """C++ lines splitting linear index `var` into coordinates `<prefix>0..` of row-major `lens`."""
    lines = []
    nd = len(lens)
    if nd == 1:
        return [f"const {it} {prefix}0 = {var};"]
    rest = f"{prefix}_rest"
    lines.append(f"{it} {rest} = {var};")
    for d in range(nd - 1, 0, -1):
        lines.append(f"const {it} {prefix}{d} = {rest} % {lens[d]}; {rest} /= {lens[d]};")
    lines.append(f"const {it} {prefix}0 = {rest};")
    return lines


def offset_expr(coords: Sequence[str], strides: Sequence[int]) -> str:
    terms = []
    for c, s in zip(coords, strides):
        if s == 0:
            continue
        terms.append(c if s == 1 else f"{c} * {s}")
    return " + ".join(terms) if terms else "0"


def batch_offsets(shapes: Sequence[Shape], nbd: int) -> dict[int, str]:
    """Param k's offset at batch coordinates b0..b{nbd-1} (its leading nbd strides), by param."""
    coords = [f"b{i}" for i in range(nbd)]
    return {k: (offset_expr(coords, s.strides[:nbd]) if nbd else "0") for k, s in enumerate(shapes)}


def launch_1d(n: int, local: int = 256, max_blocks: int = 8192) -> tuple[int, int]:
    """(global, local) for a grid-stride loop over n items."""
    blocks = max(1, min((n + local - 1) // local, max_blocks))
    return blocks * local, local


def kernel_params(shapes: Sequence[Shape], writes: Sequence[bool]) -> str:
    parts = []
    for k, (s, w) in enumerate(zip(shapes, writes)):
        t = storage_type(s.type)
        parts.append(f"{t}* __restrict__ p{k}" if w else f"const {t}* __restrict__ p{k}")
    return ", ".join(parts)


def source(body: str) -> str:
    return '#include "migx.hpp"\n\n' + body.strip() + "\n"


def sanitize(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_")[:48] or "k"


def grid_stride_kernel(
    name: str, shapes: Sequence[Shape], writes: Sequence[bool], it: str, n: int, lines: Sequence[str], prelude: str = ""
) -> KernelSource:
    """Wrap per-element `lines` (which read the flat index `i`) in a grid-stride loop over `n`
    elements; the one kernel skeleton every elementwise-style generator shares."""
    g, loc = launch_1d(n)
    inner = "\n        ".join(lines)
    src = f"""{prelude}
MIGX_GLOBAL void {name}_kernel({kernel_params(shapes, writes)}) {{
    migx::kernel_entry();
    for ({it} i = ({it})blockIdx.x * blockDim.x + threadIdx.x; i < {n}; i += ({it})gridDim.x * blockDim.x) {{
        {inner}
    }}
}}"""
    return KernelSource(name + "_kernel", source(src), g, loc)


def memory_order(s: Shape) -> list[int]:
    """s's axes from the largest stride to the smallest (ties keep their order): the order that
    walks a buffer front to back, e.g. [0, 2, 3, 1] for a channels-last [n, c, h, w]. Consecutive
    threads then touch consecutive addresses whatever the layout (a logical-order walk of a
    channels-last output stored each thread's element C apart)."""
    return sorted(range(s.ndim), key=lambda d: -s.strides[d])


def output_grid_kernel(name: str, shapes: Sequence[Shape], lines_fn, prelude: str = "") -> KernelSource:
    """A kernel computing each element of the last param (the output) from output coordinates
    o0, o1, ...: `lines_fn(coords, index_type)` returns the lines that compute and store it.
    Threads take the output's elements in memory order (memory_order)."""
    out = shapes[-1]
    n = out.elements()
    if n == 0:
        raise CodegenUnsupported("empty output")
    it = index_type(shapes)
    order = memory_order(out)
    if order == list(range(out.ndim)):
        lines = decompose("i", out.lens, it, "o")
    else:
        lines = decompose("i", [out.lens[d] for d in order], it, "mo")  # a prefix no generator uses
        lines += [f"const {it} o{d} = mo{k};" for k, d in enumerate(order)]
    lines += lines_fn([f"o{d}" for d in range(out.ndim)], it)
    return grid_stride_kernel(name, shapes, [False] * (len(shapes) - 1) + [True], it, n, lines, prelude)
