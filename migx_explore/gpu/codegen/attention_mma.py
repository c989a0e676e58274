"""The tensor-core attention kernel for half and bfloat16 groups (head dims multiples of 16).

FlashAttention-2's forward pass on 16x8x16 matrix tiles (migx.hpp's mma_16816, one mma.sync on
sm_80+): each warp owns 16 query rows and keeps them as A fragments in registers; the block's
warps share each tile of BN keys, which they copy into shared memory (K as [key][d], V as
[key][dv], 128-bit copies where layout and alignment allow). Per key tile a warp computes its
16 x BN scores S = Q·Kᵀ in fp32 accumulators, applies the group's score chain (scale, masks,
`where`) to each accumulator element at its (row, key), updates the running maximum and sum of
each row (online softmax, the same -inf rules as the scalar kernel), rounds the probabilities to
the storage type and multiplies them by the V tile into the fp32 output accumulators: the
accumulator layout of S is the A-fragment layout of P, so P never leaves registers.

A row with no unmasked key gives 0/0 = NaN, or 0 under the exporters' IsNaN guard, as in
attention.py's kernel, whose score-chain emitter this one shares.

A small problem (few 16-row query tiles) would leave most SMs idle with one warp walking every
key, so the keys are split between up to four warps of a block, which merge their partial
softmax (running max, sum, unnormalised output) through shared memory at the end (key_splits).

H200, fp16, CUPTI (benchmarks/gpu_attention.py --sweep): 4 heads x 128 x 128 x 64 9.6 -> 6.5 µs
with 4 key splits (torch's cuDNN sdpa 5.6 in the bert benchmark), 4 x 128 x 128 x 32 6.7 -> 4.4,
12 x 512 x 512 x 64 24.4 -> 21.2 with 2. Still missing against FlashAttention-2: several 16-row
tiles per warp, cp.async double buffering of K/V in shared memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from migx_explore.compiler.ir import Module
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelSource,
    batch_offsets,
    compute_type,
    decompose,
    index_type,
    kernel_params,
    source,
)
from .templates import render

MMA_TYPES = {"float16": "migx::half_t", "bfloat16": "migx::bf16_t"}
MAX_HEAD_DIM = 128  # registers: Q fragments d/4 words, O accumulators dv/2 floats per lane
MAX_WARPS = 4  # warps (16 query rows each) per block
KEY_TILE = 64  # keys per shared-memory tile (fewer when there are fewer keys)
PAD = 8  # 16-bit elements of padding per shared row: 16-byte aligned rows, no bank conflicts
MAX_SHARED_BYTES = 48 * 1024
MAX_KEY_SPLITS = 4  # warps sharing one 16-row query tile, each over its own share of the keys
# Key splits by the number of 16-row query tiles (H200, fp16, CUPTI, benchmarks/gpu_attention.py
# --sweep): 4 up to 80 tiles (4x64x32 4.2 -> 3.5 us, 4x128x32 6.7 -> 4.4, 4x128x64 9.6 -> 6.5,
# 3x197x64 12.6 -> 7.8 against the best unsplit block), 2 beyond (12x512x64 24.4 -> 21.2, with a
# 32-key tile per warp), none past UNSPLIT_FROM_TILES, where blocks sharing K/V tiles fill the GPU.
FOUR_SPLITS_UP_TO_TILES = 80
UNSPLIT_FROM_TILES = 1024
SPLIT_KEY_TILE = 32
KEY_SPLITS: int | None = None  # fixed split count (benchmarks/gpu_attention.py --sweep); None: key_splits()
# Below this many Q·Kᵀ multiply-adds the scalar kernel is picked. With the key splits the mma
# kernel wins down to the smallest layer measured (H200, CUPTI: llama's 4 heads x 64 x 64 x 32,
# 0.5 M, 3.5 us against 4.3 for the scalar kernel); smaller problems are not measured.
MIN_WORK = 1 << 18


def _render(section: str, **values: object) -> str:
    return render("attention_mma.hpp", section, **values)


def mma_attention_applies(shapes: Sequence[Shape], q: int, k: int, v: int) -> bool:
    """Q, K and V share a 16-bit float type, d is a multiple of 16 and dv of 8, both <= 128,
    and the Q·Kᵀ product has at least MIN_WORK multiply-adds."""
    qs, ks, vs = shapes[q], shapes[k], shapes[v]
    if qs.type not in MMA_TYPES or ks.type != qs.type or vs.type != qs.type:
        return False
    d, dv = qs.lens[-1], vs.lens[-1]
    if math.prod(qs.lens) * ks.lens[-1] < MIN_WORK:
        return False
    return d % 16 == 0 and dv % 8 == 0 and 0 < d <= MAX_HEAD_DIM and 0 < dv <= MAX_HEAD_DIM


def key_splits(row_tiles: int, n: int) -> int:
    """Warps per 16-row query tile: 1 when there are enough tiles to fill the GPU, else up to
    MAX_KEY_SPLITS, each warp with at least 16 keys of its own."""
    if KEY_SPLITS is not None:
        return KEY_SPLITS
    if row_tiles >= UNSPLIT_FROM_TILES:
        return 1
    splits = MAX_KEY_SPLITS if row_tiles <= FOUR_SPLITS_UP_TO_TILES else 2
    while splits > 1 and n < 16 * splits:
        splits //= 2
    return splits


def _vectorizable(shape: Shape, inner_axis: int, nbatch: int) -> bool:
    """8 consecutive elements along `inner_axis` form one aligned 16-byte load at every tile
    position (given a 16-byte aligned buffer, checked at run time)."""
    strides = shape.strides
    outer = -1 if inner_axis == -2 else -2
    return (
        strides[inner_axis] == 1
        and shape.lens[inner_axis] % 8 == 0
        and strides[outer] % 8 == 0
        and all(s % 8 == 0 for s in strides[:nbatch])
    )


@dataclass(frozen=True)
class _TileCopy:
    """Copies keys j0..j0+rows of a [key][col] operand into shared dst[j * (cols + PAD) + c] as
    raw 16-bit values (zero past the last key). Vectorizable operands go through registers, 8
    columns per 16-byte load, so the next tile's loads are in flight while this one is used
    (`fetch(start)` issues them, `put()` stores them); others (or an unaligned buffer, a run-time
    check) are copied one element at a time by `put()`."""

    name: str
    ptr: str
    base: str
    rows: int
    cols: int
    row_stride: int
    col_stride: int
    n: int
    vector: bool
    threads: int
    it: str

    @property
    def per_thread(self) -> int:
        return -(-(self.rows * self.cols // 8) // self.threads)

    def decl(self) -> str:
        return f"uint4 {self.name}_r[{self.per_thread}];" if self.vector else ""

    def _vec_index(self) -> str:
        return (
            f"const int e = threadIdx.x + i * {self.threads};\n"
            f"                const int j = e / {self.cols // 8}, c = (e % {self.cols // 8}) * 8;"
        )

    def fetch(self, start: str) -> str:
        if not self.vector:
            return ""
        return _render(
            "tile_fetch",
            per_thread=self.per_thread,
            vec_index=self._vec_index(),
            name=self.name,
            it=self.it,
            base=self.base,
            start=start,
            row_stride=self.row_stride,
            vectors=self.rows * self.cols // 8,
            n=self.n,
            ptr=self.ptr,
        )

    def put(self, dst: str) -> str:
        scalar = _render(
            "tile_put_scalar",
            elements=self.rows * self.cols,
            threads=self.threads,
            cols=self.cols,
            it=self.it,
            base=self.base,
            row_stride=self.row_stride,
            col_stride=self.col_stride,
            dst=dst,
            pitch=self.cols + PAD,
            n=self.n,
            ptr=self.ptr,
        )
        if not self.vector:
            return scalar
        return _render(
            "tile_put_vector",
            per_thread=self.per_thread,
            vec_index=self._vec_index(),
            vectors=self.rows * self.cols // 8,
            dst=dst,
            pitch=self.cols + PAD,
            name=self.name,
            scalar=scalar,
        )


def _kv_bytes(splits: int, bn: int, d: int, dv: int) -> int:
    return 2 * splits * bn * (d + dv + 2 * PAD)


def _merge_bytes(warps: int, dv: int) -> int:
    """Each warp's 16 x dv partial output and its rows' running max and sum, as floats."""
    return 4 * warps * 16 * (dv + 2)


def _split_and_key_tile(row_tiles: int, n: int, d: int, dv: int) -> tuple[int, int]:
    """(key splits, keys per warp and step): a key tile of KEY_TILE (half that past head dim 64,
    for registers: the score tile and its prefetched mask values sit beside Q and O), cut to the
    keys a split has and to the shared memory."""
    splits = key_splits(row_tiles, n)
    while True:
        tile = KEY_TILE if max(d, dv) <= 64 else max(16, KEY_TILE // 2)
        if splits > 1:
            tile = min(tile, SPLIT_KEY_TILE)
        share = -(-n // splits)
        bn = tile if share >= tile else 16 * -(-share // 16)
        while bn > 16 and _kv_bytes(splits, bn, d, dv) > MAX_SHARED_BYTES:
            bn -= 16  # a multiple of 16: the P·V loop takes the scores 16 keys at a time
        if _kv_bytes(splits, bn, d, dv) <= MAX_SHARED_BYTES or splits == 1:
            return splits, bn
        splits //= 2


@dataclass(frozen=True)
class _Geometry:
    """One kernel's tiling: `splits` warps share each 16-row query tile, each over its own `bn`
    keys of a step; a block holds `rows` query rows (one tile when the keys are split)."""

    m: int
    n: int
    d: int
    dv: int
    nb: int
    splits: int
    bn: int
    warps: int

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def rows(self) -> int:
        return 16 * (self.warps // self.splits)

    @property
    def block_keys(self) -> int:
        """Keys copied to shared memory per step, bn per warp of a query tile."""
        return self.splits * self.bn

    @property
    def smem(self) -> int:
        kv = 2 * self.block_keys * (self.d + self.dv + 2 * PAD)
        return max(kv, _merge_bytes(self.warps, self.dv) if self.splits > 1 else 0)

    @property
    def row_blocks(self) -> int:
        return -(-self.m // self.rows)


def _geometry(qs: Shape, ks: Shape, vs: Shape) -> _Geometry:
    *batch, m, d = qs.lens
    n, dv = ks.lens[-1], vs.lens[-1]
    nb = math.prod(batch)
    splits, bn = _split_and_key_tile(nb * -(-m // 16), n, d, dv)
    # A split kernel keeps one query tile per block: its warps are the tile's key splits.
    warps = splits if splits > 1 else max(1, min(MAX_WARPS, -(-m // 16)))
    return _Geometry(m, n, d, dv, nb, splits, bn, warps)


@dataclass
class _MaskPrefetch:
    """The score-chain inputs (masks) the score lines read, into registers one key tile ahead:
    calling it with input k gives the register expression and records k as used."""

    shapes: Sequence[Shape]
    offsets: dict[int, str]
    it: str
    m: int
    n: int
    used: list[int] = field(default_factory=list)

    def __call__(self, k: int) -> str:
        if k not in self.used:
            self.used.append(k)
        return f"pf{k}[nt][e]"

    def decl(self) -> str:
        return " ".join(f"{compute_type(self.shapes[k].type)} pf{k}[NT][4];" for k in self.used)

    def fetch(self, start: str) -> str:
        """Read tile `start`'s mask values into pf*: independent loads issued together, one tile
        ahead, rather than one dependent load per score (indices clamped: out-of-range scores
        are never used)."""
        if not self.used:
            return ""
        loads = "\n                ".join(
            f"pf{k}[nt][e] = migx::load(p{k}, {self.offsets[k]} + rc * {self.shapes[k].strides[-2]} + "
            f"jc * {self.shapes[k].strides[-1]});"
            for k in self.used
        )
        return _render("mask_fetch", it=self.it, m_last=self.m - 1, start=start, n_last=self.n - 1, loads=loads)


def _write_out(plan, g: _Geometry, out: Shape, nout: int, it: str) -> str:
    """Normalise and store each output row: straight from the warp's accumulators, or (keys split)
    after merging the splits' partials through shared memory, rescaled to the largest row
    maximum (FlashAttention's merge, in the block)."""

    def value(acc: str, total: str) -> str:
        if plan.nan_guard:
            return f"{total} > 0.0f ? {acc} / {total} : 0.0f;  // where(isnan(p), 0, p): no unmasked key gives 0"
        return f"{acc} / {total};  // no unmasked key: 0/0 = NaN, as softmax over all -inf"

    store = f"if (row < {g.m}) migx::store(p{nout}, o_base + row * {out.strides[-2]} + c * {out.strides[-1]}, y);"
    if g.splits == 1:
        return _render("write_unsplit", it=it, y=value("o[dt][e]", "l"), store=store)
    return _render(
        "write_split",
        ml_offset=g.warps * 16 * g.dv,
        dv=g.dv,
        tile_elements=16 * g.dv,
        it=it,
        y=value("acc", "l"),
        store=store,
    )


def _tile_copies(plan, shapes: Sequence[Shape], g: _Geometry, it: str) -> tuple[_TileCopy, _TileCopy]:
    """K is the dot's [d, n] operand (a transpose view): rows are keys along its last axis."""
    ks, vs = shapes[plan.k], shapes[plan.v]
    nbd = shapes[plan.q].ndim - 2
    k_vec, v_vec = _vectorizable(ks, -2, nbd), _vectorizable(vs, -1, nbd)
    k_copy = _TileCopy(
        "k", f"p{plan.k}", "k_base", g.block_keys, g.d, ks.strides[-1], ks.strides[-2], g.n, k_vec, g.threads, it
    )
    v_copy = _TileCopy(
        "v", f"p{plan.v}", "v_base", g.block_keys, g.dv, vs.strides[-2], vs.strides[-1], g.n, v_vec, g.threads, it
    )
    return k_copy, v_copy


def _copy_slots(k_copy: _TileCopy, v_copy: _TileCopy, g: _Geometry) -> dict[str, str]:
    """The kernel's K/V tile copies: register declarations, the first tile's loads, the stores to
    shared memory and the next step's loads (vector copies check the buffers' alignment)."""
    step = f"(j0 + {g.block_keys})"
    aligned = " | ".join(f"(unsigned long long){c.ptr}" for c in (k_copy, v_copy) if c.vector)
    return {
        "aligned": aligned or "0ull",
        "k_decl": k_copy.decl(),
        "v_decl": v_copy.decl(),
        "k_fetch0": k_copy.fetch("0"),
        "v_fetch0": v_copy.fetch("0"),
        "k_put": k_copy.put("k_s"),
        "v_put": v_copy.put("v_s"),
        "k_fetch_next": k_copy.fetch(step),
        "v_fetch_next": v_copy.fetch(step),
    }


def mma_attention_kernel(plan, module: Module, shapes: Sequence[Shape], score_lines, name: str) -> KernelSource:
    """`plan`: attention.AttentionPlan; `score_lines(offsets, preloaded)` -> (C++ lines, score
    expr) reading s, row, j, the batch coordinates b0.. and, for each score-chain input k, the
    expression preloaded(k); params: the group's inputs, then the output."""
    qs = shapes[plan.q]
    g = _geometry(qs, shapes[plan.k], shapes[plan.v])
    it = index_type(shapes)
    nbd = qs.ndim - 2
    offsets = batch_offsets(shapes, nbd)
    masks = _MaskPrefetch(shapes, offsets, it, g.m, g.n)
    lines, score = score_lines(offsets, masks)
    if g.smem > MAX_SHARED_BYTES:
        raise CodegenUnsupported(f"attention head dims {g.d}/{g.dv} need {g.smem} bytes of shared memory")
    nout = len(shapes) - 1
    kname = name.replace("attention_", "attention_mma_", 1) + "_kernel"  # still attention_*[_guarded]_kernel
    src = _render(
        "kernel",
        kd=g.d // 16,
        nt=g.bn // 8,
        dt=g.dv // 8,
        splits=g.splits,
        kname=kname,
        params=kernel_params(shapes, [False] * nout + [True]),
        smem=g.smem,
        v_s_offset=g.block_keys * (g.d + PAD),
        it=it,
        row_blocks=g.row_blocks,
        rows=g.rows,
        batch_lines="\n    ".join(decompose("bh", qs.lens[:-2], it, "b")) if nbd else "",
        q_base=offsets[plan.q],
        k_base=offsets[plan.k],
        v_base=offsets[plan.v],
        q_row_stride=qs.strides[-2],
        q_col_stride=qs.strides[-1],
        m=g.m,
        q=plan.q,
        pf_decl=masks.decl(),
        mask_fetch0=masks.fetch(f"split * {g.bn}"),
        k_split_offset=g.bn * (g.d + PAD),
        v_split_offset=g.bn * (g.dv + PAD),
        n=g.n,
        block_keys=g.block_keys,
        bn=g.bn,
        k_pitch=g.d + PAD,
        ty=MMA_TYPES[qs.type],
        score_body="\n                    ".join(lines),
        score=score,
        mask_fetch_next=masks.fetch(f"(jw + {g.block_keys})"),
        v_pitch=g.dv + PAD,
        o_base=offsets[nout],
        write_out=_write_out(plan, g, shapes[-1], nout, it),
        **_copy_slots(*_tile_copies(plan, shapes, g, it), g),
    )
    return KernelSource(kname, source(src), g.nb * g.row_blocks * g.threads, g.threads)
