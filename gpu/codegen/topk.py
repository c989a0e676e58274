"""Single-pass top-k by radix select: one block per slice finds the k-th best value's 32-bit key
in up to four 8-bit histogram passes, gathers the k winners, and sorts them with a bitonic
network (issue 28: YOLOv10n's k = 300 over 8,400 anchors took three rank-counting launches of
27 to 67 µs; this is one launch of 16 µs on an H200, docs/results/issue28_topk_radix_h200.md).

Keys: each value, read as float, maps to an unsigned integer whose order is the value order
(sign bit flipped for positives, all bits for negatives); NaN is read as +inf first and -0 as
+0, so NaN ties with +inf and -0 with +0 exactly as in the reference (compiler/ops/data.py's
stable argsort with NaN as the largest value). For `largest=False` the key is complemented, so
the kernel always takes the k largest keys. Ties keep the lower index: the winners equal to the
threshold key are the first ones in index order, and the sort key is (key, ~index), so equal
keys sort by lower index first.

The passes stop early once the bin holding the k-th key holds exactly the winners still wanted
(every candidate left is taken, so no finer digit is needed; random scores stop after two or
three passes). The keys are computed once into shared memory when they fit beside the winners
(n <= ~10,000 for k = 300), so the passes read no global memory; longer slices recompute them
from global memory in each pass, and the GPU pipeline splits those (rewrite_topk with
SPLIT_THRESHOLD) so that each stage fits. Used for float slices of at least RADIX_MIN_N
elements and k <= RADIX_MAX_K (the winners live in shared memory); the rank-counting kernel in
indexing.py takes the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.common import norm_axis
from migx_explore.compiler.shape import Shape

from .common import KernelSource, decompose, index_type, kernel_params, offset_expr, source

MAX_THREADS = 1024  # one block per slice
RADIX_MIN_N = 512  # shorter slices: the rank-counting kernel is already a single short pass
RADIX_MAX_K = 2048  # winners as 64-bit sort keys in shared memory: 16 KiB
FLOAT_TYPES = ("float32", "float16", "bfloat16")
SHARED_BYTES = 46 * 1024  # static shared memory a block may use (48 KiB, less a margin)
SHARED_RESERVE = 2 * 1024  # the histogram, the scan slots and the broadcast values
# rewrite_topk's split_threshold in the GPU pipeline: a slice up to this long keeps its keys in
# shared memory (k = 300) and is one launch; a longer one is split into groups that do.
SPLIT_THRESHOLD = 10240


def radix_topk_applies(op: Op, shapes: Sequence[Shape]) -> bool:
    x = shapes[0]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    return x.type in FLOAT_TYPES and n >= RADIX_MIN_N and 0 < k <= RADIX_MAX_K and x.elements() > 0


def sort_width(k: int) -> int:
    """The bitonic network's width: a power of two >= k, at least a 32-lane warp."""
    p = 32
    while p < k:
        p *= 2
    return p


