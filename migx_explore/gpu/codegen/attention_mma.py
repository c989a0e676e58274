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
from dataclasses import dataclass

from migx_explore.compiler.ir import Module
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelSource,
    compute_type,
    decompose,
    index_type,
    kernel_params,
    offset_expr,
    source,
)

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
        return f"""if (aligned) {{
            #pragma unroll
            for (int i = 0; i < {self.per_thread}; ++i) {{
                {self._vec_index()}
                {self.name}_r[i] = make_uint4(0, 0, 0, 0);
                const {self.it} at = {self.base} + ({start} + j) * {self.row_stride} + c;
                const bool in_tile = e < {self.rows * self.cols // 8} && {start} + j < {self.n};
                if (in_tile) {self.name}_r[i] = *(const uint4*)({self.ptr} + at);
            }}
        }}"""

    def put(self, dst: str) -> str:
        scalar = f"""for (int e = threadIdx.x; e < {self.rows * self.cols}; e += {self.threads}) {{
                const int j = e / {self.cols}, c = e % {self.cols};
                const {self.it} at = {self.base} + (j0 + j) * {self.row_stride} + c * {self.col_stride};
                {dst}[j * {self.cols + PAD} + c] = (j0 + j < {self.n}) ? {self.ptr}[at].bits : 0;
            }}"""
        if not self.vector:
            return scalar
        return f"""if (aligned) {{
            #pragma unroll
            for (int i = 0; i < {self.per_thread}; ++i) {{
                {self._vec_index()}
                if (e < {self.rows * self.cols // 8}) *(uint4*)({dst} + j * {self.cols + PAD} + c) = {self.name}_r[i];
            }}
        }} else {{
            {scalar}
        }}"""


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


