"""Single-launch top-k by radix select (issue 28: YOLOv10n's k = 300 over 8,400 anchors took three
rank-counting launches of 27 to 67 µs; docs/results/issue28_topk_radix_h200.md).

Each element is a unique 64-bit word, (key << 32 | ~index): the key is the value read as float
mapped to an unsigned integer whose order is the value order (sign bit flipped for positives,
all bits for negatives; NaN is read as +inf first and -0 as +0, so NaN ties with +inf and -0
with +0 exactly as in the reference, compiler/ops/data.py's stable argsort with NaN as the
largest value), complemented for `largest=False`; the low word makes equal keys rank by lower
index first. The k best words are the output, in word order.

A block does not select the k-th word exactly: 8-bit radix passes from the top narrow down the
bin holding it only until the words at or above that bin (the survivors) fit the sort (at most
sort_width(k)); random scores stop after two passes (the first one counted while the keys are
loaded), where an exact select took three or four plus an ordered gather. The survivors are
compacted in any order (a shared counter) and sorted; only ranks below k are written. Words
are unique, so the passes always end (ties take passes over the index bits). Every warp reads
the histogram and finds the digit itself (no broadcast barrier), and the histogram rotates over
three buffers (one is cleared during a pass while another is counted), so a pass costs one
barrier. Sorting the survivors: each warp sorts a run of 32 in shuffles, and an element's output
position is the count of larger elements over the runs (a binary search in each); widths over
RUN_SORT_MAX take a bitonic network.

A slice of up to ~10,000 keys is one block (its keys in shared memory). A longer one is spread
over `parts` blocks (radix_plan): each writes its survivors (at most `cap`, zero-padded) to a
workspace, and the block that finishes last, counted by an atomic ticket per slice, selects and
sorts the best of those. The lowering gives such an op two extra buffers (topk_workspace): the
ticket, a zero literal (its own memory, set once at finalize; the last block sets it back to 0,
so every eager run and graph replay finds it at 0), and the candidates, an allocation
memory_coloring places in the arena (written before read in each launch). Used for float slices
of at least RADIX_MIN_N elements and k <= RADIX_MAX_K; the rank-counting kernel in indexing.py
takes the rest. Slices whose keys fit neither plan read their keys from global memory in every
pass; the GPU pipeline splits those (rewrite_topk with SPLIT_THRESHOLD).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.common import norm_axis
from migx_explore.compiler.shape import Shape

from .common import KernelSource, decompose, index_type, kernel_params, offset_expr, source
from .templates import render

MAX_THREADS = 1024
RADIX_MIN_N = 512  # shorter slices: the rank-counting kernel is already a single short pass
RADIX_MAX_K = 2048  # survivors as 64-bit words in shared memory: 16 KiB
RUN_SORT_MAX = 512  # sort widths up to this rank 32-element runs; wider ones take the bitonic network
FLOAT_TYPES = ("float32", "float16", "bfloat16")
SHARED_BYTES = 46 * 1024  # static shared memory a block may use (48 KiB, less a margin)
SHARED_RESERVE = 4 * 1024  # the three histogram buffers and the counters
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
    """Enough threads for about four keys each, at least 256 (or sort_width(k)), at most 1,024
    (a multiple of 64: full AMD waves). Fewer warps make each block barrier cheaper."""
    per = int(os.environ.get("MIGX_TOPK_PER", 4))  # keys a thread (a knob for measuring)
    want = max(-(-n // per), min(sort_width(k), 256))
    return min(MAX_THREADS, -(-want // 64) * 64)


@dataclass(frozen=True)
class RadixPlan:
    parts: int  # blocks per slice
    chunk: int  # keys per block (the last block of a slice may have fewer)
    threads: int
    width: int  # sort_width(k)
    keys_shared: bool  # the keys live in shared memory (else read from global in every pass)
    pool: int  # 64-bit words of shared memory for the keys / candidates
    cap: int = 0  # spread: survivors a part keeps (k <= cap <= width)


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
            # the merge holds every part's survivors: fewer a part (more passes) where all
            # sort_width(k) would not fit
            cap = min(width, (SHARED_BYTES - SHARED_RESERVE - 8 * width) // 8 // parts)
            pool = max(-(-chunk // 2), parts * cap)
            if cap >= k and _fits(width, pool):
                threads = block_threads(max(chunk, parts * cap), k)
                return RadixPlan(parts, chunk, threads, width, True, pool, cap)
    pool = max(-(-n // 2), 1)
    shared = _fits(width, pool)
    return RadixPlan(1, n, block_threads(n, k), width, shared, pool if shared else 1)


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
    plan = radix_plan(x.lens[axis], op["k"])
    if plan.parts == 1:
        return None
    nslices = x.elements() // x.lens[axis]
    return Shape("uint32", [nslices]), Shape("uint64", [nslices * plan.parts * plan.cap])


def _count_loop(count: str, body: list[str]) -> list[str]:
    """for j in [0, count) a thread each, with the same trip count in every lane (the warp
    collectives inside need every lane)."""
    return [
        f"for (int j0 = 0; j0 < ({count}); j0 += NT) {{",  # NT == blockDim.x: a known trip count
        "    const int j = j0 + t;",
        *("    " + s for s in body),
        "}",
    ]


def _select(count: str, cap: str) -> list[str]:
    """Radix passes over the nonzero MIGX_WORD(j), j < count, from the top digit, until the words
    at or above the want0-th one's bin under `mask` (m_surv of them) are at most `cap`: then
    they are the survivors, (w & mask) >= prefix. Pass p counts into histogram buffer p % 3
    and clears buffer (p + 1) % 3, last read by every warp's digit of pass p - 2, before this
    pass's barrier; the first pass may have been counted by the load (first_done)."""
    return [
        "unsigned long long prefix = 0ull, mask = 0ull;",
        "unsigned int want = want0;",
        f"m_surv = (unsigned int)({count});",
        f"for (int shift = 56, pass = 0; shift >= 0 && m_surv > (unsigned int)({cap}); shift -= 8, ++pass) {{",
        "    unsigned int* h = hist + 256 * (pass % 3);",
        "    if (pass > 0 || !first_done) {",
        "        for (int b = t; b < 256; b += blockDim.x) hist[256 * ((pass + 1) % 3) + b] = 0u;",
        *(
            "        " + s
            for s in _count_loop(
                count,
                [
                    "unsigned int bin = 256u;",
                    f"if (j < ({count})) {{",
                    "    const unsigned long long w = MIGX_WORD(j);",
                    "    if (w != 0ull && (w & mask) == prefix) bin = (unsigned int)(w >> shift) & 255u;",
                    "}",
                    "migx_hist_add(h, bin);",
                ],
            )
        ),
        "        __syncthreads();",
        "    }",
        "    unsigned int sel, acc, bc;",
        "    migx_topk_digit(h, want, sel, acc, bc);",
        "    prefix |= (unsigned long long)sel << shift;",
        "    mask |= 255ull << shift;",
        "    want -= acc;",
        "    m_surv = want0 - want + bc;",
        "}",
    ]