def block_threads(n: int, k: int) -> int:
    """Enough threads for about four keys each, and one per sorted element up to 1,024 (a
    multiple of 64: full AMD waves). Fewer warps make each block barrier cheaper."""
    want = max(-(-n // 4), min(sort_width(k), MAX_THREADS))
    return min(MAX_THREADS, -(-want // 64) * 64)


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

// hist[bin] += 1 for this lane's bin (bin >= 256: none). Every lane of the warp calls it (the
// callers' loops have the same trip count in every thread). Scores share their top bits and
// same-address shared atomics serialise, so the lanes sharing the first valid lane's bin add
// once through it; the others add one each (later digits spread over the bins).
MIGX_DEVICE void migx_hist_add(unsigned int* hist, unsigned int bin) {
#if defined(MIGX_CUDA)
    const unsigned int valid = __ballot_sync(0xffffffffu, bin < 256u);
    if (valid == 0u) return;
    const int leader = __ffs(valid) - 1;
    const unsigned int lead = __shfl_sync(0xffffffffu, bin, leader);
    const unsigned int same = __ballot_sync(0xffffffffu, bin == lead);
    if (bin == lead) {
        if ((int)(threadIdx.x % 32) == leader) atomicAdd(&hist[bin], (unsigned int)__popc(same));
    } else if (bin < 256u) {
        atomicAdd(&hist[bin], 1u);
    }
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

MIGX_DEVICE unsigned long long migx_shfl_xor_u64(unsigned long long v, int m) {
    const unsigned int lo = MIGX_SHFL_XOR((unsigned int)v, m), hi = MIGX_SHFL_XOR((unsigned int)(v >> 32), m);
    return ((unsigned long long)hi << 32) | lo;
}

// One compare-exchange of a descending bitonic sort: element i of a run of `size` against its
// partner i ^ stride; the lower of the two keeps the larger value in descending runs.
MIGX_DEVICE unsigned long long migx_bitonic_pick(unsigned long long v, unsigned long long o, int i, int size,
                                                 int stride) {
    const bool keep_max = ((i & stride) == 0) == ((i & size) == 0);
    return keep_max ? (v > o ? v : o) : (v < o ? v : o);
}
"""


def _key_source(key: str, n: int, shared_sort: int, threads: int, it: str) -> list[str]:
    """MIGX_KEY(j): the slice's keys computed once into shared memory when they fit beside the
    winners (every pass then reads shared memory, not global), else recomputed from global. The
    load also counts the top digit's histogram (FIRST_DONE: the first pass is already made)."""
    if 4 * n + shared_sort + SHARED_RESERVE > SHARED_BYTES:
        return [f"#define MIGX_KEY(j) ({key})", "constexpr bool FIRST_DONE = false;"]
    return [
        f"__shared__ unsigned int keys_s[{n}];",
        "constexpr bool FIRST_DONE = true;",
        "for (int b = t; b < 256; b += blockDim.x) hist[b] = 0u;",
        "__syncthreads();",
        "#pragma unroll 4",  # independent global loads in flight together
        f"for ({it} j0 = 0; j0 < {n}; j0 += {threads}) {{",  # the same trip count in every lane
        f"    const {it} j = j0 + t;",
        "    unsigned int bin = 256u;",
        f"    if (j < {n}) {{ const unsigned int u = {key}; keys_s[j] = u; bin = u >> 24; }}",
        "    migx_hist_add(hist, bin);",
        "}",
        "__syncthreads();",
        "#define MIGX_KEY(j) (keys_s[(j)])",
    ]


def _select(n: int, threads: int, it: str) -> list[str]:
    """Radix select from the top digit: `prefix` under `mask` is the k-th key's top bits, `want`
    how many winners equal to it under the mask are still wanted."""
    return [
        "unsigned int prefix = 0u, mask = 0u, want = (unsigned int)K;",
        "for (int shift = 24; shift >= 0; shift -= 8) {",
        "    if (shift < 24 || !FIRST_DONE) {",
        "        for (int b = t; b < 256; b += blockDim.x) hist[b] = 0u;",
        "        __syncthreads();",
        f"        for ({it} j0 = 0; j0 < {n}; j0 += {threads}) {{",  # the same trip count in every lane
        f"            const {it} j = j0 + t;",
        "            unsigned int bin = 256u;",
        f"            if (j < {n}) {{",
        "                const unsigned int u = MIGX_KEY(j);",
        "                if ((u & mask) == prefix) bin = (u >> shift) & 255u;",
        "            }",
        "            migx_hist_add(hist, bin);",
        "        }",
        "        __syncthreads();",
        "    }",
        # the digit: one warp scans the bins from the top, each lane a run of them in registers
        "    if (t < MIGX_WARP_SIZE) {",
        "        constexpr int per = 256 / MIGX_WARP_SIZE;",
        "        const int top = 255 - t * per;",
        "        unsigned int h[per], own = 0u;",
        "#pragma unroll",
        "        for (int b = 0; b < per; ++b) { h[b] = hist[top - b]; own += h[b]; }",
        "        const unsigned int upto = migx_warp_inclusive_sum(own);",
        "        if (upto >= want && upto - own < want) {",
        "            unsigned int acc = upto - own, count = 0u;",
        "            int sel = 0;",
        "            bool found = false;",
        "#pragma unroll",
        "            for (int b = 0; b < per; ++b) {",
        "                if (found) continue;",
        "                if (acc + h[b] >= want) { found = true; sel = b; count = h[b]; }",
        "                else acc += h[b];",
        "            }",
        "            s_prefix = prefix | ((unsigned int)(top - sel) << shift);",
        "            s_want = want - acc;",
        "            s_count = count;",
        "        }",
        "    }",
        "    __syncthreads();",
        "    prefix = s_prefix; want = s_want; mask |= 255u << shift;",
        "    if (s_count == want) break;  // the bin holds exactly the winners left: all of them win",
        "}",
    ]


def _gather(n: int, threads: int, it: str) -> list[str]:
    """The winners into win[0, K) as (key << 32 | ~index): every key above the threshold, then the
    first `want` equal to it in index order. Each thread takes a contiguous chunk; a block scan
    gives each thread its offsets."""
    chunk = (n + threads - 1) // threads
    return [
        f"const {it} lo = (({it})t) * {chunk};",
        f"const {it} hi = lo + {chunk} < {n} ? lo + {chunk} : {n};",
        "unsigned int g = 0u, e = 0u;",
        f"for ({it} j = lo; j < hi; ++j) {{",
        "    const unsigned int u = MIGX_KEY(j) & mask; g += u > prefix; e += u == prefix;",
        "}",
        "migx_block_exclusive_sum2(g, e, slots);",
        "{",
        "    const unsigned int above = (unsigned int)K - want;",
        f"    for ({it} j = lo; j < hi; ++j) {{",
        "        const unsigned int u = MIGX_KEY(j), m = u & mask;",
        "        const unsigned long long w = ((unsigned long long)u << 32) | (unsigned int)~(unsigned int)j;",
        "        if (m > prefix) win[g++] = w;",
        "        else if (m == prefix) { if (e < want) win[above + e] = w; ++e; }",
        "    }",
        "}",
        # keys are never 0 (that would be a NaN's bits, read as +inf): the padding sorts last
        "for (int i = (int)K + t; i < P; i += blockDim.x) win[i] = 0ull;",
    ]


def _sort(width: int, threads: int) -> list[str]:
    """Descending bitonic sort of win[0, P): each thread holds elements t, t + threads, ...; steps
    with a stride below 32 exchange through warp shuffles, longer ones through shared memory."""
    per = (width + threads - 1) // threads
    guard = f"if (t < {width}) " if width < threads else ""
    return [
        f"unsigned long long v[{per}];",
        "__syncthreads();",
        f"#pragma unroll\nfor (int e = 0; e < {per}; ++e) {guard}v[e] = win[t + e * {threads}];",
        "for (int size = 2; size <= P; size <<= 1) {",
        "    for (int stride = size >> 1; stride > 0; stride >>= 1) {",
        "        if (stride >= 32) {",
        "            __syncthreads();",  # every read of the last shared step is done
        f"#pragma unroll\n            for (int e = 0; e < {per}; ++e) {guard}win[t + e * {threads}] = v[e];",
        "            __syncthreads();",
        f"#pragma unroll\n            for (int e = 0; e < {per}; ++e) {guard}{{",
        f"                const int i = t + e * {threads};",
        "                v[e] = migx_bitonic_pick(v[e], win[i ^ stride], i, size, stride);",
        "            }",
        "        } else {",
        f"#pragma unroll\n            for (int e = 0; e < {per}; ++e) {guard}{{",
        f"                const int i = t + e * {threads};",
        "                v[e] = migx_bitonic_pick(v[e], migx_shfl_xor_u64(v[e], stride), i, size, stride);",
        "            }",
        "        }",
        "    }",
        "}",
    ]


def radix_topk_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    x, vals, idx = shapes[0], shapes[1], shapes[2]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    it = index_type(shapes)
    dims = [d for d in range(x.ndim) if d != axis]
    nslices = x.elements() // n
    width = sort_width(k)
    threads = block_threads(n, k)
    per = (width + threads - 1) // threads
    flip = "" if op["largest"] else "~"
    lines = decompose("slice", [x.lens[d] for d in dims] or [1], it, "s")
    coords = [f"s{j}" for j in range(len(dims))]
    for p, s in ((0, x), (1, vals), (2, idx)):
        lines.append(f"const {it} base{p} = {offset_expr(coords, [s.strides[d] for d in dims]) if dims else '0'};")
    key = f"{flip}migx_topk_key((float)migx::load(p0, base0 + (j) * {x.strides[axis]}))"
    lines += [
        f"constexpr int K = {k}, P = {width};",
        "const int t = threadIdx.x;",
        "__shared__ unsigned int hist[256];",
        *_key_source(key, n, 8 * width, threads, it),
        f"__shared__ unsigned int slots[2 * {threads} / MIGX_WARP_SIZE];",
        "__shared__ unsigned long long win[P];",
        "__shared__ unsigned int s_prefix, s_want, s_count;",
        *_select(n, threads, it),
        *_gather(n, threads, it),
        *_sort(width, threads),
        # element i of the sorted run is output i; its index is the low word's complement
        f"#pragma unroll\nfor (int e = 0; e < {per}; ++e) {{",
        f"    const int i = t + e * {threads};",
        "    if (i < K) {",
        "        const int j = (int)~(unsigned int)v[e];",
        f"        migx::store(p1, base1 + i * {vals.strides[axis]}, migx::load(p0, base0 + j * {x.strides[axis]}));",
        f"        migx::store(p2, base2 + i * {idx.strides[axis]}, (long long)j);",
        "    }",
        "}",
        "#undef MIGX_KEY",
    ]
    body = "\n    ".join(lines)
    name = f"topk_radix_{'largest' if op['largest'] else 'smallest'}_kernel"
    src = f"""{_HELPERS}
MIGX_GLOBAL void {name}({kernel_params(shapes, [False, True, True])}) {{
    migx::kernel_entry();
    const {it} slice = blockIdx.x;
    {body}
}}"""
    return KernelSource(name, source(src), nslices * threads, threads)
