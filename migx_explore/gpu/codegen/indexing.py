"""Kernels for the data-dependent and index-driven ops: topk, gathernd, scatter / scatternd (every
reduction), prefix_scan_sum (CumSum), onehot, nonzero (a maximum-size buffer plus a count, as
MIGraphX's nonzero), lrn, and integer matrix products (quant_dot, integer dot).

Ops whose output order depends on the data get one block that walks the input in index order
(scatter, nonzero), so ONNX's ordering rules hold without grid-wide synchronisation; the rest
are one thread per output element with compile-time shapes, like the pointwise kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.common import norm_axis
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelSource,
    RequestGenerator,
    compute_type,
    decompose,
    index_type,
    is_float,
    kernel_params,
    literal,
    offset_expr,
    output_grid_kernel,
    source,
    storage_type,
)
from .topk import radix_topk_applies, radix_topk_kernel

BLOCK = 256  # threads of the single-block and per-slice kernels (a multiple of 64: full AMD waves)


def _store(k: int, shape: Shape, coords: Sequence[str], expr: str) -> str:
    return f"migx::store(p{k}, {offset_expr(coords, shape.strides)}, {expr});"


def _wrapped_index(lines: list[str], var: str, load: str, n: int) -> None:
    """`var` = the index read by `load`, negative ones counted from the end (ONNX)."""
    lines.append(f"long long {var} = (long long){load};")
    lines.append(f"if ({var} < 0) {var} += {n};")


def _block_kernel(name: str, shapes: Sequence[Shape], writes: Sequence[bool], body: Sequence[str]) -> KernelSource:
    """One block of BLOCK threads running `body` (single-block kernels)."""
    text = "\n    ".join(body)
    src = f"""
