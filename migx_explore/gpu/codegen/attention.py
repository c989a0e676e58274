"""The flash-attention kernel for `group[tag=attention]` (fuse_attention's groups).

One kernel computes out = softmax(score(Q·Kᵀ)) · V without writing the score matrix anywhere:
a block takes ROWS query rows of one batch/head, K and V stream through shared memory one tile
of warp-size keys at a time, each lane scores one key, and each row keeps a running maximum, a
running sum and its output accumulator in registers (the online softmax of FlashAttention):

    m' = max(m, max_j s_j);  α = exp(m - m');  l = α·l + Σ_j exp(s_j - m');  acc = α·acc + Σ_j exp(s_j - m')·V_j

`score` is whatever elementwise chain the group holds between the first dot and the softmax
(a scale, an additive mask, a `where` with a -inf fill): it is emitted from the submodule with the
same expression table as pointwise kernels, each mask input read through its own strides at
(row, key). A group whose probabilities carry the exporters' NaN guard, where(isnan(p), 0, p),
writes 0 for a row with no unmasked key (where the unguarded softmax gives 0/0 = NaN).
Every length and stride is a compile-time constant; storage types come from the shapes and
arithmetic is float, so half and bfloat16 inputs need no other code. Half and bfloat16 groups
whose head dims are multiples of 16 go to attention_mma.py's tensor-core kernel instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.strided_view import VIEW_CHAIN_OPS, axes_of, compose, refine_batch

from .attention_decode import Append, decode_attention_applies, decode_attention_kernel
from .attention_mma import mma_attention_applies, mma_attention_kernel
from .common import (
    CodegenUnsupported,
    KernelRequest,
    KernelSource,
    RequestGenerator,
    batch_offsets,
    compute_type,
    decompose,
    index_type,
    kernel_params,
    source,
)
from .expr import op_expr, scalar_literal
from .templates import render

THREADS = 128  # a multiple of 64: whole waves on AMD, four warps on NVIDIA
# Up to 8192 query rows in all each warp takes one row, in blocks of SMALL_THREADS: more rows
# share each K/V tile load (H200, 4 heads x 128 rows, fp16: head dim 64 14.3 us at 256 threads
# against 18.9 at 128 and 16.3 at 512; head dim 32 11.1 against 13.8; gpu_attention.py --sweep).
SMALL_THREADS = 256
ROWS_PER_WARP = 0  # 0: one query row per warp up to 8192 rows in all (SMALL_THREADS), else four (THREADS)
MAX_SHARED_BYTES = 48 * 1024
# Half and bfloat16 groups with head dims multiples of 16 take attention_mma.py's tensor-core
# kernel (False: this kernel for every type; benchmarks/gpu_attention.py compares the two).
USE_TENSOR_CORES = True
# Groups with one query row per batch/head (a decode step) take attention_decode.py's kernel, which
# splits the keys across the block's warps (False: this kernel; 6.5 against ~2 us per layer of
# gpt2_decode on an H200).
USE_DECODE_KERNEL = True


@dataclass(frozen=True)
class AttentionPlan:
    q: int  # param indices of the group's inputs
    k: int
    v: int
    dot1: Instruction
    scores: Instruction  # softmax input: the last instruction of the score chain
    chain: tuple[Instruction, ...]  # module order, up to `scores`, after the params
    nan_guard: bool = False  # the probabilities pass through where(isnan(p), 0, p)
    # views inside the group between the param and Q, Kᵀ, V (fuse_attention's
    # fold_attention_views), source side first; the kernel reads through them
    views: tuple[tuple[Instruction, ...], ...] = ((), (), ())


def _operand(
    module: Module, x: Instruction, params: dict[int, int], what: str, computed_ok: bool = False
) -> tuple[int, tuple[Instruction, ...]]:
    """The param index `x` reads and the views in between (source side first); (-1, ()) for an
    operand computed inside the group when computed_ok (kv_attention's appended K/V)."""
    chain = []
    while x.id not in params and x.name in VIEW_CHAIN_OPS and len(x.inputs) == 1:
        chain.append(x)
        x = x.inputs[0]
    if x.id not in params:
        if computed_ok:
            return -1, ()
        raise CodegenUnsupported(f"{module.name}: {what} is computed inside the group, not an input")
    return params[x.id], tuple(reversed(chain))


def attention_plan(module: Module, computed_kv: bool = False) -> AttentionPlan:
    """computed_kv: K and V may be computed inside the group (kv_attention's appends; their
    indices are then -1 and the caller supplies them)."""
    params = {p.id: k for k, p in enumerate(module.params())}
    dots = [i for i in module if i.name == "dot"]
    if len(dots) != 2:
        raise CodegenUnsupported(f"{module.name}: an attention group has 2 dots, found {len(dots)}")
    dot1, dot2 = dots
    sm = next((i for i in module if i.name in ("softmax", "reduce_max")), None)
    if sm is None:
        raise CodegenUnsupported(f"{module.name}: no softmax in the attention group")
    scores = sm.inputs[0]
    (q, qv), (k, kv), (v, vv) = (
        _operand(module, x, params, what, computed_ok=computed_kv and what != "Q")
        for x, what in ((dot1.inputs[0], "Q"), (dot1.inputs[1], "K"), (dot2.inputs[1], "V"))
    )
    views = {i.id for c in (qv, kv, vv) for i in c}
    order = list(module)
    chain = tuple(i for i in order[: order.index(scores) + 1] if not i.is_param() and i.id not in views)
    probs = dot2.inputs[0]
    while probs.name == "convert":
        probs = probs.inputs[0]
    # fuse_attention admits the guard only with a 0 fill (fuse_attention.unguarded_probs)
    guard = probs.name == "where" and probs.inputs[0].name == "isnan"
    return AttentionPlan(q, k, v, dot1, scores, chain, guard, (qv, kv, vv))


def attention_shapes(plan: AttentionPlan, shapes: Sequence[Shape]) -> list[Shape]:
    """`shapes` as the kernel reads them: Q, Kᵀ and V through the group's views, and the batch
    axes of every operand split alike where the views need it (a repeated K/V head axis becomes
    [Hkv, rep] with stride 0 on rep, and so do Q's, the masks' and the output's head axes)."""
    if not any(plan.views):
        return list(shapes)
    nbd = shapes[-1].ndim - 2
    axes, tails = [], []
    for k, s in enumerate(shapes):
        chain = dict(zip((plan.q, plan.k, plan.v), plan.views)).get(k, ())
        a = compose(s, chain) if chain else axes_of(s)
        if a is None or len(a) != nbd + 2:
            raise CodegenUnsupported(f"input {k} {s} does not read as one strided tensor through the group's views")
        axes.append(a)
        tails.append((chain[-1].shape if chain else s).lens[-2:])
    refined = refine_batch(axes, nbd)
    if refined is None:
        raise CodegenUnsupported("the views of Q, Kᵀ and V split the batch axes in ways no one strided read follows")
    lens, strides = refined
    return [Shape.of(s.type, [*lens, *tail], st) for s, tail, st in zip(shapes, tails, strides)]


def attention_layout_refusal(module: Module, shapes: Sequence[Shape]) -> str | None:
    """Why the attention kernel cannot read its inputs with these shapes (None: it can)."""
    try:
        attention_shapes(attention_plan(module), shapes)
    except CodegenUnsupported as e:
        return str(e)
    return None


def _score_lines(
    plan: AttentionPlan,
    module: Module,
    shapes: Sequence[Shape],
    offsets: dict[int, str],
    preloaded: Callable[[int], str] | None = None,
) -> tuple[list[str], str]:
    """C++ computing the score of (row, j) from the dot value `s`; returns (lines, expr).
    `preloaded(k)`: the expression holding input k's value at (row, j), read earlier by the
    caller (else a load here)."""
    params = {p.id: k for k, p in enumerate(module.params())}
    env: dict[int, tuple[str, str]] = {}
    lines: list[str] = []
    for ins in plan.chain:
        if ins is plan.dot1:
            env[ins.id] = ("s", ins.shape.type)
            continue
        if ins.is_literal():
            env[ins.id] = (scalar_literal(ins), ins.shape.type)
            continue
        args = []
        for x in ins.inputs:
            if x.id in params and x.id not in env:
                k = params[x.id]
                sh = shapes[k]
                if preloaded is not None:
                    env[x.id] = (preloaded(k), sh.type)
                    args.append(env[x.id])
                    continue
                off = f"{offsets[k]} + row * {sh.strides[-2]} + j * {sh.strides[-1]}"
                var = f"m{k}"
                lines.append(f"const {compute_type(sh.type)} {var} = migx::load(p{k}, {off});")
                env[x.id] = (var, sh.type)
            args.append(env[x.id])
        expr = op_expr(ins.op, [a for a, _ in args], [t for _, t in args], ins.shape.type)
        var = f"v{ins.id}"
        lines.append(f"const {compute_type(ins.shape.type)} {var} = {expr};")
        env[ins.id] = (var, ins.shape.type)
    return lines, f"(float){env[plan.scores.id][0]}"


def _tile_load(dst: str, ptr: str, base: str, cols: int, srow: int, scol: int, pad: int, n: int, threads: int) -> str:
    """Cooperative copy of a (warp size x cols) tile, key j0 + j, into dst[j][c]; the thread
    index runs along whichever axis is contiguous in memory, so the loads coalesce."""
    if abs(scol) <= abs(srow):
        idx = f"const int j = e / {cols}, c = e % {cols};"
    else:
        idx = "const int j = e % MIGX_WARP_SIZE, c = e / MIGX_WARP_SIZE;"
    return render(
        "attention.hpp",
        "tile_load",
        cols=cols,
        threads=threads,
        idx=idx,
        dst=dst,
        pad=pad,
        n=n,
        ptr=ptr,
        base=base,
        srow=srow,
        scol=scol,
    )


def attention_kernel(module: Module, shapes: Sequence[Shape]) -> KernelSource:
    """params: the group's inputs (in order), then the output buffer."""
    plan = attention_plan(module)
    shapes = attention_shapes(plan, shapes)
    out = shapes[-1]
    qs, ks, vs = shapes[plan.q], shapes[plan.k], shapes[plan.v]
    *batch, m, d = qs.lens
    n, dv = ks.lens[-1], vs.lens[-1]
    nb = math.prod(batch)
    if out.ndim != qs.ndim or list(out.lens) != [*batch, m, dv]:
        raise CodegenUnsupported(f"attention output {list(out.lens)} is not [batch..., {m}, {dv}]")
    name = f"attention_{nb}x{m}x{n}x{d}x{dv}" + ("_guarded" if plan.nan_guard else "")
    if USE_TENSOR_CORES and mma_attention_applies(shapes, plan.q, plan.k, plan.v):
        return mma_attention_kernel(
            plan, module, shapes, lambda offs, pre: _score_lines(plan, module, shapes, offs, pre), name
        )
    if USE_DECODE_KERNEL and decode_attention_applies(shapes, plan.q) and dv <= 128 and d <= 256:
        return decode_attention_kernel(
            plan, module, shapes, lambda offs: _score_lines(plan, module, shapes, offs), name
        )
    return _scalar_attention_kernel(plan, module, shapes, name)


def _scalar_blocks(nb: int, m: int, d: int, dv: int) -> tuple[int, int]:
    """(query rows per block, threads per block) of the scalar kernel, checked against the shared
    memory it needs."""
    small = nb * m <= 8192
    rows_per_warp = ROWS_PER_WARP or (1 if small else 4)
    threads = SMALL_THREADS if small else THREADS
    rows = rows_per_warp * threads // 32  # rows per block, the same for every warp size
    # 32-wide warps (NVIDIA); 64-wide AMD waves need about twice this of their 64 KiB of LDS.
    smem = 4 * (rows * d + 32 * (d + 1) + 32 * dv + rows * 32)
    if smem > MAX_SHARED_BYTES:
        raise CodegenUnsupported(f"attention head dims {d}/{dv} need {smem} bytes of shared memory")
    return rows, threads


def _scalar_attention_kernel(plan: AttentionPlan, module: Module, shapes: Sequence[Shape], name: str) -> KernelSource:
    out = shapes[-1]
    qs, ks, vs = shapes[plan.q], shapes[plan.k], shapes[plan.v]
    *batch, m, d = qs.lens
    n, dv = ks.lens[-1], vs.lens[-1]
    rows, threads = _scalar_blocks(math.prod(batch), m, d, dv)
    it = index_type(shapes)
    nbd = len(batch)
    offsets = batch_offsets(shapes, nbd)
    score_lines, score = _score_lines(plan, module, shapes, offsets)
    nout = len(shapes) - 1
    if plan.nan_guard:
        row_comment = "// where(isnan(p), 0, p): a row with no unmasked key (l = 0) gives 0."
        row_value = "l_run[r] > 0.0f ? acc[r][t] / l_run[r] : 0.0f"
    else:
        row_comment = "// A fully masked row gives 0/0 = NaN, as softmax over all -inf does."
        row_value = "acc[r][t] / l_run[r]"
    src = render(
        "attention.hpp",
        "kernel",
        rows=rows,
        threads=threads,
        dv=dv,
        name=name,
        params=kernel_params(shapes, [False] * nout + [True]),
        d=d,
        it=it,
        row_blocks=-(-m // rows),
        batch_lines="\n    ".join(decompose("bh", batch, it, "b")) if nbd else "",
        q_base=offsets[plan.q],
        k_base=offsets[plan.k],
        v_base=offsets[plan.v],
        q_row=qs.strides[-2],
        q_col=qs.strides[-1],
        m=m,
        q=plan.q,
        n=n,
        k_load=_tile_load("k_s", f"p{plan.k}", "k_base", d, ks.strides[-1], ks.strides[-2], 1, n, threads),
        v_load=_tile_load("v_s", f"p{plan.v}", "v_base", dv, vs.strides[-2], vs.strides[-1], 0, n, threads),
        score_body="\n                ".join(score_lines),
        score=score,
        o_base=offsets[nout],
        row_comment=row_comment,
        nout=nout,
        o_row=out.strides[-2],
        o_col=out.strides[-1],
        row_value=row_value,
    )
    blocks = math.prod(batch) * -(-m // rows)
    return KernelSource(name + "_kernel", source(src), blocks * threads, threads)


def _append_of(x: Instruction) -> Instruction | None:
    while x.name in ("slice", "transpose", "reshape", "squeeze", "unsqueeze") and len(x.inputs) == 1:
        x = x.inputs[0]
    return x if x.name == "concat_past_present" else None


def kv_attention_kernel(module: Module, shapes: Sequence[Shape]) -> KernelSource:
    """group[tag=kv_attention] (fuse_kv_append): the decode kernel, appending the new K/V rows.
    params: the group's inputs, then (attention, cache_k, cache_v) outputs."""
    params = {p.id: k for k, p in enumerate(module.params())}
    dots = [i for i in module if i.name == "dot"]
    if len(dots) != 2:
        raise CodegenUnsupported(f"{module.name}: a kv_attention group has 2 dots, found {len(dots)}")
    kt, vv = dots[0].inputs[1], dots[1].inputs[1]
    kc, vc = _append_of(kt), _append_of(vv)
    if kc is None or vc is None:
        raise CodegenUnsupported(f"{module.name}: K and V are not views of KV-cache appends")
    nin = len(shapes) - 3
    ck, cv = params[kc.inputs[2].id], params[vc.inputs[2].id]
    nd = shapes[ck].ndim
    if kc.op["axis"] != nd - 2 or vc.op["axis"] != nd - 2 or not (shapes[ck].standard() and shapes[cv].standard()):
        raise CodegenUnsupported("kv_attention: the caches must be standard and appended along their row axis")
    # Kᵀ must be [.., d, keys] with keys along the cache rows, V [.., keys, dv]
    if kt.shape.strides[-1] != kc.shape.strides[-2] or vv.shape.strides[-2] != vc.shape.strides[-2]:
        raise CodegenUnsupported("kv_attention: Kᵀ / V views do not index the cache rows as keys")
    base = attention_plan(module, computed_kv=True)
    # the appends and their views come first in the module; the score chain is what follows dot1
    feeds = set()
    for x in (kt, vv):
        while x.id not in params:
            feeds.add(x.id)
            x = x.inputs[0] if x.name != "concat_past_present" else module.params()[0]
    chain = tuple(i for i in base.chain if i.id not in feeds)
    plan = AttentionPlan(params[dots[0].inputs[0].id], ck, cv, base.dot1, base.scores, chain, base.nan_guard)
    append = Append(params[kc.inputs[0].id], params[vc.inputs[0].id], params[kc.inputs[1].id], nin, nin + 1, nin + 2)
    if not decode_attention_applies(shapes, plan.q):
        raise CodegenUnsupported("kv_attention takes one query row")
    qs = shapes[plan.q]
    *batch, m, d = qs.lens
    name = f"kv_attention_{math.prod(batch)}x{m}x{kt.shape.lens[-1]}x{d}x{vv.shape.lens[-1]}"
    name += "_guarded" if plan.nan_guard else ""
    return decode_attention_kernel(
        plan,
        module,
        shapes,
        lambda offs: _score_lines(plan, module, shapes, offs),
        name,
        append=append,
        kv_views=(kt.shape, vv.shape),
    )


def _attention_request(r: KernelRequest) -> KernelSource:
    if r.module is not None and r.inner["tag"] == "kv_attention":
        return kv_attention_kernel(r.module, r.shapes)
    if r.inner["tag"] != "attention" or r.module is None:
        raise CodegenUnsupported(f"no kernel for group[tag={r.inner['tag']}]")
    return attention_kernel(r.module, r.shapes)


GENERATORS: dict[str, RequestGenerator] = {"attention": _attention_request}  # group[tag=attention], fuse_attention