def _compact(count: str) -> list[str]:
    """The survivors through MIGX_SURV(slot, word), in any order (the sort orders them)."""
    return _count_loop(
        count,
        [
            f"const unsigned long long w = j < ({count}) ? MIGX_WORD(j) : 0ull;",
            "const bool keep = w != 0ull && (w & mask) >= prefix;",
            "const unsigned int i = migx_topk_slot(keep, &s_m);",
            "if (keep) MIGX_SURV(i, w);",
        ],
    )


def _merge(parts: int, cap: int, slot: str, threads: int) -> list[str]:
    """Spread slices: this block's survivors are in the workspace; the block that finishes last
    (an atomic ticket per slice) selects among all parts' survivors and goes on to the sort;
    the others exit. It sets the ticket back to 0 first (every part has counted), so the next
    run, eager or a graph replay, starts from 0 again."""
    m = parts * cap
    per = -(-m // threads)
    return [
        "__threadfence();",  # the candidates are visible device-wide before the ticket counts them
        "__syncthreads();",
        f"if (t == 0) {{ s_last = atomicAdd(&ticket[slice], 1u) == {parts - 1}u; s_m = 0u; }}",
        "for (int b = t; b < 768; b += blockDim.x) hist[b] = 0u;",  # every warp's digits are done
        "__syncthreads();",
        "if (!s_last) return;",
        "__threadfence();",
        "if (t == 0) ticket[slice] = 0u;",
        "unsigned long long* cand = pool_s;",  # this block's keys are no longer read
        # every candidate load of the thread in flight together, then the top digit's histogram
        f"unsigned long long cw[{per}];",
        "#pragma unroll",
        f"for (int r = 0; r < {per}; ++r) {{",
        f"    const int j = r * {threads} + t;",
        f"    cw[r] = j < {m} ? migx_topk_ldcg(ws + {slot} + j) : 0ull;",
        "}",
        "#pragma unroll",
        f"for (int r = 0; r < {per}; ++r) {{",
        f"    const int j = r * {threads} + t;",
        "    if (j < " + str(m) + ") cand[j] = cw[r];",
        "    migx_hist_add(hist, cw[r] != 0ull ? (unsigned int)(cw[r] >> 56) : 256u);",
        "}",
        "__syncthreads();",
        "#undef MIGX_WORD",
        "#undef MIGX_SURV",
        "#define MIGX_WORD(j) (cand[(j)])",
        "#define MIGX_SURV(i, w) (win[(i)] = (w))",
        "first_done = true;",
        "{",
        "    const unsigned int want0 = (unsigned int)K;",
        *("    " + s for s in _select(str(m), "P")),
        *("    " + s for s in _compact(str(m))),
        "}",
        "for (int i = (int)m_surv + t; i < P; i += blockDim.x) win[i] = 0ull;",
    ]


def _run_sort(k: int) -> list[str]:
    """Sort the m_surv survivors in win[0, P) (P <= RUN_SORT_MAX, zero-padded) descending and
    write ranks below K: each warp sorts a run of 32 by a bitonic network in shuffles, then each
    element's rank is the sum over the runs of how many of their elements are larger (a binary
    search in each; the words are distinct). The zero padding is smaller than every word."""
    if k <= 32:  # one run: one warp sorts it, and lane i holds output i
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
            "    if (t < K) MIGX_OUT(t, v);",
            "}",
        ]
    return [
        "__syncthreads();",
        "const int runs = ((int)m_surv + 31) / 32;",
        "for (int r = t / 32; r < runs; r += blockDim.x / 32) {",  # the same trip count in a warp
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
        "__syncthreads();",
        # each run is sorted with its padding last, so win[0, m_surv) holds every survivor
        "for (int i = t; i < (int)m_surv; i += blockDim.x) {",
        "    const unsigned long long e = win[i];",
        "    int rank = 0;",
        "#pragma unroll 4",  # independent searches in flight together
        "    for (int r = 0; r < runs; ++r) {",
        "        const unsigned long long* run = win + r * 32;",
        "        int c = run[15] > e ? 16 : 0;",  # run[0, c) > e (the run is descending)
        "        if (run[c + 7] > e) c += 8;",
        "        if (run[c + 3] > e) c += 4;",
        "        if (run[c + 1] > e) c += 2;",
        "        if (run[c] > e) c += 1;",
        "        if (c == 31 && run[31] > e) c = 32;",
        "        rank += c;",
        "    }",
        "    if (rank < K) MIGX_OUT(rank, e);",
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
        "    if (i < K) MIGX_OUT(i, v[e]);",
        "}",
    ]