MIGX_GLOBAL void {name}({kernel_params(shapes, writes)}) {{
    migx::kernel_entry();
    {text}
}}"""
    return KernelSource(name, source(src), BLOCK, BLOCK)


# Inclusive block scan of `buf` (BLOCK entries, one per thread) in place; every thread then reads
# its own prefix. Hillis-Steele: log2(BLOCK) steps, two barriers each.
_BLOCK_SCAN = [
    "__syncthreads();",
    f"for (int d = 1; d < {BLOCK}; d <<= 1) {{",
    "    const auto t = threadIdx.x >= (unsigned)d ? buf[threadIdx.x - d] : buf[0] * 0;",
    "    __syncthreads();",
    "    buf[threadIdx.x] += t;",
    "    __syncthreads();",
    "}",
]


# --- gathernd -----------------------------------------------------------------------------------
def gathernd_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """out[o] = data[o[:b], ind[o[:q], :], o[q:]] with q = rank(ind) - 1 and b = batch_dims."""
    data, ind = shapes[0], shapes[1]
    b, k, q = op["batch_dims"], ind.lens[-1], ind.ndim - 1

    def lines_fn(o: list[str], it: str) -> list[str]:
        lines: list[str] = []
        coords = list(o[:b])
        for t in range(k):
            load = f"p1[{offset_expr(o[:q] + [str(t)], ind.strides)}]"
            _wrapped_index(lines, f"j{t}", load, data.lens[b + t])
            coords.append(f"j{t}")
        coords += o[q:]
        lines.append(_store(2, shapes[-1], o, f"migx::load(p0, {offset_expr(coords, data.strides)})"))
        return lines

    return output_grid_kernel(f"gathernd_b{b}", shapes, lines_fn)


# --- scatter (elements) and scatternd -----------------------------------------------------------
_ATOMIC_OPS = {"add": "op_sum", "mul": "op_prod", "min": "op_min", "max": "op_max"}


def _scatter(
    name: str, shapes: Sequence[Shape], reduction: str, target: Callable[[list[str], list[str]], list[str]]
) -> KernelSource:
    """One block: copy data to the output, then apply every update at target(lines, update coords).
    Reductions are atomic (repeated indices accumulate, as numpy's ufunc.at does)."""
    data, upd, out = shapes[0], shapes[2], shapes[-1]
    if reduction != "none" and storage_type(out.type) not in (
        "float",
        "double",
        "int",
        "unsigned int",
        "long long",
        "unsigned long long",
    ):
        raise CodegenUnsupported(f"atomic {reduction} on {out.type}")
    it = index_type(shapes)
    body = [f"for ({it} i = threadIdx.x; i < {data.elements()}; i += blockDim.x) {{"]
    body += ["    " + x for x in decompose("i", data.lens, it, "d")]
    dc = [f"d{x}" for x in range(data.ndim)]
    body.append(f"    {_store(3, out, dc, f'migx::load(p0, {offset_expr(dc, data.strides)})')}")
    body += ["}", "__syncthreads();"]
    body.append(f"for ({it} i = threadIdx.x; i < {upd.elements()}; i += blockDim.x) {{")
    lines = decompose("i", upd.lens, it, "u")
    uc = [f"u{x}" for x in range(upd.ndim)]
    tc = target(lines, uc)
    value = f"migx::load(p2, {offset_expr(uc, upd.strides)})"
    off = offset_expr(tc, out.strides)
    if reduction == "none":
        lines.append(f"migx::store(p3, {off}, {value});")
    else:
        st = storage_type(out.type)
        lines.append(f"migx::atomic_apply(p3 + ({off}), ({st}){value}, migx::{_ATOMIC_OPS[reduction]}());")
    body += ["    " + x for x in lines] + ["}"]
    if upd.elements() == 0:
        raise CodegenUnsupported("empty updates")
    return _block_kernel(f"{name}_{reduction}_kernel", shapes, [False, False, False, True], body)


def scatter_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    data, ind = shapes[0], shapes[1]
    axis = norm_axis(op["axis"], data.ndim, op.name)

    def target(lines: list[str], uc: list[str]) -> list[str]:
        _wrapped_index(lines, "j", f"p1[{offset_expr(uc, ind.strides)}]", data.lens[axis])
        return uc[:axis] + ["j"] + uc[axis + 1 :]

    return _scatter("scatter", shapes, op.name.split("_", 1)[1], target)


def scatternd_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    data, ind = shapes[0], shapes[1]
    k, q = ind.lens[-1], ind.ndim - 1

    def target(lines: list[str], uc: list[str]) -> list[str]:
        coords = []
        for t in range(k):
            _wrapped_index(lines, f"j{t}", f"p1[{offset_expr(uc[:q] + [str(t)], ind.strides)}]", data.lens[t])
            coords.append(f"j{t}")
        return coords + uc[q:]

    return _scatter("scatternd", shapes, op.name.split("_", 1)[1], target)


# --- prefix_scan_sum ----------------------------------------------------------------------------
def _slices(x: Shape, axis: int) -> tuple[list[int], list[int]]:
    """Lens and positions of every axis but `axis` (the slices a per-axis kernel walks)."""
    dims = [d for d in range(x.ndim) if d != axis]
    return [x.lens[d] for d in dims], dims


def _slice_base(
    lines: list[str], var: str, x_lens: list[int], dims: list[int], it: str, shapes: Sequence[tuple[int, Shape]]
) -> None:
    """Declare base{k} = offset of slice `var`'s first element in every (k, shape)."""
    lines += decompose(var, x_lens or [1], it, "s")
    coords = [f"s{n}" for n in range(len(dims))]
    for k, s in shapes:
        lines.append(f"const {it} base{k} = {offset_expr(coords, [s.strides[d] for d in dims]) if dims else '0'};")


def scan_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """One block per slice along the axis (grid-stride over slices); chunks of BLOCK elements are
    scanned in shared memory and chained by a carry, so any axis length works."""
    x, out = shapes[0], shapes[-1]
    axis = norm_axis(op["axis"], x.ndim, "prefix_scan_sum")
    n = x.lens[axis]
    if n == 0 or x.elements() == 0:
        raise CodegenUnsupported("empty scan")
    ct = compute_type(x.type)
    it = index_type(shapes)
    lens, dims = _slices(x, axis)
    nslices = x.elements() // n
    pos = f"({n - 1} - j)" if op["reverse"] else "j"
    lines = [
        f"__shared__ {ct} buf[{BLOCK}];",
        f"for ({it} slice = blockIdx.x; slice < {nslices}; slice += gridDim.x) {{",
    ]
    inner: list[str] = []
    _slice_base(inner, "slice", lens, dims, it, [(0, x), (1, out)])
    inner += [f"{ct} carry = 0;", f"for ({it} first = 0; first < {n}; first += {BLOCK}) {{"]
    chunk = [
        f"const {it} j = first + threadIdx.x;",
        f"const {ct} v = j < {n} ? ({ct})migx::load(p0, base0 + {pos} * {x.strides[axis]}) : ({ct})0;",
        "buf[threadIdx.x] = v;",
    ]
    chunk += _BLOCK_SCAN
    result = "buf[threadIdx.x] - v" if op["exclusive"] else "buf[threadIdx.x]"
    chunk += [
        f"if (j < {n}) migx::store(p1, base1 + {pos} * {out.strides[axis]}, carry + {result});",
        f"carry += buf[{BLOCK - 1}];",
        "__syncthreads();",
    ]
    inner += ["    " + c for c in chunk] + ["}"]
    lines += ["    " + c for c in inner] + ["}"]
    body = "\n    ".join(lines)
    name = f"prefix_scan_sum{'_excl' if op['exclusive'] else ''}{'_rev' if op['reverse'] else ''}_kernel"
    src = f"""
MIGX_GLOBAL void {name}({kernel_params(shapes, [False, True])}) {{
    migx::kernel_entry();
    {body}
}}"""
    blocks = min(nslices, 8192)
    return KernelSource(name, source(src), blocks * BLOCK, BLOCK)


# --- topk ---------------------------------------------------------------------------------------
TOPK_LANES, TOPK_SCANNERS = 32, BLOCK // 32  # elements per block, threads counting for each element


def topk_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """Each element's rank in its slice is how many elements come before it (better by value,
    or equal with a lower index; NaN counts as the largest value, as in the reference); an element
    whose rank is below k writes itself at that position. Exact for every k, sorted, ties by lower
    index. A block ranks 32 elements: each warp counts over one eighth of the slice (every lane
    reads the same element, a broadcast load) and stops once its count reaches k; the eight
    partial counts are summed in shared memory."""
    if radix_topk_applies(op, shapes):  # long float slices: one radix-select pass (topk.py)
        return radix_topk_kernel(op, shapes)
    x, vals, idx = shapes[0], shapes[1], shapes[2]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    if k == 0 or x.elements() == 0:
        raise CodegenUnsupported("empty topk")
    ct = compute_type(x.type)
    it = index_type(shapes)
    lens, dims = _slices(x, axis)
    nslices = x.elements() // n
    chunks = (n + TOPK_LANES - 1) // TOPK_LANES
    span = (n + TOPK_SCANNERS - 1) // TOPK_SCANNERS
    better = ">" if op["largest"] else "<"
    key = (lambda v: f"(migx::isnan_({v}) ? {literal(float('inf'), x.type)} : {v})") if is_float(x.type) else str
    at = f"* {x.strides[axis]}"
    lines = [
        f"__shared__ int ranks[{TOPK_LANES}];",
        f"if (threadIdx.x < {TOPK_LANES}) ranks[threadIdx.x] = 0;",
        f"const {it} slice = blockIdx.x / {chunks};",
        f"const {it} i = (blockIdx.x % {chunks}) * {TOPK_LANES} + threadIdx.x % {TOPK_LANES};",
        f"const {it} lo = (threadIdx.x / {TOPK_LANES}) * {span};",
        f"const {it} hi = lo + {span} < {n} ? lo + {span} : {n};",
    ]
    _slice_base(lines, "slice", lens, dims, it, [(0, x), (1, vals), (2, idx)])
    lines += [
        f"{ct} mine = 0;",
        f"if (i < {n}) {{ const {ct} v = migx::load(p0, base0 + i {at}); mine = {key('v')}; }}",
        "int rank = 0;",
        f"if (i < {n}) {{",
        f"    for ({it} j = lo; j < hi && rank < {k}; ++j) {{",
        f"        const {ct} w = migx::load(p0, base0 + j {at});",
        f"        const {ct} o = {key('w')};",
        f"        rank += (o {better} mine) || (o == mine && j < i);",
        "    }",
        "}",
        "__syncthreads();",
        f"if (i < {n}) atomicAdd(&ranks[threadIdx.x % {TOPK_LANES}], rank);",
        "__syncthreads();",
        f"if (threadIdx.x < {TOPK_LANES} && i < {n} && ranks[threadIdx.x] < {k}) {{",
        "    const int r = ranks[threadIdx.x];",
        f"    migx::store(p1, base1 + r * {vals.strides[axis]}, migx::load(p0, base0 + i {at}));",
        f"    migx::store(p2, base2 + r * {idx.strides[axis]}, (long long)i);",
        "}",
    ]
    body = "\n    ".join(lines)
    name = f"topk_{'largest' if op['largest'] else 'smallest'}_kernel"
    src = f"""
MIGX_GLOBAL void {name}({kernel_params(shapes, [False, True, True])}) {{
    migx::kernel_entry();
    {body}
}}"""
    return KernelSource(name, source(src), nslices * chunks * BLOCK, BLOCK)


# --- onehot -------------------------------------------------------------------------------------
def onehot_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    ind, values, out = shapes[0], shapes[1], shapes[-1]
    depth = op["depth"]
    axis = norm_axis(op["axis"], ind.ndim + 1, "onehot")
    flat = [sum(c * s for c, s in zip(divmod_coords(f, values.lens), values.strides)) for f in (0, 1)]

    def lines_fn(o: list[str], it: str) -> list[str]:
        ic = o[:axis] + o[axis + 1 :]
        v = f"migx::load(p0, {offset_expr(ic, ind.strides) if ic else '0'})"
        lines = [
            f"long long j = (long long)({f'trunc((double){v})' if is_float(ind.type) else v});",
            f"if (j < 0) j += {depth};",
            f"const bool hot = j == (long long){o[axis]};",
        ]
        lines.append(_store(2, out, o, f"hot ? migx::load(p1, {flat[1]}) : migx::load(p1, {flat[0]})"))
        return lines

    return output_grid_kernel("onehot", shapes, lines_fn)


def divmod_coords(flat: int, lens: Sequence[int]) -> list[int]:
    """Row-major coordinates of flat index `flat` in `lens`."""
    coords = []
    for n in reversed(lens):
        flat, r = divmod(flat, n)
        coords.append(r)
    return coords[::-1]


# --- nonzero ------------------------------------------------------------------------------------
def nonzero_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """One block walks the input in row-major order in chunks of BLOCK, ranks the non-zero
    elements with a block scan, writes their coordinates at (carry + rank), then pads the rest
    of the [rank, N] buffer with zeros and writes the count."""
    x, out = shapes[0], shapes[1]
    n = x.elements()
    if n == 0:
        raise CodegenUnsupported("empty nonzero")
    it = index_type(shapes)
    body = [
        "__shared__ long long buf[" + str(BLOCK) + "];",
        "long long carry = 0;",
        f"for ({it} first = 0; first < {n}; first += {BLOCK}) {{",
    ]
    chunk = [f"const {it} i = first + threadIdx.x;"] + decompose("i", x.lens, it, "c")
    coords = [f"c{d}" for d in range(x.ndim)]
    chunk += [
        f"const long long flag = i < {n} && migx::load(p0, {offset_expr(coords, x.strides)}) != 0;",
        "buf[threadIdx.x] = flag;",
    ]
    chunk += _BLOCK_SCAN
    chunk += ["if (flag) {", "    const long long at = carry + buf[threadIdx.x] - 1;"]
    chunk += [f"    {_store(1, out, [str(d), 'at'], coords[d])}" for d in range(x.ndim)]
    chunk += ["}", f"carry += buf[{BLOCK - 1}];", "__syncthreads();"]
    body += ["    " + c for c in chunk] + ["}"]
    body += [f"for (long long at = carry + threadIdx.x; at < {n}; at += blockDim.x) {{"]
    body += [f"    {_store(1, out, [str(d), 'at'], '0')}" for d in range(x.ndim)] + ["}"]
    body.append("if (threadIdx.x == 0) p2[0] = carry;")
    return _block_kernel("nonzero_kernel", shapes, [False, True, True], body)


# --- lrn ----------------------------------------------------------------------------------------
def lrn_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    x, out = shapes[0], shapes[-1]
    if not is_float(x.type):
        raise CodegenUnsupported(f"lrn of {x.type}")
    size = op["size"]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    ch = x.lens[1]
    scale = literal(op["alpha"] / size, "float64")

    def lines_fn(o: list[str], it: str) -> list[str]:
        cc = [o[0], "c"] + o[2:]
        return [
            "double sq = 0.0;",
            f"for (long long c = (long long){o[1]} - {lo}; c <= (long long){o[1]} + {hi}; ++c) {{",
            f"    if (c < 0 || c >= {ch}) continue;",
            f"    const double v = (double)migx::load(p0, {offset_expr(cc, x.strides)});",
            "    sq += v * v;",
            "}",
            f"const double xv = (double)migx::load(p0, {offset_expr(o, x.strides)});",
            _store(
                1,
                out,
                o,
                f"xv / pow({literal(op['bias'], 'float64')} + {scale} * sq, {literal(op['beta'], 'float64')})",
            ),
        ]

    return output_grid_kernel(f"lrn_{size}", shapes, lines_fn)


# --- integer matrix products --------------------------------------------------------------------
def int_dot_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """quant_dot (int8 x int8 -> int32) and dot on integer types: one thread per output element
    (vendor BLAS has no portable integer GEMM; these are rare and small)."""
    a, b, out = shapes[0], shapes[1], shapes[-1]
    kdim = a.lens[-1]
    acc = compute_type(out.type)

    def lines_fn(o: list[str], it: str) -> list[str]:
        batch = o[:-2]
        ai = offset_expr(batch + [o[-2], "kk"], a.strides)
        bi = offset_expr(batch + ["kk", o[-1]], b.strides)
        return [
            f"{acc} acc = 0;",
            f"for ({it} kk = 0; kk < {kdim}; ++kk)",
            f"    acc += ({acc})migx::load(p0, {ai}) * ({acc})migx::load(p1, {bi});",
            _store(2, out, o, "acc"),
        ]

    return output_grid_kernel(f"int_dot_{a.type}", shapes, lines_fn)


# --- convolution_backwards ----------------------------------------------------------------------
def deconv_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """Transposed convolution, one thread per output element: each output position gathers the
    input positions whose strided taps land on it (no scatter, so no atomics)."""
    x, w, out = shapes[0], shapes[1], shapes[-1]
    if not is_float(x.type):
        raise CodegenUnsupported(f"convolution_backwards of {x.type}")
    from migx_explore.compiler.ops.nn import conv_params

    nd = x.ndim - 2
    pb, _, st, dl = conv_params(op, nd)
    g = op["group"]
    cg, kg = x.lens[1] // g, w.lens[1]
    acc = "double" if x.type == "float64" else "float"

    def lines_fn(o: list[str], it: str) -> list[str]:
        lines = [
            f"{acc} acc = 0;",
            f"const long long grp = (long long){o[1]} / {kg};",
            f"const long long kk = (long long){o[1]} % {kg};",
            f"for (long long c = 0; c < {cg}; ++c) {{",
        ]
        xi, wi = [o[0], f"(grp * {cg} + c)"], [f"(grp * {cg} + c)", "kk"]
        for d in range(nd):
            pad = "    " * (d + 1)
            lines += [
                f"{pad}for (long long k{d} = 0; k{d} < {w.lens[2 + d]}; ++k{d}) {{",
                f"{pad}    const long long s{d} = (long long){o[2 + d]} + {pb[d]} - k{d} * {dl[d]};",
                f"{pad}    if (s{d} < 0 || s{d} % {st[d]} != 0 || s{d} / {st[d]} >= {x.lens[2 + d]}) continue;",
            ]
            xi.append(f"(s{d} / {st[d]})")
            wi.append(f"k{d}")
        pad = "    " * (nd + 1)
        lines.append(
            f"{pad}acc += ({acc})migx::load(p0, {offset_expr(xi, x.strides)}) * "
            f"({acc})migx::load(p1, {offset_expr(wi, w.strides)});"
        )
        lines += ["    " * d + "}" for d in range(nd, -1, -1)]
        lines.append(_store(2, out, o, "acc"))
        return lines

    return output_grid_kernel("conv_transpose", shapes, lines_fn)


GENERATORS: dict[str, RequestGenerator] = {
    "gathernd": lambda r: gathernd_kernel(r.inner, r.shapes),
    "scatter": lambda r: scatter_kernel(r.inner, r.shapes),
    "scatternd": lambda r: scatternd_kernel(r.inner, r.shapes),
    "prefix_scan_sum": lambda r: scan_kernel(r.inner, r.shapes),
    "topk": lambda r: topk_kernel(r.inner, r.shapes),
    "onehot": lambda r: onehot_kernel(r.inner, r.shapes),
    "nonzero": lambda r: nonzero_kernel(r.inner, r.shapes),
    "lrn": lambda r: lrn_kernel(r.inner, r.shapes),
    "int_dot": lambda r: int_dot_kernel(r.inner, r.shapes),
    "convolution_backwards": lambda r: deconv_kernel(r.inner, r.shapes),
}
