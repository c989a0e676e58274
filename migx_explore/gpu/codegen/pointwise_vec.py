"""Two elements per thread in elementwise kernels over half / bfloat16 data (half2-style access).

A thread takes an even flat index i and i + 1. Where the innermost merged axis has an even
length, the pair never straddles a row, so a tensor contiguous along that axis (stride 1, every
other stride even) holds the pair in one aligned 32-bit word (16-bit types) or 64-bit float2
(float): one load or store instead of two. A tensor broadcast along the axis (stride 0) is read
once for both; any other layout is read element by element. Arithmetic stays in float, per
element, with the same expressions as the scalar kernel, so results are bit-identical.

Buffers are checked for alignment at run time (a view may start at an odd element); if any
paired pointer is not aligned the kernel takes the scalar loop instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from migx_explore.compiler.shape import Shape

from .common import KernelSource, compute_type, decompose, kernel_params, launch_1d, offset_expr, source, storage_type
from .gather_load import GatherLoad
from .templates import render

Body = Callable[[list[str], list[str]], list[str]]
_PAIRED = {"float16": ("unsigned", 4), "bfloat16": ("unsigned", 4), "float32": ("float2", 8)}


def _mode(shape: Shape, strides: Sequence[int]) -> str:
    """'pair' (one wide access), 'bcast' (one value for both) or 'each' (two accesses)."""
    if strides[-1] == 0:
        return "bcast"
    if strides[-1] == 1 and shape.type in _PAIRED and all(s % 2 == 0 for s in strides[:-1]):
        return "pair"
    return "each"


def vectorizable(
    shapes: Sequence[Shape],
    clens: Sequence[int],
    strides: dict[int, list[int]],
    gathers: dict[int, GatherLoad] | None = None,
) -> bool:
    """Worth the pair loop: an even innermost length and some 16-bit tensor accessed in pairs.
    A fused gather's two elements must share their index (the indices broadcast along the axis)."""
    if any(strides[g.index][-1] != 0 for g in (gathers or {}).values()):
        return False
    return clens[-1] % 2 == 0 and any(
        shapes[k].type in ("float16", "bfloat16") and _mode(shapes[k], s) == "pair" for k, s in strides.items()
    )


def _pair_loads(
    shapes: Sequence[Shape],
    it: str,
    coords: list[str],
    strides: dict[int, list[int]],
    loads: Sequence[int],
    modes: dict[int, str],
    gathers: dict[int, GatherLoad],
) -> tuple[list[str], list[list[str]]]:
    """(lines, the two elements' input expressions): a pair read as one word, a broadcast read
    once for both, or two reads."""
    lines: list[str] = []
    elems: list[list[str]] = [[], []]
    for k in loads:
        ct = compute_type(shapes[k].type)
        off = offset_expr(coords, strides[k])
        g = gathers.get(k)
        if g is not None:
            lines += g.index_lines(offset_expr(coords, strides[g.index]), f"g{k}")
            off = g.offset(off, f"g{k}", it)
        if modes[k] == "pair":
            word, _ = _PAIRED[shapes[k].type]
            lines.append(f"const {word} w{k} = *(const {word}*)(p{k} + {off});")
            if word == "float2":
                pair = (f"w{k}.x", f"w{k}.y")
            else:
                st = storage_type(shapes[k].type)
                pair = (f"migx::lo_f<{st}>(w{k})", f"migx::hi_f<{st}>(w{k})")
        elif modes[k] == "bcast":
            lines.append(f"const {ct} a{k} = migx::load(p{k}, {off});")
            pair = (f"a{k}", f"a{k}")
        else:
            lines.append(f"const {ct} a{k}_0 = migx::load(p{k}, {off});")
            lines.append(f"const {ct} a{k}_1 = migx::load(p{k}, {off} + {strides[k][-1]});")
            pair = (f"a{k}_0", f"a{k}_1")
        elems[0].append(pair[0])
        elems[1].append(pair[1])
    return lines, elems


def _pair_stores(
    shapes: Sequence[Shape],
    coords: list[str],
    strides: dict[int, list[int]],
    stores: Sequence[int],
    modes: dict[int, str],
) -> list[str]:
    lines = []
    for k in stores:
        off = offset_expr(coords, strides[k])
        if modes[k] == "pair":
            word, _ = _PAIRED[shapes[k].type]
            if word == "float2":
                lines.append(f"*(float2*)(p{k} + {off}) = make_float2(r{k}_0, r{k}_1);")
            else:
                st = storage_type(shapes[k].type)
                lines.append(f"*({word}*)(p{k} + {off}) = migx::pack2<{st}>(r{k}_0, r{k}_1);")
        else:  # a broadcast output would be a race in the scalar kernel too; never generated
            lines.append(f"migx::store(p{k}, {off}, r{k}_0);")
            lines.append(f"migx::store(p{k}, {off} + {strides[k][-1]}, r{k}_1);")
    return lines


def paired_kernel(
    name: str,
    shapes: Sequence[Shape],
    writes: Sequence[bool],
    it: str,
    n: int,
    clens: Sequence[int],
    strides: dict[int, list[int]],
    loads: Sequence[int],
    stores: Sequence[int],
    body: Body,
    scalar_lines: Sequence[str],
    gathers: dict[int, GatherLoad] | None = None,
) -> KernelSource:
    """The pair loop, with `scalar_lines` (the one-element loop body over flat index i) as the
    fallback for unaligned buffers. `gathers`: params read through a fused gather, both elements
    at one index (`vectorizable` checked); a pair there needs the table's row stride even too."""
    gathers = gathers or {}
    coords = [f"c{d}" for d in range(len(clens))]
    modes = {k: _mode(shapes[k], s) for k, s in strides.items()}
    for k, g in gathers.items():
        if modes[k] == "pair" and g.stride % 2:
            modes[k] = "each"
    lines = decompose("i", clens, it)
    loaded, elems = _pair_loads(shapes, it, coords, strides, loads, modes, gathers)
    lines += loaded
    for u in (0, 1):
        # each element's body in its own scope: the emitted locals have the same names twice
        lines += [f"{compute_type(shapes[k].type)} r{k}_{u};" for k in stores]
        inner: list[str] = []
        results = body(inner, elems[u])
        inner += [f"r{k}_{u} = {e};" for k, e in zip(stores, results)]
        lines.append("{ " + " ".join(inner) + " }")
    lines += _pair_stores(shapes, coords, strides, stores, modes)
    paired = [k for k in modes if modes[k] == "pair"]
    check = " | ".join(f"((unsigned long long)p{k} & {_PAIRED[shapes[k].type][1] - 1}ull)" for k in paired)
    g, loc = launch_1d(n // 2)
    src = render(
        "pointwise_vec.hpp",
        "kernel",
        name=name,
        params=kernel_params(shapes, writes),
        it=it,
        check=check,
        pairs=n // 2,
        pair_body=lines,
        n=n,
        scalar_body=list(scalar_lines),
    )
    return KernelSource(name + "_kernel", source(src), g, loc)
