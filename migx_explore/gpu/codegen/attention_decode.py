"""Single-query attention (a decode step: one query row per batch/head) for `group[tag=attention]`.

attention.py's flash kernel gives each warp one query row and streams the keys through shared
memory one warp-size tile after another; with one row per head, one warp of its block works and
the others wait at every tile's barriers, so gpt2_decode's 4 heads x 128 keys took 6.5 us per layer
on an H200 (a quarter of the whole step). Here the keys of the one row are split across the
block's warps instead (split-K inside the block, as flash-decoding splits them across blocks):
each warp runs the online softmax over its own tiles, reading K and V straight from global memory
(each value is read once, so staging it in shared memory would only add barriers), and the warps'
(max, sum, accumulator) triples are merged at the end:

    M = max_w m_w;  out = sum_w exp(m_w - M) acc_w / sum_w exp(m_w - M) l_w

The score chain (scale, mask, where) is attention.py's, emitted from the group's submodule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from migx_explore.compiler.ir import Module
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelSource,
    decompose,
    index_type,
    kernel_params,
    offset_expr,
    source,
)

WARPS = 4  # warps sharing one row's keys (128 threads: 4 x 32 keys in flight per step)
MAX_DV = 128  # output columns one lane keeps (up to 4 per lane)


@dataclass(frozen=True)
class Append:
    """group[tag=kv_attention] (fuse_kv_append): kernel params of the new K/V rows, the past length
    and the two cache outputs (the attention output is param `out`)."""

    k_new: int
    v_new: int
    past: int
    out: int
    cache_k: int
    cache_v: int


def decode_attention_applies(shapes: Sequence[Shape], q: int) -> bool:
    """One query row per batch/head."""
    return shapes[q].ndim >= 2 and shapes[q].lens[-2] == 1


def decode_attention_kernel(
    plan,
    module: Module,
    shapes: Sequence[Shape],
    score_lines: Callable,
    name: str,
    append: Append | None = None,
    kv_views: tuple[Shape, Shape] | None = None,
) -> KernelSource:
    """`plan`: attention.AttentionPlan; `score_lines(offsets)` -> (C++ lines, score expr) reading
    s, row, j and the batch coordinates b0..; params: the group's inputs, then the output.
    With `append`, plan.k / plan.v are the cache params, read through `kv_views` (Kᵀ's and V's
    view shapes over them), and the step's new rows are written into the cache outputs and read
    from k_new / v_new while attending (rows past_len .. past_len + T - 1)."""
    nout_at = append.out if append else len(shapes) - 1
    out = shapes[nout_at]
    qs, ks, vs = shapes[plan.q], shapes[plan.k], shapes[plan.v]
    if kv_views is not None:
        ks, vs = kv_views
    *batch, m, d = qs.lens
    n, dv = ks.lens[-1], vs.lens[-1]
    if m != 1 or dv > MAX_DV or d > 256:
        raise CodegenUnsupported(f"decode attention takes one query row and head dims <= 256/{MAX_DV}")
    if out.ndim != qs.ndim or list(out.lens) != [*batch, m, dv]:
        raise CodegenUnsupported(f"attention output {list(out.lens)} is not [batch..., {m}, {dv}]")
    nb = math.prod(batch)
    threads = 32 * WARPS
    it = index_type(shapes)
    nbd = len(batch)
    bcoords = [f"b{i}" for i in range(nbd)]
    offsets = {k: (offset_expr(bcoords, s.strides[:nbd]) if nbd else "0") for k, s in enumerate(shapes)}
    lines, score = score_lines(offsets)
    score_body = "\n            ".join(lines)
    batch_lines = "\n    ".join(decompose("bh", batch, it, "b")) if nbd else ""
    nout = nout_at
    kj, kc, vj, vc = ks.strides[-1], ks.strides[-2], vs.strides[-2], vs.strides[-1]
    k_at = f"k_base + j * {kj} + c * {kc}"
    v_at = f"v_base + jv * {vj} + c * {vc}"
    k_read, v_read = f"migx::load(p{plan.k}, {k_at})", f"migx::load(p{plan.v}, {v_at})"
    append_lines = ""
    if append is not None:
        a = append
        kn, vn, ck, cv = shapes[a.k_new], shapes[a.v_new], shapes[a.cache_k], shapes[a.cache_v]
        t = kn.lens[-2]
        if vn.lens[-2] != t or kn.lens[-1] != d or vn.lens[-1] != dv:
            raise CodegenUnsupported("kv_attention: new K/V rows do not match the head dims")
        room = ck.lens[-2] - t
        k_read = (
            f"(fits && j >= P && j < P + {t} ? migx::load(p{a.k_new}, kn_base + (j - P) * {kn.strides[-2]}"
            f" + c * {kn.strides[-1]}) : {k_read})"
        )
        v_read = (
            f"(fits && jv >= P && jv < P + {t} ? migx::load(p{a.v_new}, vn_base + (jv - P) * {vn.strides[-2]}"
            f" + c * {vn.strides[-1]}) : {v_read})"
        )
        append_lines = f"""const long long P = (long long)p{a.past}[0];
    // a write that does not fit is dropped (concat_past_present's guard), and then nothing is substituted
    const bool fits = P >= 0 && P <= {room};
    const {it} kn_base = {offsets[a.k_new]}, vn_base = {offsets[a.v_new]};
    const {it} ck_base = {offsets[a.cache_k]}, cv_base = {offsets[a.cache_v]};
    // this block's head: the new rows into both caches (the keys below read them from k_new / v_new)
    for (int e = threadIdx.x; fits && e < {t * max(d, dv)}; e += {threads}) {{
        const int r = e / {max(d, dv)}, c = e % {max(d, dv)};
        if (c < {d})
            migx::store(p{a.cache_k}, ck_base + (P + r) * {ck.strides[-2]} + c * {ck.strides[-1]},
                        migx::load(p{a.k_new}, kn_base + r * {kn.strides[-2]} + c * {kn.strides[-1]}));
        if (c < {dv})
            migx::store(p{a.cache_v}, cv_base + (P + r) * {cv.strides[-2]} + c * {cv.strides[-1]},
                        migx::load(p{a.v_new}, vn_base + r * {vn.strides[-2]} + c * {vn.strides[-1]}));
    }}"""
    value = "l > 0.0f ? a / l : 0.0f" if plan.nan_guard else "a / l"  # guard: a fully masked row gives 0
    name = f"{name}_decode"
    writes = [k >= nout for k in range(len(shapes))]
    src = f"""
