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

The keys are computed once into shared memory when they fit beside the winners (n <= ~9,000
for k = 300), so the passes read no global memory. Used for float slices of at least RADIX_MIN_N
elements and k <= RADIX_MAX_K (the winners live in shared memory); the rank-counting kernel in
indexing.py takes the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.common import norm_axis
from migx_explore.compiler.shape import Shape

from .common import KernelSource, decompose, index_type, kernel_params, offset_expr, source

THREADS = 1024  # one block per slice (a multiple of 64: full AMD waves)
RADIX_MIN_N = 512  # shorter slices: the rank-counting kernel is already a single short pass
RADIX_MAX_K = 2048  # winners' keys and indices in shared memory: 16 KiB
FLOAT_TYPES = ("float32", "float16", "bfloat16")
SHARED_BYTES = 46 * 1024  # static shared memory a block may use (48 KiB, less a margin)
SHARED_RESERVE = 2 * 1024  # the histogram, the scan slots and the broadcast values


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

MIGX_DEVICE unsigned int migx_shfl_up_u(unsigned int v, int d) {
#if defined(MIGX_CUDA)
    return __shfl_up_sync(0xffffffffu, v, d, MIGX_WARP_SIZE);
#else
    return __shfl_up(v, d, MIGX_WARP_SIZE);
#endif
}

// Inclusive sum over the lanes up to this one.
MIGX_DEVICE unsigned int migx_warp_inclusive_sum(unsigned int x) {
    const int lane = threadIdx.x % MIGX_WARP_SIZE;
#pragma unroll
    for (int d = 1; d < MIGX_WARP_SIZE; d <<= 1) {
        const unsigned int y = migx_shfl_up_u(x, d);
        if (lane >= d) x += y;
    }
    return x;
}

// hist[bin] += 1 for this lane's bin (bin >= 256: none). Lanes of a warp sharing a bin add once
// (sorted scores share their top bits, and same-address shared atomics serialise).
MIGX_DEVICE void migx_hist_add(unsigned int* hist, unsigned int bin) {
#if defined(MIGX_CUDA)
    const unsigned int peers = __match_any_sync(__activemask(), bin);
    if (bin < 256u && (int)(threadIdx.x % 32) == __ffs(peers) - 1) atomicAdd(&hist[bin], (unsigned int)__popc(peers));
#else
    if (bin < 256u) atomicAdd(&hist[bin], 1u);
#endif
}

// Exclusive block-wide prefix sums of two per-thread counts (thread order), with their totals;
// `slots` holds 2 x warps entries. Every thread of the block calls it.
MIGX_DEVICE void migx_block_exclusive_sum2(unsigned int& a, unsigned int& b, unsigned int* slots) {
    const int lane = threadIdx.x % MIGX_WARP_SIZE, warp = threadIdx.x / MIGX_WARP_SIZE;
    const int warps = blockDim.x / MIGX_WARP_SIZE;
    const unsigned int ia = migx_warp_inclusive_sum(a), ib = migx_warp_inclusive_sum(b);
    if (lane == MIGX_WARP_SIZE - 1) { slots[warp] = ia; slots[warps + warp] = ib; }
    __syncthreads();
    if (warp == 0) {
        const unsigned int sa = migx_warp_inclusive_sum(lane < warps ? slots[lane] : 0u);
        const unsigned int sb = migx_warp_inclusive_sum(lane < warps ? slots[warps + lane] : 0u);
        if (lane < warps) { slots[lane] = sa; slots[warps + lane] = sb; }
    }
    __syncthreads();
    a = (warp ? slots[warp - 1] : 0u) + ia - a;
    b = (warp ? slots[warps + warp - 1] : 0u) + ib - b;
}
"""


def _key_source(key: str, n: int, k: int, it: str) -> list[str]:
    """MIGX_KEY(j): the slice's keys computed once into shared memory when they fit beside the
    winners (every pass then reads shared memory, not global), else recomputed from global."""
    if 4 * n + 8 * k + SHARED_RESERVE > SHARED_BYTES:
        return [f"#define MIGX_KEY(j) ({key})"]
    return [
        f"__shared__ unsigned int keys_s[{n}];",
        f"for ({it} j = threadIdx.x; j < {n}; j += {THREADS}) keys_s[j] = {key};",
        "__syncthreads();",
        "#define MIGX_KEY(j) (keys_s[(j)])",
    ]


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
        *_key_source(key, n, k, it),
        "__shared__ unsigned int hist[256];",
        f"__shared__ unsigned int slots[2 * {THREADS} / MIGX_WARP_SIZE];",
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
        "        migx_hist_add(hist, (u & mask) == prefix ? (u >> shift) & 255u : 256u);",
        "    }",
        "    __syncthreads();",
        # the digit: one warp scans the bins from the top, each lane a run of them
        "    if (t < MIGX_WARP_SIZE) {",
        "        const int per = 256 / MIGX_WARP_SIZE, top = 255 - t * per;",
        "        unsigned int own = 0u;",
        "        for (int b = 0; b < per; ++b) own += hist[top - b];",
        "        const unsigned int upto = migx_warp_inclusive_sum(own);",
        "        if (upto >= want && upto - own < want) {",
        "            unsigned int acc = upto - own;",
        "            int b = top;",
        "            while (acc + hist[b] < want) acc += hist[b--];",
        "            s_prefix = prefix | ((unsigned int)b << shift);",
        "            s_want = want - acc;",
        "        }",
        "    }",
        "    __syncthreads();",
        "    prefix = s_prefix; want = s_want; mask |= 255u << shift;",
        "}",
        # 2. the winners in index order: every key above the threshold, then the first `want`
        #    equal to it; each thread counts a contiguous chunk, a block scan gives the offsets
        f"const {it} lo = (({it})t) * {chunk};",
        f"const {it} hi = lo + {chunk} < {n} ? lo + {chunk} : {n};",
        "unsigned int g = 0u, e = 0u;",
        f"for ({it} j = lo; j < hi; ++j) {{",
        "    const unsigned int u = MIGX_KEY(j); g += u > prefix; e += u == prefix;",
        "}",
        "migx_block_exclusive_sum2(g, e, slots);",
        "{",
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
        "#pragma unroll 8",  # independent shared loads: let them overlap
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