def _lines(section: str, **values: object) -> list[str]:
    return render("topk.hpp", section, **values).split("\n")


@dataclass(frozen=True)
class _Slice:
    """One block's view of its slice: `load` reads key j's value, `count` is how many keys the
    block has (its chunk of a spread slice), `low` the word's low half (the index's complement)."""

    load: str
    count: str
    low: str
    flip: str


def _slice_lines(op: Op, shapes: Sequence[Shape], plan: RadixPlan, axis: int, it: str) -> tuple[list[str], _Slice]:
    """The slice's coordinates and bases, then the prologue: shared arrays, MIGX_OUT, the cleared
    histograms; with `clocks`, the first timestamp."""
    x, vals, idx = shapes[0], shapes[-2], shapes[-1]
    parts = plan.parts
    dims = [d for d in range(x.ndim) if d != axis]
    lines = [f"const {it} slice = blockIdx.x / {parts};" if parts > 1 else f"const {it} slice = blockIdx.x;"]
    lines += decompose("slice", [x.lens[d] for d in dims] or [1], it, "s")
    coords = [f"s{j}" for j in range(len(dims))]
    po, pi = len(shapes) - 2, len(shapes) - 1
    for p, s in ((0, x), (po, vals), (pi, idx)):
        lines.append(f"const {it} base{p} = {offset_expr(coords, [s.strides[d] for d in dims]) if dims else '0'};")
    xs = x.strides[axis]
    start = f"(({it})(blockIdx.x % {parts}) * {plan.chunk})" if parts > 1 else "0"
    flip = "" if op["largest"] else "~"
    lines += _lines(
        "prologue",
        k=op["k"],
        width=plan.width,
        threads=plan.threads,
        clock_start=["long long c[5] = {clock64(), 0, 0, 0, 0};"] if _clocks(plan) else [],
        pool=plan.pool,
        flip=flip,
        xs=xs,
        po=po,
        value_stride=vals.strides[axis],
        pi=pi,
        index_stride=idx.strides[axis],
    )
    load = f"(float)migx::load(p0, base0 + ({start} + (j)) * {xs})"
    low = f"(unsigned int)~(unsigned int)({start} + (j))"
    return lines, _Slice(load, "cnt" if parts > 1 else str(x.lens[axis]), low, flip)


