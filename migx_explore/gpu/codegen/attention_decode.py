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
    batch_offsets,
    decompose,
    index_type,
    kernel_params,
    source,
)
from .templates import render

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


def _appended(
    a: Append, shapes: Sequence[Shape], offsets: dict[int, str], d: int, dv: int, it: str, reads: tuple[str, str]
) -> tuple[str, str, str]:
    """(lines, K read, V read) for a step that appends its rows to the caches: the block writes
    its head's new rows into both caches, and the key loop reads rows P .. P + T - 1 from
    k_new / v_new instead (the cache writes of other blocks are not visible to it)."""
    kn, vn, ck, cv = shapes[a.k_new], shapes[a.v_new], shapes[a.cache_k], shapes[a.cache_v]
    t = kn.lens[-2]
    if vn.lens[-2] != t or kn.lens[-1] != d or vn.lens[-1] != dv:
        raise CodegenUnsupported("kv_attention: new K/V rows do not match the head dims")
    k_read = (
        f"(fits && j >= P && j < P + {t} ? migx::load(p{a.k_new}, kn_base + (j - P) * {kn.strides[-2]}"
        f" + c * {kn.strides[-1]}) : {reads[0]})"
    )
    v_read = (
        f"(fits && jv >= P && jv < P + {t} ? migx::load(p{a.v_new}, vn_base + (jv - P) * {vn.strides[-2]}"
        f" + c * {vn.strides[-1]}) : {reads[1]})"
    )
    lines = render(
        "attention_decode.hpp",
        "append",
        past=a.past,
        room=ck.lens[-2] - t,
        it=it,
        kn_base=offsets[a.k_new],
        vn_base=offsets[a.v_new],
        ck_base=offsets[a.cache_k],
        cv_base=offsets[a.cache_v],
        new_elements=t * max(d, dv),
        threads=32 * WARPS,
        width=max(d, dv),
        d=d,
        cache_k=a.cache_k,
        ck_row=ck.strides[-2],
        ck_col=ck.strides[-1],
        k_new=a.k_new,
        kn_row=kn.strides[-2],
        kn_col=kn.strides[-1],
        dv=dv,
        cache_v=a.cache_v,
        cv_row=cv.strides[-2],
        cv_col=cv.strides[-1],
        v_new=a.v_new,
        vn_row=vn.strides[-2],
        vn_col=vn.strides[-1],
    )
    return lines, k_read, v_read


def _dims(qs: Shape, ks: Shape, vs: Shape, out: Shape) -> tuple[list[int], int, int, int]:
    """(batch lens, d, keys, dv), or CodegenUnsupported where the decode kernel does not apply."""
    *batch, m, d = qs.lens
    n, dv = ks.lens[-1], vs.lens[-1]
    if m != 1 or dv > MAX_DV or d > 256:
        raise CodegenUnsupported(f"decode attention takes one query row and head dims <= 256/{MAX_DV}")
    if out.ndim != qs.ndim or list(out.lens) != [*batch, m, dv]:
        raise CodegenUnsupported(f"attention output {list(out.lens)} is not [batch..., {m}, {dv}]")
    return batch, d, n, dv


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
    nout = append.out if append else len(shapes) - 1
    out = shapes[nout]
    qs, ks, vs = shapes[plan.q], shapes[plan.k], shapes[plan.v]
    if kv_views is not None:
        ks, vs = kv_views
    batch, d, n, dv = _dims(qs, ks, vs, out)
    threads = 32 * WARPS
    it = index_type(shapes)
    nbd = len(batch)
    offsets = batch_offsets(shapes, nbd)
    lines, score = score_lines(offsets)
    k_read = f"migx::load(p{plan.k}, k_base + j * {ks.strides[-1]} + c * {ks.strides[-2]})"
    v_read = f"migx::load(p{plan.v}, v_base + jv * {vs.strides[-2]} + c * {vs.strides[-1]})"
    append_lines = ""
    if append is not None:
        append_lines, k_read, v_read = _appended(append, shapes, offsets, d, dv, it, (k_read, v_read))
    name = f"{name}_decode"
    src = render(
        "attention_decode.hpp",
        "kernel",
        warps=WARPS,
        dv=dv,
        name=name,
        params=kernel_params(shapes, [k >= nout for k in range(len(shapes))]),
        d=d,
        it=it,
        batch_lines="\n    ".join(decompose("bh", batch, it, "b")) if nbd else "",
        q_base=offsets[plan.q],
        k_base=offsets[plan.k],
        v_base=offsets[plan.v],
        append_lines=append_lines,
        threads=threads,
        q=plan.q,
        q_col=qs.strides[-1],
        n=n,
        k_read=k_read,
        score_body="\n            ".join(lines),
        score=score,
        v_read=v_read,
        o_base=offsets[nout],
        nout=nout,
        o_col=out.strides[-1],
        value="l > 0.0f ? a / l : 0.0f" if plan.nan_guard else "a / l",  # guard: a fully masked row gives 0
    )
    return KernelSource(name + "_kernel", source(src), math.prod(batch) * threads, threads)
