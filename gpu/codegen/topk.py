"""Single-launch top-k by radix select (issue 28: YOLOv10n's k = 300 over 8,400 anchors took three
rank-counting launches of 27 to 67 µs; docs/results/issue28_topk_radix_h200.md).

A block finds the k-th best value's 32-bit key in up to four 8-bit histogram passes, gathers the
k winners and sorts them. A slice of up to ~10,000 keys is one block (its keys in shared memory).
A longer one is spread over `parts` blocks (radix_plan): each selects its chunk's k best into a
workspace, and the block that finishes last, counted by an atomic ticket per slice, selects the
k best of those candidates and sorts them. The lowering gives such an op two extra buffers
(topk_workspace): the ticket, a zero literal (its own memory, set once at finalize; the last block
sets it back to 0, so every eager run and graph replay finds it at 0), and the candidates, an
allocation memory_coloring places in the arena (written before read in each launch).

Keys: each value, read as float, maps to an unsigned integer whose order is the value order
(sign bit flipped for positives, all bits for negatives); NaN is read as +inf first and -0 as
+0, so NaN ties with +inf and -0 with +0 exactly as in the reference (compiler/ops/data.py's
stable argsort with NaN as the largest value). For `largest=False` the key is complemented, so
the kernel always takes the k largest keys. Ties keep the lower index: the winners equal to the
threshold key are the first ones in index order (a part's candidates are in index order for
every key value, and parts are in index order), and the sort key is (key << 32 | ~index), so
equal keys sort by lower index first.

The passes stop early once the bin holding the k-th key holds exactly the winners still wanted
(every candidate left is taken; random scores stop after two or three passes). The winners are
sorted by rank: each warp sorts a run of 32 in shuffles, and an element's output position is
the count of larger elements over the runs (a binary search in each), instead of a bitonic
network over all of them (45 dependent steps for 300 winners); k > 512 keeps the network. Used
for float slices of at least RADIX_MIN_N elements and k <= RADIX_MAX_K; the rank-counting kernel
in indexing.py takes the rest. Slices whose keys fit neither plan read their keys from global
memory in every pass; the GPU pipeline splits those (rewrite_topk with SPLIT_THRESHOLD).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.common import norm_axis
from migx_explore.compiler.shape import Shape

from .common import KernelSource, decompose, index_type, kernel_params, offset_expr, source

MAX_THREADS = 1024
RADIX_MIN_N = 512  # shorter slices: the rank-counting kernel is already a single short pass
RADIX_MAX_K = 2048  # winners as 64-bit sort keys in shared memory: 16 KiB
RUN_SORT_MAX = 512  # sort widths up to this rank 32-element runs; wider ones take the bitonic network
FLOAT_TYPES = ("float32", "float16", "bfloat16")
SHARED_BYTES = 46 * 1024  # static shared memory a block may use (48 KiB, less a margin)
SHARED_RESERVE = 2 * 1024  # the histogram, the scan slots and the broadcast values
# rewrite_topk's split_threshold in the GPU pipeline: a slice up to this long keeps its keys in
# shared memory (k = 300) and is one launch; a longer one is split into groups that do.
SPLIT_THRESHOLD = 10240
# A slice longer than SPREAD_MIN_N is spread over blocks of about CHUNK keys each (more where
# the candidates would not fit one block); MIGX_TOPK_CHUNK=0 keeps one block per slice.
CHUNK = 2048
SPREAD_MIN_N = 4096


def radix_topk_applies(op: Op, shapes: Sequence[Shape]) -> bool:
    x = shapes[0]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    return x.type in FLOAT_TYPES and n >= RADIX_MIN_N and 0 < k <= RADIX_MAX_K and x.elements() > 0


def sort_width(k: int) -> int:
    """The sorted run's width: a power of two >= k, at least a 32-lane warp."""
    p = 32
    while p < k:
        p *= 2
    return p


