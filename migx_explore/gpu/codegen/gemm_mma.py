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

from ..blas_plan import fold_broadcast_batch, view_strides
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
from .templates import render

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


Tile = tuple[int, int, int, int]


def choose_tile(nb: int, m: int, n: int, tiles: Sequence[Tile] = TILES) -> Tile:
    """(BM, BN, warps along M, warps along N) for `nb` products of m x n: the largest of `tiles`
    that still gives TARGET_BLOCKS blocks, else the smallest."""
    for tile in tiles:  # past the loop: the smallest
        if nb * -(-m // tile[0]) * -(-n // tile[1]) >= TARGET_BLOCKS:
            break
    return tile


def plan_mma_gemm(shapes: Sequence[Shape]) -> MmaGemmPlan:
    """The plan for params (a, b, extras..., out), or CodegenUnsupported saying why there is none."""
    shapes = fold_broadcast_batch(shapes)
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
    bm, bn, wm, wn = choose_tile(math.prod(batch), m, n)
    bk = min(64, -(-k // 16) * 16)
    b_kmajor = b.strides[-1] == 1 or b.strides[-2] != 1
    a_vec = _vector_ok(a.strides[-1], a.strides[:-1], k)
    if b_kmajor:
        b_vec = _vector_ok(b.strides[-1], [*b.strides[:-2], b.strides[-2]], n)
    else:
        b_vec = _vector_ok(b.strides[-2], [*b.strides[:-2], b.strides[-1]], k)
    return MmaGemmPlan(m, n, k, batch, bm, bn, wm, wn, bk, b_kmajor, a_vec, b_vec)


@dataclass(frozen=True)
class Stage:
    """Moving one operand's chunk (rows x cols, cols contiguous in shared memory) from global
    memory into registers (`load`, reads pointer `pa`/`pb` at the chunk's corner) and from
    registers into the shared array (`store`, into buffer `buf`)."""

    decl: str
    load: list[str]
    store: list[str]


def per_thread(n: int, index: str, body: list[str]) -> list[str]:
    """`body` for this thread's share of n items: `index` names the item, its row and col."""
    return ["#pragma unroll", f"for (int r = 0; r < {-(-n // THREADS)}; ++r) {{", f"    {index}", *body, "}"]


def _vector_index(cols: int) -> str:
    """Item v of a chunk moved in 16-byte vectors: its row and first column (8 elements a vector)."""
    return f"const int v = threadIdx.x + r * {THREADS}, row = v / {cols // 8}, col = (v % {cols // 8}) * 8;"


def _stage(op: str, rows: int, cols: int, strides: tuple[int, int], lim: tuple[str, str], vec: bool) -> Stage:
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
        return Stage(f"uint4 {op}r[{-(-nv // THREADS)}];", per_thread(nv, where, load), per_thread(nv, where, store))
    ne = rows * cols
    where = f"const int e = threadIdx.x + r * {THREADS}, row = e / {cols}, col = e % {cols};"
    load = [
        f"    {op}r[r] = (e < {ne} && row < {lim[0]} && col < {lim[1]})",
        f"        ? {p}[row * {rs} + col * {cs}].bits : (unsigned short)0;",
    ]
    store = [f"    if (e < {ne}) {op}s[buf][row][col] = {op}r[r];"]
    decl = f"unsigned short {op}r[{-(-ne // THREADS)}];"
    return Stage(decl, per_thread(ne, where, load), per_thread(ne, where, store))


def render_section(section: str, **values: object) -> str:
    return render("gemm_mma.hpp", section, **values)


def _lines(section: str, **values: object) -> list[str]:
    return render_section(section, **values).split("\n")


@dataclass(frozen=True)
class _Loop:
    """What the K loops of one kernel share: the plan, the operands' corner pointers and bounds,
    the B chunk's shape in shared memory, the pipeline depth and the per-chunk mma lines."""

    plan: MmaGemmPlan
    a: Shape
    b: Shape
    a_ptr: str
    b_ptr: str
    a_lim: tuple[str, str]
    b_lim: tuple[str, str]
    b_dims: tuple[int, int]
    b_strides: tuple[int, int]
    stages: int
    compute: list[str]

    @property
    def nchunks(self) -> int:
        return -(-self.plan.k // self.plan.bk)


def k_loop_parts(plan: MmaGemmPlan, a: Shape, b: Shape, it: str) -> _Loop:
    m, n, k, bm, bn, bk = plan.m, plan.n, plan.k, plan.bm, plan.bn, plan.bk
    # Offsets past 2^31 elements (a large batch or matrix under MIGX_GEMM_GEN=all) need the
    # coordinates widened before they are multiplied; int stays int (the same source as before).
    ri, rk, rc = (c if it == "int" else f"(({it}){c})" for c in ("row0", "k0", "col0"))
    # Pipeline depth of the 16-byte path: chunks in flight while one is multiplied (a long K is
    # a serial chain of load latencies otherwise), as many as 48 KB of static shared memory holds.
    b_elems = bk * (bn + PAD) if plan.b_kmajor else bn * (bk + PAD)
    stage_bytes = 2 * (bm * (bk + PAD) + b_elems)  # the as / bs arrays, one stage
    most = int(os.environ.get("MIGX_GEMM_STAGES", MAX_STAGES))  # a knob for measuring
    stages = max(2, min(most, -(-k // bk) + 1, SHARED_BYTES // stage_bytes))
    if plan.b_kmajor:  # B chunk [BK][BN]: its rows are k
        b_dims, b_strides, b_lim = (bk, bn), (b.strides[-2], b.strides[-1]), (f"{k} - k0", f"{n} - col0")
        b_ptr = f"p1 + ob + ({rk} * {b.strides[-2]} + {rc} * {b.strides[-1]})"
        b_frag = _lines("b_frag_kmajor", pitch=bn + PAD)
    else:  # B chunk [BN][BK]: a transposed weight, k contiguous
        b_dims, b_strides, b_lim = (bn, bk), (b.strides[-1], b.strides[-2]), (f"{n} - col0", f"{k} - k0")
        b_ptr = f"p1 + ob + ({rc} * {b.strides[-1]} + {rk} * {b.strides[-2]})"
        b_frag = _lines("b_frag_nmajor")
    fm, fn = bm // plan.wm // 16, bn // plan.wn // 8
    compute = _lines("compute", bk=bk, fm=fm, fn=fn, b_frag=b_frag, t=storage_type(b.type))
    a_ptr = f"p0 + oa + ({ri} * {a.strides[-2]} + {rk} * {a.strides[-1]})"
    a_lim = (f"{m} - row0", f"{k} - k0")
    return _Loop(plan, a, b, a_ptr, b_ptr, a_lim, b_lim, b_dims, b_strides, stages, compute)


def main_loop(lp: _Loop, va: bool, vb: bool, sb: Stage | None = None) -> list[str]:
    """The chunk loop, A / B loads vectorised or not: double-buffered shared memory, the next
    chunk's global loads issued before this chunk's mma, one barrier per chunk (the buffer
    written is the one every warp finished reading before the last barrier). `sb`: B's moves
    where B is not a strided matrix (an implicit-GEMM convolution's gathered columns)."""
    a = lp.a
    sa = _stage("a", lp.plan.bm, lp.plan.bk, (a.strides[-2], a.strides[-1]), lp.a_lim, va)
    sb = sb or _stage("b", *lp.b_dims, lp.b_strides, lp.b_lim, vb)
    corner = [f"const auto* pa = {lp.a_ptr};", f"const auto* pb = {lp.b_ptr};"]
    return _lines(
        "main_loop",
        sa_decl=sa.decl,
        sb_decl=sb.decl,
        loads=corner + sa.load + sb.load,
        stores=sa.store + sb.store,
        nchunks=lp.nchunks,
        bk=lp.plan.bk,
        compute=lp.compute,
    )


def pipelined_loop(lp: _Loop, prefetch_b: bool, b_copy: list[str] | None = None) -> list[str]:
    """Both operands by 16-byte asynchronous copies, `stages` chunks deep: chunk c + stages - 1
    is issued right after chunk c's mma, into the stage every warp finished reading before
    this iteration's barrier. `b_copy`: the copy of one B vector (row, col, st, p in scope)
    where B is gathered rather than strided."""
    stages, nchunks = lp.stages, lp.nchunks

    def issue(op: str, rows: int, cols: int, rs: int, lim: tuple[str, str], ptr: str) -> list[str]:
        nv = rows * cols // 8
        copy = _lines("async_copy", rows_left=lim[0], cols_left=lim[1], vectors=nv, op=op, row_stride=rs)
        if op == "b" and b_copy is not None:
            copy = b_copy
        each = per_thread(nv, _vector_index(cols), copy)
        return _lines("issue", name=f"issue_{op}", bk=lp.plan.bk, stages=stages, ptr=ptr, copies=each)

    # With constant weights (prefetch_b), the first chunks of B are in flight before the wait
    # for the previous kernel: under a dependent launch that wait is where this kernel sat
    # idle, so their load latency is hidden behind the predecessor's tail.
    first = f"for (int c = 0; c < {min(stages - 1, nchunks)}; ++c)"
    start = (
        [f"{first} issue_b(c);", "migx::kernel_wait();", f"{first} {{ issue_a(c); migx::copy_async_commit(); }}"]
        if prefetch_b
        else [f"{first} {{ issue_a(c); issue_b(c); migx::copy_async_commit(); }}"]
    )
    return _lines(
        "pipelined",
        issue_a=issue("a", lp.plan.bm, lp.plan.bk, lp.a.strides[-2], lp.a_lim, lp.a_ptr),
        issue_b=issue("b", *lp.b_dims, lp.b_strides[0], lp.b_lim, lp.b_ptr),
        start=start,
        first_chunks=min(stages - 1, nchunks),
        last_stage=stages - 1,
        nchunks=nchunks,
        wait_stages=stages - 2,
        stages=stages,
        compute=lp.compute,
    )


def aligned(pointers: Sequence[str]) -> str:
    """The run-time test that picks a kernel's 16-byte path: every pointer 16-byte aligned (a
    view at an odd element offset takes the element path). Tests replace it by "false"."""
    return " && ".join(f"((unsigned long long){p} % 16) == 0" for p in pointers)


def _k_loop(lp: _Loop, prefetch_b: bool) -> list[str]:
    """The pipelined 16-byte loop where both operands allow it (the element loop for a buffer
    that turns out unaligned at run time), else the loop for what does."""
    plan = lp.plan
    vectors = [f"p{q}" for q, v in ((0, plan.a_vec), (1, plan.b_vec)) if v]
    if plan.a_vec and plan.b_vec:
        fallback = main_loop(lp, False, False)
        if prefetch_b:  # the element-load path waits first
            fallback = [fallback[0], "migx::kernel_wait();", *fallback[1:]]
        return [f"if ({aligned(vectors)})", *pipelined_loop(lp, prefetch_b), "else", *fallback]
    if vectors:
        return [
            f"if ({aligned(vectors)})",
            *main_loop(lp, plan.a_vec, plan.b_vec),
            "else",
            *main_loop(lp, False, False),
        ]
    return main_loop(lp, False, False)


def epilogue_lines(epilogue: Module | None, extras: Sequence[Shape], offsets: Sequence[str]) -> tuple[list[str], str]:
    """(lines, result expression) of the store function: one output element per call; extra j
    is read at oc<j+1> + offsets[j]."""
    if epilogue is None:
        return [], "x"
    ep_lines, loaded = [], []
    for j, (s, off) in enumerate(zip(extras, offsets)):
        ep_lines.append(f"const {compute_type(s.type)} e{j} = migx::load(p{2 + j}, oc{j + 1} + {off});")
        loaded.append(f"e{j}")
    em = BodyEmitter("ep")
    outs = em.run(epilogue, ["x", *loaded])
    # locals renumbered in order: the same epilogue in every layer gives the same source
    # (one compile), whatever instruction ids the modules have
    names = {v: f"ep{j}" for j, v in enumerate(dict.fromkeys(re.findall(r"\bep\d+\b", "\n".join(em.lines))))}
    renumber = functools.partial(re.sub, r"\bep\d+\b", lambda mt: names.get(mt.group(0), mt.group(0)))
    return ep_lines + [renumber(s) for s in em.lines], renumber(outs[0][0])


def _block_head(plan: MmaGemmPlan, shapes: Sequence[Shape], views: list, it: str) -> list[str]:
    """The block's tile, batch coordinates and the operands' batch offsets."""
    tiles_m, tiles_n = -(-plan.m // plan.bm), -(-plan.n // plan.bn)
    head = [
        "int blk = blockIdx.x;",
        f"const int tn = blk % {tiles_n}; blk /= {tiles_n};",
        f"const int tm = blk % {tiles_m}; blk /= {tiles_m};",
    ]
    coords = [f"g{d}" for d in range(len(plan.batch))]
    if plan.batch:
        head += decompose("blk", list(plan.batch), it, "g")

    def base(strides: Sequence[int]) -> str:
        return offset_expr(coords, strides[: len(coords)]) if coords else "0"

    head += [f"const {it} oa = {base(shapes[0].strides)}, ob = {base(shapes[1].strides)};"]
    head += [f"const {it} oc{j} = {base(v)};" for j, v in enumerate(views)]
    return head + [f"const int row0 = tm * {plan.bm}, col0 = tn * {plan.bn};"]


def with_epilogue_name(name: str, epilogue: Module | None) -> str:
    """A kernel name with its epilogue's ops appended (the profile then says what it fused)."""
    if epilogue is None:
        return name
    return name + "_" + "_".join(dict.fromkeys(i.name for i in epilogue if not i.is_builtin()))[:32]


def render_kernel(
    name: str,
    lp: _Loop,
    shapes: Sequence[Shape],
    *,
    entry: str,
    head: list[str],
    loop: list[str],
    scale: list[str],
    epilogue: list[str],
    out_offset: str,
    result: str,
) -> str:
    """The kernel section filled for the plan of `lp`: params (inputs..., out), the block's
    `head` (tile, batch offsets oa / ob / oc<j>), the K `loop`, and the store of each element."""
    plan = lp.plan
    fm, fn = plan.bm // plan.wm // 16, plan.bn // plan.wn // 8
    return render_section(
        "kernel",
        name=name,
        params=kernel_params(shapes, [False] * (len(shapes) - 1) + [True]),
        entry=entry,
        stages=lp.stages,
        bm=plan.bm,
        a_pitch=plan.bk + PAD,
        b_rows=lp.b_dims[0],
        b_pitch=lp.b_dims[1] + PAD,
        wn=plan.wn,
        wm_span=fm * 16,
        wn_span=fn * 8,
        head=head,
        fm=fm,
        fn=fn,
        loop=loop,
        m=plan.m,
        n=plan.n,
        scale=scale,
        epilogue=epilogue,
        out=len(shapes) - 1,
        out_offset=out_offset,
        result=result,
    )


def mma_gemm_kernel(
    shapes: Sequence[Shape], epilogue: Module | None = None, alpha: float = 1.0, constant_b: bool = False
) -> KernelSource:
    """Params (a, b, extras..., out): out = epilogue(alpha * a . b, extras) (x0 = the product, x1..
    = extras, as gpu::gemm's epilogue module), or the product alone. `out` and every extra may be
    any buffer that views the product's lens without a copy. `constant_b`: b is data no kernel
    writes (a weight literal), so its first chunks may load before the wait for the previous
    kernel where MIGX_GEMM_PREFETCH=1 (measured mixed, so off by default)."""
    shapes = fold_broadcast_batch(shapes)
    plan = plan_mma_gemm(shapes)
    out, extras = shapes[-1], list(shapes[2:-1])
    if extras and epilogue is None:
        raise CodegenUnsupported("gemm extras without an epilogue")
    if not is_float(out.type):
        raise CodegenUnsupported(f"tensor-core GEMM writing {out.type}")
    m, n, k, bm, bn, bk = plan.m, plan.n, plan.k, plan.bm, plan.bn, plan.bk
    it = index_type(shapes)
    ii, jj = (c if it == "int" else f"(({it}){c})" for c in ("i", "j"))
    views = [view_strides(s.lens, s.strides, list(plan.batch) + [m, n]) for s in [out, *extras]]
    lp = k_loop_parts(plan, shapes[0], shapes[1], it)
    # Off by default: on an H200 (one call, one process per setting) it gave gpt2 74.5 -> 73.0 and
    # llama 68.3 -> 66.4 us but bert 101.5 -> 108.1 us (fp16 graphs).
    prefetch_b = constant_b and plan.a_vec and plan.b_vec and os.environ.get("MIGX_GEMM_PREFETCH", "0") == "1"
    ep_lines, result = epilogue_lines(epilogue, extras, [offset_expr([ii, jj], v[-2:]) for v in views[1:]])
    nb = math.prod(plan.batch)
    name = with_epilogue_name(f"gemm_mma_{bm}x{bn}x{bk}_{m}x{n}x{k}" + (f"_b{nb}" if nb > 1 else ""), epilogue)
    src = render_kernel(
        name,
        lp,
        shapes,
        entry="migx::kernel_entry_early();" if prefetch_b else "migx::kernel_entry();",
        head=_block_head(plan, shapes, views, it),
        loop=_k_loop(lp, prefetch_b),
        scale=[] if alpha == 1.0 else [f"x = x * {float(alpha)!r}f;"],
        epilogue=ep_lines,
        out_offset=offset_expr([ii, jj], views[0][-2:]),
        result=result,
    )
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
    if mode == "0" or (arch and arch != "fake" and not has_mma(arch)):
        return False
    try:
        plan = plan_mma_gemm(shapes)
    except CodegenUnsupported:
        return False
    if mode == "all":
        return True
    return plan.m >= MIN_ROWS and plan.macs <= GENERATED_MAX_MACS and plan.a_vec and plan.b_vec and plan.k <= MAX_K


def has_mma(arch: str) -> bool:
    """sm_80 and later ("sm_100" is later than "sm_90": compared as numbers, not strings)."""
    digits = arch[3:].rstrip("abf") if arch.startswith("sm_") else ""
    return digits.isdigit() and int(digits) >= 80
