"""Single-pass top-k by radix select: one block per slice finds the k-th best value's 32-bit key
in four 8-bit histogram passes, gathers the k winners in index order, and ranks them among
themselves (issue 28: YOLOv10n's k = 300 over 8,400 anchors took three rank-counting launches
of 27 to 67 µs; this is one launch of a few µs).

Keys: each value, read as float, maps to an unsigned integer whose order is the value order
(sign bit flipped for positives, all bits for negatives); NaN is read as +inf first and -0 as
+0, so NaN ties with +inf and -0 with +0 exactly as in the reference (compiler/ops/data.py's
stable argsort with NaN as the largest value). For `largest=False` the key is complemented, so
the kernel always takes the k largest keys. Ties keep the lower index: the winners equal to the
threshold key are the first ones in index order, and the final rank breaks ties by index.

Used for float slices of at least RADIX_MIN_N elements and k <= RADIX_MAX_K (the winners live
in shared memory); the rank-counting kernel in indexing.py takes the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...compiler.op import Op
from ...compiler.ops.common import norm_axis
from ...compiler.shape import Shape
from .common import KernelSource, decompose, index_type, kernel_params, offset_expr, source

THREADS = 1024  # one block per slice (a multiple of 64: full AMD waves)
RADIX_MIN_N = 512  # shorter slices: the rank-counting kernel is already a single short pass
RADIX_MAX_K = 2048  # winners' keys and indices in shared memory: 16 KiB
FLOAT_TYPES = ("float32", "float16", "bfloat16")


def radix_topk_applies(op: Op, shapes: Sequence[Shape]) -> bool:
    x = shapes[0]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    return x.type in FLOAT_TYPES and n >= RADIX_MIN_N and 0 < k <= RADIX_MAX_K and x.elements() > 0


_HELPERS = """
MIGX_DEVICE unsigned int migx_topk_key(float f) {
    if (f != f) f = __int_as_float(0x7f800000);  // NaN ranks as +inf (ties with it by index)
    if (f == 0.0f) f = 0.0f;                     // -0 equals +0
    const unsigned int u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Inclusive suffix sums of a[0..len) in place, len <= blockDim.x (Hillis-Steele); every thread of
// the block calls it.
MIGX_DEVICE void migx_suffix_sum(unsigned int* a, int len) {
    for (int off = 1; off < len; off <<= 1) {
        unsigned int v = 0;
        const int t = threadIdx.x;
        if (t < len && t + off < len) v = a[t + off];
        __syncthreads();
        if (t < len) a[t] += v;
        __syncthreads();
    }
}

// Exclusive prefix sums of a[0..len) in place, len <= blockDim.x.
MIGX_DEVICE void migx_prefix_sum(unsigned int* a, int len) {
    const int t = threadIdx.x;
    const unsigned int own = t < len ? a[t] : 0u;
    for (int off = 1; off < len; off <<= 1) {
        unsigned int v = 0;
        if (t < len && t >= off) v = a[t - off];
        __syncthreads();
        if (t < len) a[t] += v;
        __syncthreads();
    }
    if (t < len) a[t] -= own;
    __syncthreads();
}
"""


def radix_topk_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    x, vals, idx = shapes[0], shapes[1], shapes[2]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    it = index_type(shapes)
    dims = [d for d in range(x.ndim) if d != axis]
    nslices = x.elements() // n
    chunk = (n + THREADS - 1) // THREADS
    flip = "" if op["largest"] else "~"
    lines = decompose("slice", [x.lens[d] for d in dims] or [1], it, "s")
    coords = [f"s{j}" for j in range(len(dims))]
    for p, s in ((0, x), (1, vals), (2, idx)):
        lines.append(f"const {it} base{p} = {offset_expr(coords, [s.strides[d] for d in dims]) if dims else '0'};")
    key = f"{flip}migx_topk_key((float)migx::load(p0, base0 + (j) * {x.strides[axis]}))"
    lines += [
        f"#define MIGX_KEY(j) ({key})",
        "__shared__ unsigned int hist[256];",
        f"__shared__ unsigned int gt_off[{THREADS}], eq_off[{THREADS}];",
        f"__shared__ unsigned int ckey[{k}];",
        f"__shared__ int cidx[{k}];",
        "__shared__ unsigned int s_prefix, s_want;",
        "const int t = threadIdx.x;",
        # 1. radix select: the k-th largest key, 8 bits a pass from the top
        f"unsigned int prefix = 0u, mask = 0u, want = {k}u;",
        "for (int shift = 24; shift >= 0; shift -= 8) {",
        "    if (t < 256) hist[t] = 0u;",
        "    __syncthreads();",
        f"    for ({it} j = t; j < {n}; j += {THREADS}) {{",
        "        const unsigned int u = MIGX_KEY(j);",
        "        if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);",
        "    }",
        "    __syncthreads();",
        "    const unsigned int own = t < 256 ? hist[t] : 0u;",
        "    migx_suffix_sum(hist, 256);",
        "    if (t < 256 && hist[t] >= want && hist[t] - own < want) {",
        "        s_prefix = prefix | ((unsigned int)t << shift);",
        "        s_want = want - (hist[t] - own);",
        "    }",
        "    __syncthreads();",
        "    prefix = s_prefix; want = s_want; mask |= 255u << shift;",
        "    __syncthreads();",
        "}",
        # 2. the winners in index order: every key above the threshold, then the first `want`
        #    equal to it; each thread counts a contiguous chunk, a block scan gives the offsets
        f"const {it} lo = (({it})t) * {chunk};",
        f"const {it} hi = lo + {chunk} < {n} ? lo + {chunk} : {n};",
        "unsigned int ngt = 0u, neq = 0u;",
        f"for ({it} j = lo; j < hi; ++j) {{",
        "    const unsigned int u = MIGX_KEY(j); ngt += u > prefix; neq += u == prefix;",
        "}",
        "gt_off[t] = ngt; eq_off[t] = neq;",
        "__syncthreads();",
        f"migx_prefix_sum(gt_off, {THREADS});",
        f"migx_prefix_sum(eq_off, {THREADS});",
        "{",
        "    unsigned int g = gt_off[t], e = eq_off[t];",
        f"    const unsigned int above = {k}u - want;",
        f"    for ({it} j = lo; j < hi; ++j) {{",
        "        const unsigned int u = MIGX_KEY(j);",
        "        if (u > prefix) { ckey[g] = u; cidx[g] = (int)j; ++g; }",
        "        else if (u == prefix) { if (e < want) { ckey[above + e] = u; cidx[above + e] = (int)j; } ++e; }",
        "    }",
        "}",
        "__syncthreads();",
        # 3. each winner's place: winners with a larger key, or an equal key and a lower index
        f"for (int i = t; i < {k}; i += {THREADS}) {{",
        "    const unsigned int u = ckey[i];",
        "    const int ii = cidx[i];",
        "    int rank = 0;",
        f"    for (int j = 0; j < {k}; ++j) rank += ckey[j] > u || (ckey[j] == u && cidx[j] < ii);",
        f"    migx::store(p1, base1 + rank * {vals.strides[axis]}, migx::load(p0, base0 + ii * {x.strides[axis]}));",
        f"    migx::store(p2, base2 + rank * {idx.strides[axis]}, (long long)ii);",
        "}",
        "#undef MIGX_KEY",
    ]
    body = "\n    ".join(lines)
    name = f"topk_radix_{'largest' if op['largest'] else 'smallest'}_kernel"
    src = f"""{_HELPERS}
MIGX_GLOBAL void {name}({kernel_params(shapes, [False, True, True])}) {{
    const {it} slice = blockIdx.x;
    {body}
}}"""
    return KernelSource(name, source(src), nslices * THREADS, THREADS)