def block_threads(n: int, k: int) -> int:
    """Enough threads for about four keys each, and one per sorted element up to 1,024 (a
    multiple of 64: full AMD waves). Fewer warps make each block barrier cheaper."""
    want = max(-(-n // 4), min(sort_width(k), MAX_THREADS))
    return min(MAX_THREADS, -(-want // 64) * 64)


@dataclass(frozen=True)
class RadixPlan:
    parts: int  # blocks per slice
    chunk: int  # keys per block (the last block of a slice may have fewer)
    threads: int
    width: int  # sort_width(k)
    keys_shared: bool  # the keys live in shared memory (else read from global in every pass)
    pool: int  # 64-bit words of shared memory for the keys / candidates / ranks


def _fits(width: int, pool: int) -> bool:
    return 8 * width + 8 * pool + SHARED_RESERVE <= SHARED_BYTES


def radix_plan(n: int, k: int, spread: bool = True) -> RadixPlan:
    """How the radix kernel covers a slice of n keys (environment knobs read per call, so a
    benchmark can compare plans in one process: MIGX_TOPK_CHUNK, MIGX_TOPK_SPREAD_MIN)."""
    width = sort_width(k)
    chunk0 = int(os.environ.get("MIGX_TOPK_CHUNK", CHUNK))
    if spread and chunk0 > 0 and n > int(os.environ.get("MIGX_TOPK_SPREAD_MIN", SPREAD_MIN_N)):
        for target in (chunk0, 2 * chunk0, 4 * chunk0):
            parts = -(-n // target)
            chunk = -(-n // parts)
            if parts < 2 or chunk < 2 * k:
                break
            pool = max(-(-chunk // 2), parts * k, width // 2)
            if _fits(width, pool):
                want = max(-(-max(chunk, parts * k) // 2), 64)
                threads = min(MAX_THREADS, -(-want // 64) * 64)
                return RadixPlan(parts, chunk, threads, width, True, pool)
    pool = max(-(-n // 2), width // 2)
    shared = _fits(width, pool)
    return RadixPlan(1, n, block_threads(n, k), width, shared, pool if shared else max(width // 2, 1))


def one_launch(n: int, k: int, t: str) -> bool:
    """rewrite_topk's keep_whole in the GPU pipeline: a slice spread over several blocks whose
    keys and candidates fit shared memory is one launch; splitting it would add launches."""
    plan = radix_plan(n, k)
    return t in FLOAT_TYPES and plan.parts > 1 and n >= RADIX_MIN_N and 0 < k <= RADIX_MAX_K


def topk_workspace(op: Op, x: Shape) -> tuple[Shape, Shape] | None:
    """The (ticket, candidates) buffers a topk spread over several blocks per slice needs, or
    None when one block per slice does it."""
    if not radix_topk_applies(op, [x]):
        return None
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    plan = radix_plan(n, k)
    if plan.parts == 1:
        return None
    nslices = x.elements() // n
    return Shape("uint32", [nslices]), Shape("uint64", [nslices * plan.parts * k])


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


def _key_load(key: str, count: str, shared: bool) -> list[str]:
    """MIGX_KEY(j), the key of this block's element j: computed once into shared memory when the
    keys fit (every pass then reads shared memory, not global), else recomputed from global. The
    shared load also counts the top digit's histogram (first_done: the first pass is made)."""
    if not shared:
        return [f"#define MIGX_KEY(j) ({key})", "bool first_done = false;"]
    return [
        "unsigned int* keys_s = (unsigned int*)pool_s;",
        "bool first_done = true;",
        "for (int b = t; b < 256; b += blockDim.x) hist[b] = 0u;",
        "__syncthreads();",
        "#pragma unroll 4",  # independent global loads in flight together
        f"for (int j0 = 0; j0 < {count}; j0 += blockDim.x) {{",  # the same trip count in every lane
        "    const int j = j0 + t;",
        "    unsigned int bin = 256u;",
        f"    if (j < {count}) {{ const unsigned int u = {key}; keys_s[j] = u; bin = u >> 24; }}",
        "    migx_hist_add(hist, bin);",
        "}",
        "__syncthreads();",
        "#define MIGX_KEY(j) (keys_s[(j)])",
    ]


def _select(count: str) -> list[str]:
    """Radix select from the top digit among MIGX_KEY(0 .. count): `prefix` under `mask` is the
    `want0`-th key's top bits, `want` how many winners equal to it under the mask are still
    wanted. Every key wins when want0 == count (prefix and mask stay 0)."""
    return [
        "unsigned int prefix = 0u, mask = 0u, want = want0;",
        f"for (int shift = 24; shift >= 0 && want0 < (unsigned int)({count}); shift -= 8) {{",
        "    if (shift < 24 || !first_done) {",
        "        for (int b = t; b < 256; b += blockDim.x) hist[b] = 0u;",
        "        __syncthreads();",
        f"        for (int j0 = 0; j0 < {count}; j0 += blockDim.x) {{",  # the same trip count in every lane
        "            const int j = j0 + t;",
        "            unsigned int bin = 256u;",
        f"            if (j < {count}) {{",
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


def _gather(count: str) -> list[str]:
    """The want0 winners through MIGX_PUT(position, MIGX_WIN(j, key)): every key above the
    threshold in element order, then the first `want` equal to it in element order (ties keep
    the lower index). Each thread takes a contiguous run; a block scan gives its offsets."""
    return [
        f"const int per_t = ({count} + (int)blockDim.x - 1) / (int)blockDim.x;",
        f"const int lo = t * per_t, hi = lo + per_t < ({count}) ? lo + per_t : ({count});",
        "unsigned int g = 0u, e = 0u;",
        "for (int j = lo; j < hi; ++j) {",
        "    const unsigned int u = MIGX_KEY(j) & mask; g += u > prefix; e += u == prefix;",
        "}",
        "migx_block_exclusive_sum2(g, e, slots);",
        "const unsigned int above = want0 - want;",
        "for (int j = lo; j < hi; ++j) {",
        "    const unsigned int u = MIGX_KEY(j), m = u & mask;",
        "    if (m > prefix) { MIGX_PUT(g, MIGX_WIN(j, u)); ++g; }",
        "    else if (m == prefix) { if (e < want) { MIGX_PUT(above + e, MIGX_WIN(j, u)); } ++e; }",
        "}",
    ]


def _merge(parts: int, k: int, slot: str) -> list[str]:
    """Spread slices: this block's winners are in the workspace; the block that finishes last
    (an atomic ticket per slice) selects the k best of all parts' candidates and goes on to the
    sort; the others exit. It sets the ticket back to 0 first (every part has counted), so the
    next run, eager or a graph replay, starts from 0 again."""
    m = parts * k
    return [
        "__threadfence();",  # the candidates are visible device-wide before the ticket counts them
        "__syncthreads();",
        f"if (t == 0) s_last = atomicAdd(&ticket[slice], 1u) == {parts - 1}u;",
        "__syncthreads();",
        "if (!s_last) return;",
        "__threadfence();",
        "if (t == 0) ticket[slice] = 0u;",
        "unsigned long long* cand = pool_s;",  # this block's keys are no longer read
        # volatile: read the other blocks' candidates from L2, never a stale L1 line
        f"for (int j = t; j < {m}; j += blockDim.x) cand[j] = ((volatile unsigned long long*)ws)[{slot} + j];",
        "__syncthreads();",
        "#undef MIGX_KEY",
        "#undef MIGX_WIN",
        "#undef MIGX_PUT",
        "#define MIGX_KEY(j) ((unsigned int)(cand[(j)] >> 32))",
        "#define MIGX_WIN(j, u) (cand[(j)])",
        "#define MIGX_PUT(i, w) (win[(i)] = (w))",
        "{",
        "    first_done = false;",
        "    const unsigned int want0 = (unsigned int)K;",
        *("    " + s for s in _select(str(m))),
        *("    " + s for s in _gather(str(m))),
        "}",
    ]


def _run_sort(k: int) -> list[str]:
    """Sort win[0, P) (P <= RUN_SORT_MAX) descending into ranks: each warp sorts a run of 32 by
    a bitonic network in shuffles, then each element's rank is the sum over the runs of how many
    of their elements are larger (a binary search in each run; the keys are distinct, the
    index being part of them), added up in shared memory. Output position = rank. Only the runs
    that hold winners take part (the zero padding past them is smaller than every winner)."""
    runs = -(-k // 32)
    if runs == 1:  # k <= 32: one warp sorts the one run, and lane i holds output i
        return [
            "__syncthreads();",
            "if (t < 32) {",
            "    unsigned long long v = win[t];",
            "#pragma unroll",
            "    for (int size = 2; size <= 32; size <<= 1) {",
            "#pragma unroll",
            "        for (int stride = size >> 1; stride > 0; stride >>= 1)",
            "            v = migx_bitonic_pick(v, migx_shfl_xor_u64(v, stride), t, size, stride);",
            "    }",
            "    if (t < K) MIGX_OUT(t, (int)~(unsigned int)v);",
            "}",
        ]
    return [
        "int* rank_s = (int*)pool_s;",  # the keys and candidates are no longer read
        "__syncthreads();",
        f"for (int r = t / 32; r < {runs}; r += blockDim.x / 32) {{",  # the same trip count in a warp
        "    const int lane = t % 32;",
        "    unsigned long long v = win[r * 32 + lane];",
        "#pragma unroll",
        "    for (int size = 2; size <= 32; size <<= 1) {",
        "#pragma unroll",
        "        for (int stride = size >> 1; stride > 0; stride >>= 1)",
        "            v = migx_bitonic_pick(v, migx_shfl_xor_u64(v, stride), lane, size, stride);",
        "    }",
        "    win[r * 32 + lane] = v;",
        "}",
        f"for (int i = t; i < {runs * 32}; i += blockDim.x) rank_s[i] = 0;",
        "__syncthreads();",
        f"for (int q = t; q < {runs * 32 * runs}; q += blockDim.x) {{",
        f"    const int i = q % {runs * 32};",
        "    const unsigned long long e = win[i];",
        f"    const unsigned long long* run = win + (q / {runs * 32}) * 32;",
        "    int c = run[15] > e ? 16 : 0;",  # run[0, c) > e (the run is descending)
        "    if (run[c + 7] > e) c += 8;",
        "    if (run[c + 3] > e) c += 4;",
        "    if (run[c + 1] > e) c += 2;",
        "    if (run[c] > e) c += 1;",
        "    if (c == 31 && run[31] > e) c = 32;",
        "    if (c) atomicAdd(&rank_s[i], c);",
        "}",
        "__syncthreads();",
        f"for (int i = t; i < {runs * 32}; i += blockDim.x) {{",
        "    const int r = rank_s[i];",
        "    if (r < K) MIGX_OUT(r, (int)~(unsigned int)win[i]);",
        "}",
    ]


def _bitonic_sort(width: int, threads: int) -> list[str]:
    """Descending bitonic sort of win[0, P) for the widest runs: each thread holds elements t,
    t + threads, ...; steps with a stride below 32 exchange through warp shuffles, longer ones
    through shared memory."""
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
        # element i of the sorted run is output i; its index is the low word's complement
        f"#pragma unroll\nfor (int e = 0; e < {per}; ++e) {{",
        f"    const int i = t + e * {threads};",
        "    if (i < K) MIGX_OUT(i, (int)~(unsigned int)v[e]);",
        "}",
    ]


def radix_topk_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """shapes: (x, values, indices), or (x, ticket, workspace, values, indices) when the lowering
    gave the op topk_workspace's buffers (a spread plan)."""
    x, vals, idx = shapes[0], shapes[-2], shapes[-1]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    nslices = x.elements() // n
    plan = radix_plan(n, k)
    if len(shapes) != 5 or shapes[2].elements() != nslices * plan.parts * k:  # no (or another plan's) workspace
        plan = radix_plan(n, k, spread=False)
    parts, threads, width = plan.parts, plan.threads, plan.width
    it = index_type(shapes)
    dims = [d for d in range(x.ndim) if d != axis]
    flip = "" if op["largest"] else "~"
    lines = [f"const {it} slice = blockIdx.x / {parts};" if parts > 1 else f"const {it} slice = blockIdx.x;"]
    lines += decompose("slice", [x.lens[d] for d in dims] or [1], it, "s")
    coords = [f"s{j}" for j in range(len(dims))]
    po, pi = len(shapes) - 2, len(shapes) - 1
    for p, s in ((0, x), (po, vals), (pi, idx)):
        lines.append(f"const {it} base{p} = {offset_expr(coords, [s.strides[d] for d in dims]) if dims else '0'};")
    xs = x.strides[axis]
    start = f"(({it})(blockIdx.x % {parts}) * {plan.chunk})" if parts > 1 else "0"
    count = "cnt" if parts > 1 else str(n)
    key = f"{flip}migx_topk_key((float)migx::load(p0, base0 + ({start} + (j)) * {xs}))"
    lines += [
        f"constexpr int K = {k}, P = {width};",
        "const int t = threadIdx.x;",
        "__shared__ unsigned int hist[256];",
        f"__shared__ unsigned int slots[2 * {threads} / MIGX_WARP_SIZE];",
        "__shared__ unsigned long long win[P];",
        f"__shared__ unsigned long long pool_s[{plan.pool}];",
        "__shared__ unsigned int s_prefix, s_want, s_count;",
        f"#define MIGX_OUT(i, j) {{ migx::store(p{po}, base{po} + (i) * {vals.strides[axis]}, "
        f"migx::load(p0, base0 + (j) * {xs})); "
        f"migx::store(p{pi}, base{pi} + (i) * {idx.strides[axis]}, (long long)(j)); }}",
        "#define MIGX_WIN(j, u) (((unsigned long long)(u) << 32) | (unsigned int)~(unsigned int)(" + start + " + (j)))",
    ]
    if parts > 1:
        slot = f"({it})slice * {parts * k}"
        lines += [
            "__shared__ bool s_last;",
            "unsigned int* ticket = (unsigned int*)p1;",
            "unsigned long long* ws = (unsigned long long*)p2;",
            f"const int cnt = {n} - (int){start} < {plan.chunk} ? {n} - (int){start} : {plan.chunk};",
            f"#define MIGX_PUT(i, w) (ws[{slot} + (blockIdx.x % {parts}) * {k} + (i)] = (w))",
        ]
    else:
        lines.append("#define MIGX_PUT(i, w) (win[(i)] = (w))")
    lines += _key_load(key, count, plan.keys_shared)
    lines += [
        "{",
        f"    const unsigned int want0 = {count} < K ? (unsigned int)({count}) : (unsigned int)K;",
        *("    " + s for s in _select(count)),
        *("    " + s for s in _gather(count)),
        # keys are never 0 (that would be a NaN's bits, read as +inf): the padding sorts last
        f"    for (int i = (int)want0 + t; i < {'K' if parts > 1 else 'P'}; i += blockDim.x) MIGX_PUT(i, 0ull);",
        "}",
    ]
    if parts > 1:
        lines += _merge(parts, k, slot)
        lines.append("for (int i = K + t; i < P; i += blockDim.x) win[i] = 0ull;")
    lines += _run_sort(k) if width <= RUN_SORT_MAX else _bitonic_sort(width, threads)
    lines += ["#undef MIGX_KEY", "#undef MIGX_WIN", "#undef MIGX_PUT", "#undef MIGX_OUT"]
    body = "\n    ".join(lines)
    name = f"topk_radix{'_spread' if parts > 1 else ''}_{'largest' if op['largest'] else 'smallest'}_kernel"
    writes = [False] + [True] * (len(shapes) - 1)
    src = f"""{_HELPERS}
MIGX_GLOBAL void {name}({kernel_params(shapes, writes)}) {{
    migx::kernel_entry();
    {body}
}}"""
    return KernelSource(name, source(src), nslices * parts * threads, threads)
