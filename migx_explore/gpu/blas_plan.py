"""How a row-major `dot` maps onto one (or a few) column-major strided-batched BLAS calls.

BLAS is column-major: a matrix stored with unit row stride is itself, one stored with unit column
stride is its transpose. C = A·B with C stored row-major is computed as Cᵀ = Bᵀ·Aᵀ (operands
swapped); stored column-major, directly. Batch axes that every operand can step through with one
stride become the BLAS batch; any others are looped over on the host (grouped convolutions with
batch > 1). Pure arithmetic on shapes: lowering asks it whether a layout needs a copy first,
compile_blas records it, the executor calls it, and the fake backend replays it with numpy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from migx_explore.compiler.shape import Shape


@dataclass(frozen=True)
class GemmPlan:
    swap: bool  # True: BLAS operand 1 is the IR's b (C row-major)
    trans1: bool
    trans2: bool
    m: int
    n: int
    k: int
    ld1: int
    ld2: int
    ldc: int
    stride1: int
    stride2: int
    stride_c: int
    batch: int
    offsets: tuple[tuple[int, int, int], ...]  # element offsets (a, b, c) of each host-looped call
    dtype: str  # the operands' type
    out_dtype: str = ""  # the result's type when it differs (quant_dot: int8 -> int32, fp8 -> float32)

    @property
    def c_dtype(self) -> str:
        return self.out_dtype or self.dtype

    def describe(self) -> str:
        ops = ("T" if self.trans1 else "N") + ("T" if self.trans2 else "N")
        calls = f" x{len(self.offsets)} calls" if len(self.offsets) > 1 else ""
        types = f" {self.dtype}->{self.out_dtype}" if self.out_dtype else ""
        return (
            f"{ops} m={self.m} n={self.n} k={self.k} ld={self.ld1},{self.ld2},{self.ldc} "
            f"batch={self.batch}{calls}{types}"
        )


def view_strides(lens: Sequence[int], strides: Sequence[int], new_lens: Sequence[int]) -> tuple[int, ...] | None:
    """Strides of `new_lens` viewing the same elements in row-major order without a copy
    (numpy's no-copy reshape rule), or None when a copy would be needed."""
    old = [(n, s) for n, s in zip(lens, strides) if n != 1]
    new = list(new_lens)
    out = [0] * len(new)
    oi = ni = 0
    while ni < len(new) or oi < len(old):
        if ni < len(new) and new[ni] == 1:
            out[ni] = 0
            ni += 1
            continue
        if oi >= len(old) or ni >= len(new):
            return None
        # grow a group of old axes and a group of new axes with the same element count
        o_end, n_end = oi + 1, ni + 1
        po, pn = old[oi][0], new[ni]
        while po != pn:
            if po < pn:
                if o_end >= len(old):
                    return None
                po *= old[o_end][0]
                o_end += 1
            else:
                if n_end >= len(new):
                    return None
                pn *= new[n_end]
                n_end += 1
        for j in range(oi, o_end - 1):  # the old group must be contiguous
            if old[j][1] != old[j + 1][1] * old[j + 1][0]:
                return None
        st = old[o_end - 1][1]
        for j in range(n_end - 1, ni - 1, -1):
            out[j] = st
            st *= new[j]
        oi, ni = o_end, n_end
    return tuple(out)


def _stored(rows: int, cols: int, rs: int, cs: int, want_t: bool) -> tuple[bool, int] | None:
    """(trans, ld) presenting logical X (rows x cols) as op(M) = X (want_t False) or Xᵀ."""
    cands = []
    if rs == 1 or rows == 1:  # stored column-major as X
        ld = cs if cols > 1 else rows
        if ld >= max(1, rows):
            cands.append((want_t, ld))
    if cs == 1 or cols == 1:  # stored column-major as Xᵀ
        ld = rs if rows > 1 else cols
        if ld >= max(1, cols):
            cands.append((not want_t, ld))
    if not cands:
        return None
    return min(cands, key=lambda c: c[0])  # prefer no transpose


def fold_broadcast_batch(shapes: Sequence[Shape]) -> list[Shape]:
    """Params (a, b, extras..., c) of a product whose b is the same matrix for every batch
    index (a weight broadcast over the batch axes) as one 2-D product of prod(batch) * m rows,
    where a's rows and every other operand's rows view that many rows without a copy. A linear
    layer on windowed or batched tokens is one large GEMM then, not a batch of small ones (m = 7
    per window row in Swin). Anything else comes back unchanged."""
    a, b = shapes[0], shapes[1]
    if a.ndim < 3 or a.ndim != b.ndim or any(s != 0 for n, s in zip(b.lens[:-2], b.strides) if n != 1):
        return list(shapes)
    rows = math.prod(a.lens[:-1])
    if rows == a.lens[-2]:
        return list(shapes)
    product = (*a.lens[:-1], b.lens[-1])
    folded = []
    for s in [a, *shapes[2:]]:
        lens = (rows, s.lens[-1])
        strides = view_strides(s.lens, s.strides, lens) if s is a or s.lens == product else None
        if strides is None:
            return list(shapes)
        folded.append(Shape(s.type, lens, strides))
    return [folded[0], Shape(b.type, b.lens[-2:], b.strides[-2:]), *folded[1:]]


def plan_gemm(a: Shape, b: Shape, c: Shape) -> GemmPlan | None:
    """The BLAS calls for buffer c = a[..., m, k] · b[..., k, n] (c viewed as the product's lens)."""
    if a.ndim < 2 or a.ndim != b.ndim:
        return None
    a, b, c = fold_broadcast_batch([a, b, c])
    batch_lens = a.lens[:-2]
    m, k, n = a.lens[-2], a.lens[-1], b.lens[-1]
    dot_lens = tuple(batch_lens) + (m, n)
    cs = view_strides(c.lens, c.strides, dot_lens)
    if cs is None or any(s < 0 for s in a.strides + b.strides + cs):
        return None
    sa, sb = a.strides, b.strides
    # C layout decides the operand order.
    row_c = cs[-1] == 1 or n == 1
    if row_c:
        ldc = cs[-2] if m > 1 else n
        if ldc < max(1, n):
            row_c = False
    if not row_c:
        if not (cs[-2] == 1 or m == 1):
            return None
        ldc = cs[-1] if n > 1 else m
        if ldc < max(1, m):
            return None
    if row_c:  # Cᵀ (n x m) = Bᵀ · Aᵀ
        o1 = _stored(k, n, sb[-2], sb[-1], True)
        o2 = _stored(m, k, sa[-2], sa[-1], True)
        mm, nn = n, m
    else:  # C (m x n) = A · B
        o1 = _stored(m, k, sa[-2], sa[-1], False)
        o2 = _stored(k, n, sb[-2], sb[-1], False)
        mm, nn = m, n
    if o1 is None or o2 is None:
        return None
    batched = _split_batch(batch_lens, [sa[:-2], sb[:-2], cs[:-2]])
    if batched is None:
        return None
    count, (st_a, st_b, st_c), offsets = batched
    first, second = (st_b, st_a) if row_c else (st_a, st_b)
    offs = tuple((oa, ob, oc) for oa, ob, oc in offsets)
    return GemmPlan(
        row_c,
        o1[0],
        o2[0],
        mm,
        nn,
        k,
        o1[1],
        o2[1],
        ldc,
        first,
        second,
        st_c,
        count,
        offs,
        a.type,
        c.type if c.type != a.type else "",
    )


# 8-bit GEMMs vendor BLAS takes: cuBLASLt's int8 (IMMA) and fp8 kernels in the regular column
# order need op(A) = T, op(B) = N ("TN") and sizes / leading dimensions / batch strides in
# multiples of 4 (int8) or 16 elements (fp8: 16-byte alignment); hipBLAS(Lt) int8 likewise.
QUANT_ALIGN = {"int8": 4, "float8e4m3fn": 16}
# gpu::gemm's algo when compile_blas skips benchmarking (compile mode eager): the library's first choice
HEURISTIC_ALGO = "heuristic"


def quant_blas_refusal(plan: GemmPlan, types: Sequence[str]) -> str | None:
    """Why vendor BLAS cannot run this 8-bit plan (None: it can). `types`: the 8-bit operand
    types the target's BLAS has GEMMs for."""
    if plan.dtype not in types:
        return f"no {plan.dtype} BLAS GEMM on this target"
    if not plan.trans1 or plan.trans2:
        return "layout is not TN"
    q = QUANT_ALIGN[plan.dtype]
    sizes = (plan.m, plan.k, plan.ld1, plan.ld2, plan.stride1, plan.stride2) + (
        (plan.n,) if plan.dtype == "float8e4m3fn" else ()
    )
    offs = [o for t in plan.offsets for o in t[:2]]
    if any(v % q for v in sizes + tuple(offs)) or plan.ldc % 4 or plan.stride_c % 4:
        return f"sizes not multiples of {q}"
    return None


def _split_batch(lens: Sequence[int], strides: Sequence[Sequence[int]]):
    """(count, per-operand stride, host-loop offsets): the longest run of trailing batch axes that
    every operand steps through with one stride becomes the BLAS batch."""
    axes = [d for d, n in enumerate(lens) if n != 1]
    if not axes:
        return 1, (0, 0, 0), [(0, 0, 0)]
    inner = [axes[-1]]
    count = lens[axes[-1]]
    for d in reversed(axes[:-1]):
        if all(s[d] == s[inner[0]] * lens[inner[0]] for s in strides):
            inner.insert(0, d)
            count *= lens[d]
        else:
            break
    step = tuple(s[inner[-1]] for s in strides)
    outer = [d for d in axes if d not in inner]
    offsets = []
    for idx in itertools.product(*(range(lens[d]) for d in outer)):
        offsets.append(tuple(sum(i * s[d] for i, d in zip(idx, outer)) for s in strides))
    return count, step, offsets or [(0, 0, 0)]