def mma_attention_kernel(plan, module: Module, shapes: Sequence[Shape], score_lines, name: str) -> KernelSource:
    """`plan`: attention.AttentionPlan; `score_lines(offsets, preloaded)` -> (C++ lines, score
    expr) reading s, row, j, the batch coordinates b0.. and, for each score-chain input k, the
    expression preloaded(k); params: the group's inputs, then the output."""
    out = shapes[-1]
    qs, ks, vs = shapes[plan.q], shapes[plan.k], shapes[plan.v]
    *batch, m, d = qs.lens
    n, dv = ks.lens[-1], vs.lens[-1]
    nb = math.prod(batch)
    ty = MMA_TYPES[qs.type]
    row_tiles = nb * -(-m // 16)
    splits, bn = _split_and_key_tile(row_tiles, n, d, dv)
    # A split kernel keeps one query tile per block: its warps are the tile's key splits.
    warps = splits if splits > 1 else max(1, min(MAX_WARPS, -(-m // 16)))
    threads = 32 * warps
    rows = 16 * (warps // splits)
    block_keys = splits * bn  # keys copied to shared memory per step, bn per warp of a query tile
    smem = max(2 * block_keys * (d + dv + 2 * PAD), _merge_bytes(warps, dv) if splits > 1 else 0)
    row_blocks = -(-m // rows)
    it = index_type(shapes)
    nbd = len(batch)
    offsets = {
        k: (offset_expr([f"b{i}" for i in range(nbd)], s.strides[:nbd]) if nbd else "0") for k, s in enumerate(shapes)
    }
    used: list[int] = []  # score-chain inputs (masks), read into registers one key tile ahead

    def preloaded(k: int) -> str:
        if k not in used:
            used.append(k)
        return f"pf{k}[nt][e]"

    lines, score = score_lines(offsets, preloaded)
    score_body = "\n                    ".join(lines)
    pf_decl = " ".join(f"{compute_type(shapes[k].type)} pf{k}[NT][4];" for k in used)

    def pf_fetch(start: str) -> str:
        """Read tile `start`'s mask values into pf*: independent loads issued together, one tile
        ahead, rather than one dependent load per score (indices clamped: out-of-range scores
        are never used)."""
        if not used:
            return ""
        loads = "\n                ".join(
            f"pf{k}[nt][e] = migx::load(p{k}, {offsets[k]} + rc * {shapes[k].strides[-2]} + "
            f"jc * {shapes[k].strides[-1]});"
            for k in used
        )
        return f"""#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {{
            #pragma unroll
            for (int e = 0; e < 4; ++e) {{
                const {it} rc = migx::min_(({it})(row0 + g + (e >> 1) * 8), ({it}){m - 1});
                const {it} jc = migx::min_(({it})({start} + nt * 8 + 2 * t + (e & 1)), ({it}){n - 1});
                {loads}
            }}
        }}"""

    if smem > MAX_SHARED_BYTES:
        raise CodegenUnsupported(f"attention head dims {d}/{dv} need {smem} bytes of shared memory")
    batch_lines = "\n    ".join(decompose("bh", batch, it, "b")) if nbd else ""
    nout = len(shapes) - 1
    # K is the dot's [d, n] operand (a transpose view): rows are keys along its last axis.
    k_vec, v_vec = _vectorizable(ks, -2, nbd), _vectorizable(vs, -1, nbd)
    k_copy = _TileCopy(
        "k", f"p{plan.k}", "k_base", block_keys, d, ks.strides[-1], ks.strides[-2], n, k_vec, threads, it
    )
    v_copy = _TileCopy(
        "v", f"p{plan.v}", "v_base", block_keys, dv, vs.strides[-2], vs.strides[-1], n, v_vec, threads, it
    )
    aligned = " | ".join(f"(unsigned long long)p{i}" for i, vec in ((plan.k, k_vec), (plan.v, v_vec)) if vec)

    def value(acc: str, total: str) -> str:
        if plan.nan_guard:
            return f"{total} > 0.0f ? {acc} / {total} : 0.0f;  // where(isnan(p), 0, p): no unmasked key gives 0"
        return f"{acc} / {total};  // no unmasked key: 0/0 = NaN, as softmax over all -inf"

    store = f"if (row < {m}) migx::store(p{nout}, o_base + row * {out.strides[-2]} + c * {out.strides[-1]}, y);"
    if splits == 1:
        write_out = f"""#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {{
        #pragma unroll
        for (int e = 0; e < 4; ++e) {{
            const {it} row = row0 + g + (e >> 1) * 8;
            const {it} c = dt * 8 + 2 * t + (e & 1);
            const float l = l_run[e >> 1];
            const float y = {value("o[dt][e]", "l")}
            {store}
        }}
    }}"""
    else:
        # Each split warp holds its keys' unnormalised output, running max and sum; a row's
        # result rescales every split to the largest max (FlashAttention's merge, in the block).
        write_out = f"""__syncthreads();  // every warp is done with k_s / v_s: their space takes the partials
    float* part_o = (float*)smem;  // [warp][16 rows][dv]
    float* part_ml = part_o + {warps * 16 * dv};  // [warp][16 rows][max, sum]
    #pragma unroll
    for (int dt = 0; dt < DT; ++dt) {{
        #pragma unroll
        for (int e = 0; e < 4; ++e) part_o[(warp * 16 + g + (e >> 1) * 8) * {dv} + dt * 8 + 2 * t + (e & 1)] = o[dt][e];
    }}
    if (t == 0) {{
        part_ml[(warp * 16 + g) * 2] = m_run[0];
        part_ml[(warp * 16 + g) * 2 + 1] = l_run[0];
        part_ml[(warp * 16 + g + 8) * 2] = m_run[1];
        part_ml[(warp * 16 + g + 8) * 2 + 1] = l_run[1];
    }}
    __syncthreads();
    const int tile_warp0 = (warp / SPLITS) * SPLITS;
    for (int e = split * 32 + lane; e < {16 * dv}; e += SPLITS * 32) {{
        const int r = e / {dv}, c = e % {dv};
        float mx = -migx::inf_f();
        #pragma unroll
        for (int s = 0; s < SPLITS; ++s) mx = migx::max_(mx, part_ml[((tile_warp0 + s) * 16 + r) * 2]);
        float l = 0.0f, acc = 0.0f;
        #pragma unroll
        for (int s = 0; s < SPLITS; ++s) {{
            const float ms = part_ml[((tile_warp0 + s) * 16 + r) * 2];
            const float w = ms == -migx::inf_f() ? 0.0f : expf(ms - mx);  // a split with no unmasked key adds nothing
            l += w * part_ml[((tile_warp0 + s) * 16 + r) * 2 + 1];
            acc += w * part_o[((tile_warp0 + s) * 16 + r) * {dv} + c];
        }}
        const {it} row = row0 + r;
        const float y = {value("acc", "l")}
        {store}
    }}"""
    kname = name.replace("attention_", "attention_mma_", 1) + "_kernel"  # still attention_*[_guarded]_kernel
    src = f"""
constexpr int KD = {d // 16};  // 16-wide chunks of the head dim (Q·Kᵀ reduction)
constexpr int NT = {bn // 8};  // 8-key score tiles per warp's key tile
constexpr int DT = {dv // 8};  // 8-wide output column tiles
constexpr int SPLITS = {splits};  // warps per query tile, each over its own bn keys of a step

MIGX_GLOBAL void {kname}({kernel_params(shapes, [False] * nout + [True])}) {{
    migx::kernel_entry();
    __shared__ __attribute__((aligned(16))) unsigned char smem[{smem}];
    unsigned short* k_s = (unsigned short*)smem;  // [block_keys][d + PAD]
    unsigned short* v_s = k_s + {block_keys * (d + PAD)};  // [block_keys][dv + PAD]
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int warp = threadIdx.x / 32, split = warp % SPLITS;
    const {it} bh = blockIdx.x / {row_blocks};
    const {it} row0 = (blockIdx.x % {row_blocks}) * {rows} + (warp / SPLITS) * 16;
    {batch_lines}
    const {it} q_base = {offsets[plan.q]}, k_base = {offsets[plan.k]}, v_base = {offsets[plan.v]};
    const bool aligned = (({aligned or "0ull"}) & 15ull) == 0;
    (void)aligned;
    (void)split;
    unsigned qa[KD][4];
    #pragma unroll
    for (int kc = 0; kc < KD; ++kc) {{
        #pragma unroll
        for (int r = 0; r < 4; ++r) {{
            const {it} row = row0 + g + (r & 1) * 8;
            const {it} c = kc * 16 + 2 * t + (r >> 1) * 8;
            const {it} off = q_base + row * {qs.strides[-2]} + c * {qs.strides[-1]};
            const unsigned lo = row < {m} ? p{plan.q}[off].bits : 0;
            const unsigned hi = row < {m} ? p{plan.q}[off + {qs.strides[-1]}].bits : 0;
            qa[kc][r] = lo | (hi << 16);
        }}
    }}
    float m_run[2] = {{-migx::inf_f(), -migx::inf_f()}}, l_run[2] = {{0.0f, 0.0f}};  // rows g, g + 8
    float o[DT][4];
    #pragma unroll
    for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    {k_copy.decl()} {v_copy.decl()}
    {k_copy.fetch("0")}
    {v_copy.fetch("0")}
    {pf_decl}
    {pf_fetch(f"split * {bn}")}
    const unsigned short* k_w = k_s + split * {bn * (d + PAD)};  // this warp's keys of the step
    const unsigned short* v_w = v_s + split * {bn * (dv + PAD)};
    for (int j0 = 0; j0 < {n}; j0 += {block_keys}) {{
        __syncthreads();
        {k_copy.put("k_s")}
        {v_copy.put("v_s")}
        __syncthreads();
        if (j0 + {block_keys} < {n}) {{
            {k_copy.fetch(f"(j0 + {block_keys})")}
            {v_copy.fetch(f"(j0 + {block_keys})")}
        }}
        const int jw = j0 + split * {bn};  // first key of this warp's share
        if (jw >= {n}) continue;  // warp-uniform: past the last key, this split has nothing left
        // Fragments first, then NT independent mma: one warp per scheduler is all the SM has
        // at these sizes, so consecutive tensor-core instructions must not wait on each other.
        float sc[NT][4];
        #pragma unroll
        for (int nt = 0; nt < NT; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
        #pragma unroll
        for (int kc = 0; kc < KD; ++kc) {{
            unsigned kb[NT][2];
            #pragma unroll
            for (int nt = 0; nt < NT; ++nt) {{
                const unsigned short* kr = k_w + (nt * 8 + g) * {d + PAD} + kc * 16 + 2 * t;
                kb[nt][0] = *(const unsigned*)kr;
                kb[nt][1] = *(const unsigned*)(kr + 8);
            }}
            #pragma unroll
            for (int nt = 0; nt < NT; ++nt) migx::mma_16816<{ty}>(sc[nt], qa[kc], kb[nt]);
        }}
        float mx[2] = {{-migx::inf_f(), -migx::inf_f()}};
        #pragma unroll
        for (int nt = 0; nt < NT; ++nt) {{
            #pragma unroll
            for (int e = 0; e < 4; ++e) {{
                const {it} row = row0 + g + (e >> 1) * 8;
                const {it} j = jw + nt * 8 + 2 * t + (e & 1);
                float x = -migx::inf_f();
                if (row < {m} && j < {n}) {{
                    const float s = sc[nt][e];
                    {score_body}
                    x = {score};
                }}
                sc[nt][e] = x;
                mx[e >> 1] = migx::max_(mx[e >> 1], x);
            }}
        }}
        if (jw + {block_keys} < {n}) {{
            {pf_fetch(f"(jw + {block_keys})")}
        }}
        float alpha[2];
        #pragma unroll
        for (int h = 0; h < 2; ++h) {{
            // the row's four lanes (4g .. 4g+3) agree on its maximum
            mx[h] = migx::max_(mx[h], MIGX_SHFL_XOR32(mx[h], 1));
            mx[h] = migx::max_(mx[h], MIGX_SHFL_XOR32(mx[h], 2));
            const float m_new = migx::max_(m_run[h], mx[h]);
            // A row whose keys so far are all masked (-inf) has nothing to rescale yet.
            alpha[h] = m_new == -migx::inf_f() ? 1.0f : expf(m_run[h] - m_new);
            m_run[h] = m_new;
            l_run[h] *= alpha[h];  // this lane's share of the row sum; lanes are summed at the end
        }}
        #pragma unroll
        for (int nt = 0; nt < NT; ++nt) {{
            #pragma unroll
            for (int e = 0; e < 4; ++e) {{
                const float x = sc[nt][e];
                const float p = x == -migx::inf_f() ? 0.0f : expf(x - m_run[e >> 1]);
                sc[nt][e] = p;
                l_run[e >> 1] += p;
            }}
        }}
        #pragma unroll
        for (int dt = 0; dt < DT; ++dt) {{
            o[dt][0] *= alpha[0]; o[dt][1] *= alpha[0]; o[dt][2] *= alpha[1]; o[dt][3] *= alpha[1];
        }}
        #pragma unroll
        for (int kc = 0; kc < NT / 2; ++kc) {{
            const unsigned pa[4] = {{migx::pack2<{ty}>(sc[2 * kc][0], sc[2 * kc][1]),
                                    migx::pack2<{ty}>(sc[2 * kc][2], sc[2 * kc][3]),
                                    migx::pack2<{ty}>(sc[2 * kc + 1][0], sc[2 * kc + 1][1]),
                                    migx::pack2<{ty}>(sc[2 * kc + 1][2], sc[2 * kc + 1][3])}};
            unsigned vb[DT][2];
            #pragma unroll
            for (int dt = 0; dt < DT; ++dt) migx::load_b_trans(vb[dt], v_w + kc * 16 * {dv + PAD} + dt * 8, {dv + PAD});
            #pragma unroll
            for (int dt = 0; dt < DT; ++dt) migx::mma_16816<{ty}>(o[dt], pa, vb[dt]);
        }}
    }}
    #pragma unroll
    for (int h = 0; h < 2; ++h) {{
        l_run[h] += MIGX_SHFL_XOR32(l_run[h], 1);
        l_run[h] += MIGX_SHFL_XOR32(l_run[h], 2);
    }}
    const {it} o_base = {offsets[nout]};
    {write_out}
}}"""
    blocks = nb * row_blocks
    return KernelSource(kname, source(src), blocks * threads, threads)