def _clocks(plan: RadixPlan) -> bool:
    """MIGX_TOPK_CLOCKS=1 (one block a slice; measuring only): thread 0's clock64 after the load,
    the passes, the compaction and the sort replace values 0..3 of the output."""
    return os.environ.get("MIGX_TOPK_CLOCKS") == "1" and plan.parts == 1


def _clk(plan: RadixPlan, i: int) -> list[str]:
    return [f"if (t == 0) c[{i}] = clock64();"] if _clocks(plan) else []


def _key_lines(plan: RadixPlan, sl: _Slice, n: int, it: str) -> tuple[list[str], str]:
    """(lines, slot) where survivors go (MIGX_SURV) and how a key's word is read (MIGX_WORD):
    from shared memory where the slice's keys fit (keys_shared), else from global memory."""
    parts, slot = plan.parts, ""
    if parts > 1:
        slot = f"({it})slice * {parts * plan.cap}"
        start = f"(({it})(blockIdx.x % {parts}) * {plan.chunk})"
        lines = _lines("spread", n=n, start=start, chunk=plan.chunk, slot=slot, parts=parts, cap=plan.cap)
    else:
        lines = ["#define MIGX_SURV(i, w) (win[(i)] = (w))"]
    if plan.keys_shared:
        per = -(-plan.chunk // plan.threads)
        lines += _lines(
            "keys_shared",
            per=per,
            threads=plan.threads,
            count=sl.count,
            load=sl.load,
            flip=sl.flip,
            clock=_clk(plan, 1),
            low=sl.low,
        )
    else:
        key = f"{sl.flip}migx_topk_key({sl.load})"
        lines += ["bool first_done = false;", f"#define MIGX_WORD(j) (((unsigned long long)({key}) << 32) | {sl.low})"]
    return lines, slot


def radix_topk_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """shapes: (x, values, indices), or (x, ticket, workspace, values, indices) when the lowering
    gave the op topk_workspace's buffers (a spread plan)."""
    x, vals = shapes[0], shapes[-2]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    n, k = x.lens[axis], op["k"]
    nslices = x.elements() // n
    plan = radix_plan(n, k)
    if len(shapes) != 5 or shapes[2].elements() != nslices * plan.parts * plan.cap:  # no (or another plan's) workspace
        plan = radix_plan(n, k, spread=False)
    parts, threads, width = plan.parts, plan.threads, plan.width
    it = index_type(shapes)
    lines, sl = _slice_lines(op, shapes, plan, axis, it)
    key_lines, slot = _key_lines(plan, sl, n, it)
    lines += key_lines
    cap = str(plan.cap) if parts > 1 else "P"
    lines += _lines("select", count=sl.count, passes=_select(sl.count, cap) + _clk(plan, 2) + _compact(sl.count))
    if parts > 1:
        lines.append(f"for (int i = (int)m_surv + t; i < {plan.cap}; i += blockDim.x) MIGX_SURV(i, 0ull);")
        lines += _merge(parts, plan.cap, slot, threads)
    else:
        lines.append("for (int i = (int)m_surv + t; i < P; i += blockDim.x) win[i] = 0ull;")
    lines += _clk(plan, 3) + (_run_sort(k) if width <= RUN_SORT_MAX else _bitonic_sort(width, threads))
    if _clocks(plan):
        po, vs = len(shapes) - 2, vals.strides[axis]
        lines += ["__syncthreads();", *_clk(plan, 4), "if (t == 0) {"]
        lines += [f"    migx::store(p{po}, base{po} + {i} * {vs}, (float)(c[{i + 1}] - c[0]));" for i in range(4)]
        lines.append("}")
    lines += ["#undef MIGX_WORD", "#undef MIGX_SURV", "#undef MIGX_OUT"]
    name = f"topk_radix{'_spread' if parts > 1 else ''}_{'largest' if op['largest'] else 'smallest'}_kernel"
    params = kernel_params(shapes, [False] + [True] * (len(shapes) - 1))
    src = render("topk.hpp", "kernel", helpers=render("topk.hpp", "helpers"), name=name, params=params, body=lines)
    return KernelSource(name, source(src), nslices * parts * threads, threads)
