"""Einsum lowered to transposes, reshapes, reduce_sum and batched dot (MIGraphX's einsum builder
takes the same route): operands are contracted pairwise, left to right. A letter repeated in one
operand (a diagonal) is taken with a gather on the flattened pair of axes."""

from __future__ import annotations

import math
import string
from typing import TYPE_CHECKING

import numpy as np

from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _parse(ctx, eq: str, ranks: list[int]) -> tuple[list[str], str]:
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.bad_attr("equation", f"{eq!r} names {len(terms)} operands, the node has {len(ranks)}")
    free = [c for c in string.ascii_uppercase + string.ascii_lowercase if c not in eq]
    ell_rank = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = "".join(free[:ell_rank])  # ellipsis dims get unused letters, right-aligned per operand
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            n = r - len(t.replace("...", ""))
            t = t.replace("...", ell[ell_rank - n :] if n else "")
        if len(t) != r or not (t.isalpha() or t == ""):
            raise ctx.bad_attr("equation", f"term {t!r} does not match an operand of rank {r}")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(out_terms)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return out_terms, out


def _diagonal(ctx, x, term: str):
    """Collapse repeated letters of one operand onto their diagonal."""
    while len(set(term)) != len(term):
        c = next(ch for ch in term if term.count(ch) > 1)
        p = term.index(c)
        q = term.index(c, p + 1)
        n = x.shape.lens[p]
        rest = [i for i in range(len(term)) if i not in (p, q)]
        t = ctx.add("transpose", [x], permutation=rest + [p, q])
        flat = ctx.add("reshape", [ctx.contiguous(t)], dims=[x.shape.lens[i] for i in rest] + [n * n])
        x = ctx.add("gather", [flat, ctx.literal(np.arange(n, dtype=np.int64) * (n + 1))], axis=len(rest))
        term = "".join(term[i] for i in rest) + c
    return x, term


def _sum_out(ctx, x, term: str, keep: set[str]):
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    x = ctx.add("squeeze", [ctx.add("reduce_sum", [x], axes=axes)], axes=axes)
    return x, "".join(c for c in term if c in keep)


def _contract(ctx, a, ta: str, b, tb: str, keep: set[str]):
    size = {}
    for x, t in ((a, ta), (b, tb)):
        for c, n in zip(t, x.shape.lens):
            size[c] = max(size.get(c, 1), n)
    batch = [c for c in ta if c in tb and c in keep]
    inner = [c for c in ta if c in tb and c not in keep]
    a_only = [c for c in ta if c not in tb]
    b_only = [c for c in tb if c not in ta]

    def arrange(x, t, order, dims):
        x = ctx.add("transpose", [x], permutation=[t.index(c) for c in order]) if list(t) != order else x
        # A letter both operands share may be 1 in one of them (numpy broadcasting, as ORT and
        # MIGraphX allow): broadcast it, whether it is kept (batch) or summed (inner).
        shared = set(batch) | set(inner)
        x = ctx.broadcast_to(x, [size[c] if c in shared else x.shape.lens[k] for k, c in enumerate(order)])
        return ctx.add("reshape", [ctx.contiguous(x)], dims=dims)

    prod = lambda cs: math.prod(size[c] for c in cs)
    nb = prod(batch)
    am = arrange(a, ta, batch + a_only + inner, [nb, prod(a_only), prod(inner)])
    bm = arrange(b, tb, batch + inner + b_only, [nb, prod(inner), prod(b_only)])
    y = ctx.add("dot", [am, bm])
    res = batch + a_only + b_only
    return ctx.add("reshape", [y], dims=[size[c] for c in res]), "".join(res)


@register("Einsum")
def parse_einsum(ctx: NodeContext, args: Args) -> Result:
    terms, out = _parse(ctx, ctx.attr("equation"), [a.shape.ndim for a in args])
    ops = []
    for k, (x, t) in enumerate(zip(args, terms)):
        x, t = _diagonal(ctx, x, t)
        later = set(out).union(*[set(u) for j, u in enumerate(terms) if j != k])
        ops.append(_sum_out(ctx, x, t, later))
    x, t = ops[0]
    for k in range(1, len(ops)):
        keep = set(out).union(*[set(u) for _, u in ops[k + 1 :]])
        y, u = ops[k]
        x, t = _contract(ctx, x, t, y, u, keep)
    x, t = _sum_out(ctx, x, t, set(out))
    if sorted(t) != sorted(out):
        raise ctx.bad_attr("equation", f"output {out!r} uses letters not in the inputs")
    if t != out:
        x = ctx.add("transpose", [x], permutation=[t.index(c) for c in out])
    return x
