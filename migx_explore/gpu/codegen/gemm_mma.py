"""A generated tensor-core GEMM for half and bfloat16 products, epilogue included: one launch
computes out = epilogue(alpha * a[..., m, k] . b[..., k, n], extras...) with fp32 accumulation.

Why, beside cuBLASLt: the transformers of issue 28 (d 128-256, 64-200 tokens) multiply matrices
so small that a BLAS call is all latency (2.5-3.3 us for a 128x128x384 GEMM on an H100/H200, the
arithmetic is a fraction of a microsecond), and the cost around it is what a generated kernel can
remove: (1) it starts as a programmatic dependent launch like every generated kernel (migx.hpp's
kernel_entry), while a cuBLASLt kernel neither waits early nor lets its successor start early, so
each GEMM boundary keeps a ~0.3 us launch gap; (2) any pointwise epilogue runs in the same kernel,
erf-GELU (BERT's, which cuBLASLt's GELU epilogue does not compute) included, where a BLAS call
leaves an epilogue kernel behind; (3) it is compiled for the product's exact sizes and strides, like
every generated kernel, so any layout and batch broadcast is read in place.

The kernel: 128 threads (four warps), a BM x BN output tile per block, K in chunks of BK staged
through shared memory, mma.sync m16n8k16 (migx.hpp's mma_16816, whose fallback keeps the kernel
correct where tensor cores are absent). Operands whose contiguous axis allows 16-byte loads (a
run-time pointer check picks the path) arrive by cp.async up to MAX_STAGES chunks ahead of the
tensor cores; any other layout is read element by element into registers, one chunk ahead (double
buffered, one barrier per chunk), so every stride and batch broadcast works. B is staged k-major when
its rows are contiguous (fragments through ldmatrix.trans) and n-major when its columns are (a
transposed weight): both fragment reads are free of bank conflicts with 8 elements of padding.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from migx_explore.compiler.ir import Module
from migx_explore.compiler.shape import Shape

from ..blas_plan import view_strides
from .common import (
    CodegenUnsupported,
    KernelSource,
    compute_type,
    decompose,
    index_type,
    is_float,
    kernel_params,
    offset_expr,
    source,
    storage_type,
)
from .expr import BodyEmitter

THREADS = 128
PAD = 8  # shared-memory row padding in 16-bit elements (keeps fragment reads conflict-free)
MMA_TYPES = ("float16", "bfloat16")
# Block tiles (BM, BN, warps along M, warps along N), largest first: the first that still gives
# TARGET_BLOCKS blocks is taken, so a small product spreads over the SMs (it is latency-bound:
# more blocks mean more loads in flight) and a larger one keeps bigger tiles.
TILES = ((64, 64, 2, 2), (32, 64, 2, 2), (16, 64, 1, 4), (16, 32, 1, 4))
TARGET_BLOCKS = 96
# Chunks in flight at most. H200, bert / gpt2 / llama fp16 graphs, two alternating runs per
# setting: 8 against 4 gave 102.4, 103.1 / 71.6, 72.8 / 68.5, 67.6 us against 100.2, 101.7 /
# 73.4, 74.4 / 68.6, 69.4: within the noise, and BERT (the row nearest its 0.8x target) a little
# slower, so the depth the issue 28 table was measured with stays.
MAX_STAGES = 4
SHARED_BYTES = 48 * 1024


@dataclass(frozen=True)
class MmaGemmPlan:
    """Sizes and the layout decisions of one generated tensor-core GEMM."""

    m: int
    n: int
    k: int
    batch: tuple[int, ...]
    bm: int
    bn: int
    wm: int
    wn: int
    bk: int
    b_kmajor: bool  # B staged as [BK][BN] (rows of B contiguous) rather than [BN][BK]
    a_vec: bool  # 16-byte loads of A along k are possible (strides allow; pointer checked at run time)
    b_vec: bool

    @property
    def blocks(self) -> int:
        return math.prod(self.batch) * -(-self.m // self.bm) * -(-self.n // self.bn)

    @property
    def macs(self) -> int:
        return math.prod(self.batch) * self.m * self.n * self.k


def _vector_ok(inner_stride: int, other_strides: Sequence[int], extent: int) -> bool:
    """16-byte loads of 8 consecutive 16-bit elements along an axis of `extent`: unit stride there,
    and every other stride (and the extent, so a vector is all in or all out) a multiple of 8."""
    return inner_stride == 1 and extent % 8 == 0 and all(s % 8 == 0 for s in other_strides)


def plan_mma_gemm(shapes: Sequence[Shape]) -> MmaGemmPlan:
    """The plan for params (a, b, extras..., out), or CodegenUnsupported saying why there is none."""
    a, b, out = shapes[0], shapes[1], shapes[-1]
    if b.type not in MMA_TYPES or a.type != b.type:
        raise CodegenUnsupported(f"tensor-core GEMM of {a.type} x {b.type}")
    if a.ndim < 2 or a.ndim != b.ndim:
        raise CodegenUnsupported(f"gemm of ranks {a.ndim} and {b.ndim}")
    batch = tuple(a.lens[:-2])
    if tuple(b.lens[:-2]) != batch:
        raise CodegenUnsupported(f"gemm batch axes {list(batch)} and {list(b.lens[:-2])} differ")
    m, k, n = a.lens[-2], a.lens[-1], b.lens[-1]
    if m * n * k == 0:
        raise CodegenUnsupported("empty gemm")
    dot_lens = list(batch) + [m, n]
    for s in [out, *shapes[2:-1]]:
        if view_strides(s.lens, s.strides, dot_lens) is None:
            raise CodegenUnsupported(f"gemm operand {s} cannot view the product's lens {dot_lens}")
    nb = math.prod(batch)
    for tile in TILES:  # past the loop: the smallest
        if nb * -(-m // tile[0]) * -(-n // tile[1]) >= TARGET_BLOCKS:
            break
    bm, bn, wm, wn = tile
    bk = min(64, -(-k // 16) * 16)
    b_kmajor = b.strides[-1] == 1 or b.strides[-2] != 1
    a_vec = _vector_ok(a.strides[-1], a.strides[:-1], k)
    if b_kmajor:
        b_vec = _vector_ok(b.strides[-1], [*b.strides[:-2], b.strides[-2]], n)
    else:
        b_vec = _vector_ok(b.strides[-2], [*b.strides[:-2], b.strides[-1]], k)
    return MmaGemmPlan(m, n, k, batch, bm, bn, wm, wn, bk, b_kmajor, a_vec, b_vec)


@dataclass(frozen=True)
class _Stage:
    """Moving one operand's chunk (rows x cols, cols contiguous in shared memory) from global
    memory into registers (`load`, reads pointer `pa`/`pb` at the chunk's corner) and from
    registers into the shared array (`store`, into buffer `buf`)."""

    decl: str
    load: list[str]
    store: list[str]


def _each(n: int, index: str, body: list[str]) -> list[str]:
    """`body` for this thread's share of n items: `index` names the item, its row and col."""
    return ["#pragma unroll", f"for (int r = 0; r < {-(-n // THREADS)}; ++r) {{", f"    {index}", *body, "}"]


def _vector_index(cols: int) -> str:
    """Item v of a chunk moved in 16-byte vectors: its row and first column (8 elements a vector)."""
    return f"const int v = threadIdx.x + r * {THREADS}, row = v / {cols // 8}, col = (v % {cols // 8}) * 8;"


def _stage(op: str, rows: int, cols: int, strides: tuple[int, int], lim: tuple[str, str], vec: bool) -> _Stage:
    """`op` is "a" or "b" (pointer p<op>, shared array <op>s); `strides` are the global strides of
    the chunk's rows and cols; `lim` the C++ bounds (rows, cols) still inside the matrix."""
    p, rs, cs = f"p{op}", strides[0], strides[1]
    if vec:  # 16-byte vectors of 8 elements along the contiguous axis
        nv = rows * cols // 8
        where = _vector_index(cols)
        load = [
            f"    {op}r[r] = make_uint4(0u, 0u, 0u, 0u);",
            f"    if (v < {nv} && row < {lim[0]} && col < {lim[1]})",
            f"        {op}r[r] = *reinterpret_cast<const uint4*>({p} + (row * {rs} + col));",
        ]
        store = [f"    if (v < {nv}) *reinterpret_cast<uint4*>(&{op}s[buf][row][col]) = {op}r[r];"]
        return _Stage(f"uint4 {op}r[{-(-nv // THREADS)}];", _each(nv, where, load), _each(nv, where, store))
    ne = rows * cols
    where = f"const int e = threadIdx.x + r * {THREADS}, row = e / {cols}, col = e % {cols};"
    load = [
        f"    {op}r[r] = (e < {ne} && row < {lim[0]} && col < {lim[1]})",
        f"        ? {p}[row * {rs} + col * {cs}].bits : (unsigned short)0;",
    ]
    store = [f"    if (e < {ne}) {op}s[buf][row][col] = {op}r[r];"]
    return _Stage(f"unsigned short {op}r[{-(-ne // THREADS)}];", _each(ne, where, load), _each(ne, where, store))


def mma_gemm_kernel(
    shapes: Sequence[Shape], epilogue: Module | None = None, alpha: float = 1.0, constant_b: bool = False
) -> KernelSource:
    """Params (a, b, extras..., out): out = epilogue(alpha * a . b, extras) (x0 = the product, x1..
    = extras, as gpu::gemm's epilogue module), or the product alone. `out` and every extra may be
    any buffer that views the product's lens without a copy. `constant_b`: b is data no kernel
    writes (a weight literal), so its first chunks may load before the wait for the previous
    kernel where MIGX_GEMM_PREFETCH=1 (measured mixed, so off by default)."""
    plan = plan_mma_gemm(shapes)
    a, b, out = shapes[0], shapes[1], shapes[-1]
    extras = list(shapes[2:-1])
    if extras and epilogue is None:
        raise CodegenUnsupported("gemm extras without an epilogue")
    if not is_float(out.type):
        raise CodegenUnsupported(f"tensor-core GEMM writing {out.type}")
    m, n, k, batch = plan.m, plan.n, plan.k, list(plan.batch)
    bm, bn, bk, wm, wn = plan.bm, plan.bn, plan.bk, plan.wm, plan.wn
    fm, fn = bm // wm // 16, bn // wn // 8
    t = storage_type(b.type)
    it = index_type(shapes)
    # Offsets past 2^31 elements (a large batch or matrix under MIGX_GEMM_GEN=all) need the
    # coordinates widened before they are multiplied; int stays int (the same source as before).
    ri, rk, rc, ii, jj = (c if it == "int" else f"(({it}){c})" for c in ("row0", "k0", "col0", "i", "j"))
    dot_lens = batch + [m, n]
    views = [view_strides(s.lens, s.strides, dot_lens) for s in [out, *extras]]
    tiles_m, tiles_n = -(-m // bm), -(-n // bn)
    nb = math.prod(batch)

    head = [
        "int blk = blockIdx.x;",
        f"const int tn = blk % {tiles_n}; blk /= {tiles_n};",
        f"const int tm = blk % {tiles_m}; blk /= {tiles_m};",
    ]
    if batch:
        head += decompose("blk", batch, it, "g")
        coords = [f"g{d}" for d in range(len(batch))]
    else:
        coords = []

    def base(strides: Sequence[int]) -> str:
        return offset_expr(coords, strides[: len(coords)]) if coords else "0"

    head += [f"const {it} oa = {base(a.strides)}, ob = {base(b.strides)};"]
    head += [f"const {it} oc{j} = {base(v)};" for j, v in enumerate(views)]
    head += [f"const int row0 = tm * {bm}, col0 = tn * {bn};"]
    nchunks = -(-k // bk)
    # Pipeline depth of the 16-byte path: chunks in flight while one is multiplied (a long K is
    # a serial chain of load latencies otherwise), as many as 48 KB of static shared memory holds.
    b_elems = bk * (bn + PAD) if plan.b_kmajor else bn * (bk + PAD)
    stage_bytes = 2 * (bm * (bk + PAD) + b_elems)  # the as / bs arrays below, one stage
    most = int(os.environ.get("MIGX_GEMM_STAGES", MAX_STAGES))  # a knob for measuring
    stages = max(2, min(most, nchunks + 1, SHARED_BYTES // stage_bytes))
    a_lim = (f"{m} - row0", f"{k} - k0")
    if plan.b_kmajor:  # B chunk [BK][BN]: its rows are k
        b_dims, b_strides, b_lim = (bk, bn), (b.strides[-2], b.strides[-1]), (f"{k} - k0", f"{n} - col0")
        b_decl = f"__shared__ __align__(16) unsigned short bs[{stages}][{bk}][{bn + PAD}];"
        b_ptr = f"p1 + ob + ({rk} * {b.strides[-2]} + {rc} * {b.strides[-1]})"
        b_frag = [f"migx::load_b_trans(bf[j], &bs[buf][kk][wn0 + j * 8], {bn + PAD});"]
    else:  # B chunk [BN][BK]: a transposed weight, k contiguous
        b_dims, b_strides, b_lim = (bn, bk), (b.strides[-1], b.strides[-2]), (f"{n} - col0", f"{k} - k0")
        b_decl = f"__shared__ __align__(16) unsigned short bs[{stages}][{bn}][{bk + PAD}];"
        b_ptr = f"p1 + ob + ({rc} * {b.strides[-1]} + {rk} * {b.strides[-2]})"
        b_frag = [
            "bf[j][0] = *reinterpret_cast<const unsigned*>(&bs[buf][wn0 + j * 8 + g][kk + 2 * t]);",
            "bf[j][1] = *reinterpret_cast<const unsigned*>(&bs[buf][wn0 + j * 8 + g][kk + 2 * t + 8]);",
        ]
    a_ptr = f"p0 + oa + ({ri} * {a.strides[-2]} + {rk} * {a.strides[-1]})"
    compute = [
        "#pragma unroll",
        f"for (int kk = 0; kk < {bk}; kk += 16) {{",
        f"    unsigned af[{fm}][4], bf[{fn}][2];",
        "#pragma unroll",
        f"    for (int i = 0; i < {fm}; ++i) {{",
        "        const int r = wm0 + i * 16 + g;",
        "        af[i][0] = *reinterpret_cast<const unsigned*>(&as[buf][r][kk + 2 * t]);",
        "        af[i][1] = *reinterpret_cast<const unsigned*>(&as[buf][r + 8][kk + 2 * t]);",
        "        af[i][2] = *reinterpret_cast<const unsigned*>(&as[buf][r][kk + 2 * t + 8]);",
        "        af[i][3] = *reinterpret_cast<const unsigned*>(&as[buf][r + 8][kk + 2 * t + 8]);",
        "    }",
        "#pragma unroll",
        f"    for (int j = 0; j < {fn}; ++j) {{",
        *("        " + s for s in b_frag),
        "    }",
        "#pragma unroll",
        f"    for (int i = 0; i < {fm}; ++i)",
        "#pragma unroll",
        f"        for (int j = 0; j < {fn}; ++j) migx::mma_16816<{t}>(acc[i][j], af[i], bf[j]);",
        "}",
    ]

    def main_loop(va: bool, vb: bool) -> list[str]:
        """The chunk loop, A / B loads vectorised or not: double-buffered shared memory, the next
        chunk's global loads issued before this chunk's mma, one barrier per chunk (the buffer
        written is the one every warp finished reading before the last barrier)."""
        sa = _stage("a", bm, bk, (a.strides[-2], a.strides[-1]), a_lim, va)
        sb = _stage("b", *b_dims, b_strides, b_lim, vb)
        corner = [f"const auto* pa = {a_ptr};", f"const auto* pb = {b_ptr};"]
        return [
            "{",
            "    int buf = 0;",
            f"    {sa.decl} {sb.decl}",
            "    {",
            "        const int k0 = 0;",
            *("        " + s for s in corner + sa.load + sb.load),
            "    }",
            *("    " + s for s in sa.store + sb.store),
            "    __syncthreads();",
            f"    for (int c = 0; c < {nchunks}; ++c) {{",
            f"        if (c + 1 < {nchunks}) {{",
            f"            const int k0 = (c + 1) * {bk};",
            *("            " + s for s in corner + sa.load + sb.load),
            "        }",
            *("        " + s for s in compute),
            f"        if (c + 1 < {nchunks}) {{",
            "            buf ^= 1;",
            *("            " + s for s in sa.store + sb.store),
            "            __syncthreads();",
            "        }",
            "    }",
            "}",
        ]

    def pipelined() -> list[str]:
        """Both operands by 16-byte asynchronous copies, `stages` chunks deep: chunk c + stages - 1
        is issued right after chunk c's mma, into the stage every warp finished reading before
        this iteration's barrier."""

        def issue(op: str, rows: int, cols: int, rs: int, lim: tuple[str, str], ptr: str) -> list[str]:
            nv = rows * cols // 8
            copy = [
                f"    const bool full = row < {lim[0]} && col < {lim[1]};",
                f"    if (v < {nv}) migx::copy16_async(&{op}s[st][row][col], full ? p + (row * {rs} + col) : p, full);",
            ]
            return ["{", f"const auto* p = {ptr};", *_each(nv, _vector_index(cols), copy), "}"]

        def lam(name: str, body: list[str]) -> list[str]:
            head = f"    const int k0 = c * {bk}, st = c % {stages};"
            return [f"auto {name} = [&](int c) {{", head, *("    " + x for x in body), "};"]

        # With constant weights (prefetch_b), the first chunks of B are in flight before the wait
        # for the previous kernel: under a dependent launch that wait is where this kernel sat
        # idle, so their load latency is hidden behind the predecessor's tail.
        first = f"for (int c = 0; c < {min(stages - 1, nchunks)}; ++c)"
        start = (
            [f"{first} issue_b(c);", "migx::kernel_wait();", f"{first} {{ issue_a(c); migx::copy_async_commit(); }}"]
            if prefetch_b
            else [f"{first} {{ issue_a(c); issue_b(c); migx::copy_async_commit(); }}"]
        )
        return [
            "{",
            *lam("issue_a", issue("a", bm, bk, a.strides[-2], a_lim, a_ptr)),
            *lam("issue_b", issue("b", *b_dims, b_strides[0], b_lim, b_ptr)),
            *start,
            f"for (int c = {min(stages - 1, nchunks)}; c < {stages - 1}; ++c) migx::copy_async_commit();",
            f"for (int c = 0; c < {nchunks}; ++c) {{",
            f"    migx::copy_async_wait<{stages - 2}>();",
            "    __syncthreads();",
            f"    const int buf = c % {stages};",
            *("    " + s for s in compute),
            f"    if (c + {stages - 1} < {nchunks}) {{ issue_a(c + {stages - 1}); issue_b(c + {stages - 1}); }}",
            "    migx::copy_async_commit();",
            "}",
            "}",
        ]

    vec_check = [f"((unsigned long long)p{q} % 16) == 0" for q, v in ((0, plan.a_vec), (1, plan.b_vec)) if v]
    # Off by default: on an H200 (one call, one process per setting) it gave gpt2 74.5 -> 73.0 and
    # llama 68.3 -> 66.4 us but bert 101.5 -> 108.1 us (fp16 graphs).
    prefetch_b = constant_b and plan.a_vec and plan.b_vec and os.environ.get("MIGX_GEMM_PREFETCH", "0") == "1"
    if plan.a_vec and plan.b_vec:
        fallback = main_loop(False, False)
        if prefetch_b:  # the element-load path waits first
            fallback = [fallback[0], "migx::kernel_wait();", *fallback[1:]]
        loop = [f"if ({' && '.join(vec_check)})", *pipelined(), "else", *fallback]
    elif vec_check:
        loop = [f"if ({' && '.join(vec_check)})", *main_loop(plan.a_vec, plan.b_vec), "else", *main_loop(False, False)]
    else:
        loop = main_loop(False, False)

    # epilogue: one output element per call of the store function
    ep_lines: list[str] = []
    if epilogue is not None:
        loaded = []
        for j, s in enumerate(extras):
            v = views[j + 1]
            ep_lines.append(
                f"const {compute_type(s.type)} e{j} = migx::load(p{2 + j}, oc{j + 1} + "
                f"{offset_expr([ii, jj], v[-2:])});"
            )
            loaded.append(f"e{j}")
        em = BodyEmitter("ep")
        outs = em.run(epilogue, ["x", *loaded])
        # locals renumbered in order: the same epilogue in every layer gives the same source
        # (one compile), whatever instruction ids the modules have
        names = {v: f"ep{j}" for j, v in enumerate(dict.fromkeys(re.findall(r"\bep\d+\b", "\n".join(em.lines))))}
        renumber = functools.partial(re.sub, r"\bep\d+\b", lambda mt: names.get(mt.group(0), mt.group(0)))
        ep_lines += [renumber(s) for s in em.lines]
        result = renumber(outs[0][0])
    else:
        result = "x"
    scale = "" if alpha == 1.0 else f" * {float(alpha)!r}f"
    nparams = len(shapes)
    store_fn = [
        "auto put = [&](int i, int j, float x) {",
        f"    if (i >= {m} || j >= {n}) return;",
        f"    x = x{scale};" if scale else "",
        *("    " + s for s in ep_lines),
        f"    migx::store(p{nparams - 1}, oc0 + {offset_expr([ii, jj], views[0][-2:])}, {result});",
        "};",
    ]
    writeback = [
        "#pragma unroll",
        f"for (int i = 0; i < {fm}; ++i)",
        "#pragma unroll",
        f"    for (int j = 0; j < {fn}; ++j) {{",
        "        const int r = row0 + wm0 + i * 16 + g, col = col0 + wn0 + j * 8 + 2 * t;",
        "        put(r, col, acc[i][j][0]); put(r, col + 1, acc[i][j][1]);",
        "        put(r + 8, col, acc[i][j][2]); put(r + 8, col + 1, acc[i][j][3]);",
        "    }",
    ]
    body = [
        f"__shared__ __align__(16) unsigned short as[{stages}][{bm}][{bk + PAD}];",
        b_decl,
        "const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;",
        f"const int wm0 = (warp / {wn}) * {fm * 16}, wn0 = (warp % {wn}) * {fn * 8};",
        *head,
        f"float acc[{fm}][{fn}][4];",
        "#pragma unroll",
        f"for (int i = 0; i < {fm}; ++i)",
        "#pragma unroll",
        f"    for (int j = 0; j < {fn}; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;",
        *loop,
        *store_fn,
        *writeback,
    ]
    name = f"gemm_mma_{bm}x{bn}x{bk}_{m}x{n}x{k}" + (f"_b{nb}" if nb > 1 else "")
    if epilogue is not None:
        name += "_" + "_".join(dict.fromkeys(i.name for i in epilogue if not i.is_builtin()))[:32]
    writes = [False] * (nparams - 1) + [True]
    inner = "\n    ".join(s for s in body if s)
    src = f"""
MIGX_GLOBAL void {name}_kernel({kernel_params(shapes, writes)}) {{
    {"migx::kernel_entry_early();" if prefetch_b else "migx::kernel_entry();"}
    {inner}
}}"""
    return KernelSource(name + "_kernel", source(src), plan.blocks * THREADS, THREADS)


# Products up to this many multiply-adds take the generated kernel by default (MIGX_GEMM_GEN=auto):
# below it a BLAS call is launch latency, above it cuBLASLt's tuned kernels win.
GENERATED_MAX_MACS = 1 << 25
# Fewer rows than an mma tile (a decode step's M = 1) leave most of each tile idle and spread the
# weight read over too few blocks (H100: gpt2 decode bucket 97.9 -> 99.6 us): BLAS's GEMV stays.
MIN_ROWS = 16
# The K loop is serial in each block (no split-K), and only the 16-byte path is pipelined: a
# ResNet-18 1x1/3x3 convolution as a GEMM of K = 1152-2304 with N = 49 or 196 (element loads)
# took 20-36 us against ~5 in cuBLASLt (H200). Such products stay BLAS calls by default.
MAX_K = 1024


def generated_gemm_wanted(shapes: Sequence[Shape], arch: str | None, mode: str | None = None) -> bool:
    """Whether a gpu::gemm of these params (a, b, extras..., out) should run as the generated
    tensor-core kernel: `mode` (default: $MIGX_GEMM_GEN) "0" never, "all" whenever the kernel
    applies, "auto" for products of at least MIN_ROWS rows, up to GENERATED_MAX_MACS and MAX_K,
    whose operands allow 16-byte loads. Only where mma.sync exists (NVIDIA sm_80+; the fake
    backend and IR-only compiles follow the same rule so their IR is the GPU's): AMD keeps
    hipBLASLt, where the kernel's fallback arithmetic would be slow."""
    mode = mode if mode is not None else os.environ.get("MIGX_GEMM_GEN", "auto")
    if mode == "0" or (arch and arch != "fake" and not _has_mma(arch)):
        return False
    try:
        plan = plan_mma_gemm(shapes)
    except CodegenUnsupported:
        return False
    if mode == "all":
        return True
    return plan.m >= MIN_ROWS and plan.macs <= GENERATED_MAX_MACS and plan.a_vec and plan.b_vec and plan.k <= MAX_K


def _has_mma(arch: str) -> bool:
    """sm_80 and later ("sm_100" is later than "sm_90": compared as numbers, not strings)."""
    digits = arch[3:].rstrip("abf") if arch.startswith("sm_") else ""
    return digits.isdigit() and int(digits) >= 80