constexpr int NWARPS = {WARPS};
constexpr int DVL = ({dv} + MIGX_WARP_SIZE - 1) / MIGX_WARP_SIZE;  // output columns per lane

MIGX_GLOBAL void {name}_kernel({kernel_params(shapes, writes)}) {{
    migx::kernel_entry();
    __shared__ float q_s[{d}];
    __shared__ float p_s[NWARPS][MIGX_WARP_SIZE];
    __shared__ float m_s[NWARPS], l_s[NWARPS];
    __shared__ float acc_s[NWARPS][{dv}];
    const int lane = threadIdx.x % MIGX_WARP_SIZE;
    const int warp = threadIdx.x / MIGX_WARP_SIZE;
    const {it} bh = blockIdx.x;
    {batch_lines}
    const {it} q_base = {offsets[plan.q]}, k_base = {offsets[plan.k]}, v_base = {offsets[plan.v]};
    const {it} row = 0;
    {append_lines}
    for (int c = threadIdx.x; c < {d}; c += {threads})
        q_s[c] = (float)migx::load(p{plan.q}, q_base + c * {qs.strides[-1]});
    __syncthreads();
    float m_run = -migx::inf_f(), l_run = 0.0f, acc[DVL];
    for (int t = 0; t < DVL; ++t) acc[t] = 0.0f;
    // the same trip count in every warp, so the barriers below are reached by all
    for (int base = 0; base < {n}; base += NWARPS * MIGX_WARP_SIZE) {{
        const int j0 = base + warp * MIGX_WARP_SIZE;
        const {it} j = j0 + lane;
        float x = -migx::inf_f();
        if (j < {n}) {{
            float s4[4] = {{}};
            #pragma unroll
            for (int c = 0; c < {d}; ++c)
                s4[c % 4] += q_s[c] * (float){k_read};
            float s = (s4[0] + s4[1]) + (s4[2] + s4[3]);
            {score_body}
            x = {score};
        }}
        const float m_new = migx::max_(m_run, migx::warp_reduce(x, migx::op_max{{}}));
        // keys all masked so far: nothing to rescale yet
        const float alpha = m_new == -migx::inf_f() ? 1.0f : expf(m_run - m_new);
        const float p = x == -migx::inf_f() ? 0.0f : expf(x - m_new);
        l_run = l_run * alpha + migx::warp_reduce(p, migx::op_sum{{}});
        m_run = m_new;
        p_s[warp][lane] = p;
        __syncthreads();
        const int keys = {n} - j0 < MIGX_WARP_SIZE ? {n} - j0 : MIGX_WARP_SIZE;
        for (int t = 0; t < DVL; ++t) {{
            const int c = lane + t * MIGX_WARP_SIZE;
            if (c < {dv}) {{
                float a4[4] = {{}};
                // a constant trip count, unrolled, so the tile's V loads are all in flight at once
                // (a loop to `keys` issues them one L2 round trip after another)
                #pragma unroll
                for (int jj = 0; jj < MIGX_WARP_SIZE; ++jj) {{
                    if (jj < keys) {{
                        const {it} jv = j0 + jj;
                        a4[jj % 4] += p_s[warp][jj] * (float){v_read};
                    }}
                }}
                acc[t] = acc[t] * alpha + ((a4[0] + a4[1]) + (a4[2] + a4[3]));
            }}
        }}
        __syncthreads();
    }}
    if (lane == 0) {{ m_s[warp] = m_run; l_s[warp] = l_run; }}
    for (int t = 0; t < DVL; ++t) {{
        const int c = lane + t * MIGX_WARP_SIZE;
        if (c < {dv}) acc_s[warp][c] = acc[t];
    }}
    __syncthreads();
    float mx = -migx::inf_f();
    for (int w = 0; w < NWARPS; ++w) mx = migx::max_(mx, m_s[w]);
    const {it} o_base = {offsets[nout]};
    for (int c = threadIdx.x; c < {dv}; c += {threads}) {{
        float a = 0.0f, l = 0.0f;
        for (int w = 0; w < NWARPS; ++w) {{
            // a warp whose keys were all masked (m = -inf) adds nothing
            const float e = m_s[w] == -migx::inf_f() ? 0.0f : expf(m_s[w] - mx);
            a += e * acc_s[w][c];
            l += e * l_s[w];
        }}
        migx::store(p{nout}, o_base + c * {out.strides[-1]}, {value});
    }}
}}"""
    return KernelSource(name + "_kernel", source(src), nb * threads, threads)
