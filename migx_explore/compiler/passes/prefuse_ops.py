"""prefuse_ops (MIGraphX src/targets/gpu/prefuse_ops.cpp, [gpu::prefuse_ops]): layer normalization
written out as reductions and pointwise ops becomes one `layernorm{epsilon}` op (MIGraphX
gpu::prelayernorm), and `layernorm(add(a, b))` with a single-use add becomes `add_layernorm(a, b)`
(gpu::preadd_layernorm). Scale and bias stay separate pointwise consumers, as in MIGraphX.

Recognised (over the last axis, with explicit broadcasts between the steps):
    m = reduce_mean(x); d = x - m
    v = reduce_mean(sqdiff(x, m) | pow(d, 2) | d * d)
    y = d * rsqrt(v + eps)   or   d / sqrt(v + eps)   or, with eps = 0, d * rsqrt(v) / d / sqrt(v)

The eps-free form is what a model's epsilon becomes at fp16 when it is below half precision's
smallest value (BERT's 1e-12 rounds to 0 and the add folds away); without it every fp16 BERT
layer norm stayed two reductions and two pointwise kernels.

MIGraphX runs these finders only when MIGRAPHX_ENABLE_LAYERNORM_FUSION is set and otherwise leaves
layernorm to fuse_reduce; `enable_layernorm_fusion` (default on here, so the explorer shows the
rewrite) is that switch. The attention and channelwise-convolution finders of MIGraphX need CK or
rocMLIR kernels and are not part of this pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..matcher import MatchResult, name
from ..op import Op
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule
from ..ref import eval_instruction
from ..shape import Shape
from .fusion_helpers import BROADCASTS


def _unbroadcast(x: Instruction) -> Instruction:
    while x.name in BROADCASTS + ("contiguous",) and len(x.inputs) == 1:
        x = x.inputs[0]
    return x


def _const(x: Instruction) -> float | None:
    if not x.can_eval():
        return None
    v = np.asarray(eval_instruction(x), np.float64).reshape(-1)
    return float(v[0]) if v.size and np.all(v == v[0]) else None


def _is_mean_of(m: Instruction, x: Instruction) -> bool:
    last = x.shape.ndim - 1
    return m.name == "reduce_mean" and m.inputs[0] is x and tuple(a % x.shape.ndim for a in m.op["axes"]) == (last,)


def _centered(d: Instruction) -> tuple[Instruction, Instruction] | None:
    """(x, mean) if d = x - broadcast(reduce_mean(x)) over the last axis."""
    if d.name != "sub":
        return None
    x, m = d.inputs[0], _unbroadcast(d.inputs[1])
    return (x, m) if _is_mean_of(m, x) else None


def _variance_input(sq: Instruction) -> tuple[Instruction, Instruction] | None:
    """(x, mean) if sq is the squared deviation of x from its mean."""
    if sq.name == "sqdiff":
        for x, m in (sq.inputs, sq.inputs[::-1]):
            mm = _unbroadcast(m)
            if _is_mean_of(mm, x):
                return x, mm
        return None
    if sq.name == "pow" and _const(sq.inputs[1]) == 2.0:
        return _centered(sq.inputs[0])
    if sq.name == "mul" and sq.inputs[0] is sq.inputs[1]:
        return _centered(sq.inputs[0])
    return None


def match_layernorm(y: Instruction) -> tuple[Instruction, float, list[Instruction]] | str:
    """(x, epsilon, matched instructions) for a layernorm ending at y, or why not."""
    if y.name not in ("mul", "div"):
        return "not a mul or div"
    for d, s in ((y.inputs[0], y.inputs[1]), (y.inputs[1], y.inputs[0])) if y.name == "mul" else [y.inputs]:
        c = _centered(d)
        if c is None:
            continue
        x, mean = c
        inv = _unbroadcast(s)
        want = "rsqrt" if y.name == "mul" else "sqrt"
        if inv.name != want:
            continue
        add = inv.inputs[0]
        if add.name == "reduce_mean":  # epsilon 0: nothing added to the variance
            candidates = [(add, None)]
        elif add.name == "add":
            candidates = [tuple(add.inputs), tuple(add.inputs[::-1])]
        else:
            continue
        for v, e in candidates:
            eps = 0.0 if e is None else _const(e)
            if eps is None or v.name != "reduce_mean" or not _is_mean_of(v, v.inputs[0]):
                continue
            vin = _variance_input(v.inputs[0])
            if vin is not None and vin[0] is x and vin[1] is mean:
                return x, eps, list({i.id: i for i in (y, d, s, inv, add, v, mean)}.values())
        return "the normalizer is not rsqrt/sqrt of (variance + constant epsilon) of the same x"
    return "no input is x - reduce_mean(x) over the last axis"


class FindLayernorm(Rule):
    name = "find_layernorm"

    def pattern(self):
        return name("mul", "div")

    def check(self, module: Module, r: MatchResult):
        return match_layernorm(r.root)  # a reason, or (x, epsilon, the matched instructions)

    def rewrite(self, module: Module, r: MatchResult, plan) -> None:
        x, eps, _ = plan
        new = module.insert_instruction(r.root, Op("layernorm", epsilon=eps), [x])
        module.replace_all_uses(r.root, new)


class FindAddLayernorm(Rule):
    name = "find_add_layernorm"

    def pattern(self):
        return name("layernorm")

    def check(self, module: Module, r: MatchResult) -> str | None:
        a = r.root.inputs[0]
        if a.name != "add" or len(a.outputs) != 1:
            return "input is not an add used only here"
        return None

    def rewrite(self, module: Module, r: MatchResult, plan: None) -> None:
        a = r.root.inputs[0]
        new = module.insert_instruction(r.root, Op("add_layernorm", epsilon=r.root.op["epsilon"]), list(a.inputs))
        module.replace_all_uses(r.root, new)


# A layernorm over few long rows (a VAE's GroupNorm: 32 groups of 131072 elements) runs one
# block per row, leaving most of the GPU idle (20 us per group norm on an H200 even at 1024
# threads, against ~3 us for the same bytes spread over the GPU). Split, each row's statistics
# come from chunks (chunk means and squared deviations, combined by Chan's formula), so the
# reductions have rows x chunks rows and the normalization is plain pointwise work.
SPLIT_FEW_ROWS = 1024
SPLIT_CHUNK = 4096  # elements per chunk: a register-row reduction (gpu/codegen/reduce_rows.py)


def split_chunk(length: int) -> int | None:
    """Elements per chunk for a row of `length`: the largest power of two <= SPLIT_CHUNK that
    divides it, if at least 256 (None: the row does not split evenly)."""
    c = SPLIT_CHUNK
    while c >= 256:
        if length % c == 0:
            return c
        c //= 2
    return None


class FindSplitLayernorm(Rule):
    """Layer normalization over few long rows, written with its statistics reduced in chunks:

        xf = convert(x) to float32 (half types);  xc = reshape(xf, [..., S, C])
        m_c = reduce_mean(xc) over C;  q_c = reduce_sum((xc - m_c)^2) over C
        mean = reduce_mean(m_c) over S;  M2 = reduce_sum(q_c) + C * reduce_sum((m_c - mean)^2)
        y = (xf - mean) * rsqrt(M2 / (S C) + eps), converted back

    the same value as layernorm up to rounding (Chan et al.'s pairwise variance)."""

    name = "find_split_layernorm"

    def __init__(self, min_row: int):
        self.min_row = min_row

    def pattern(self):
        return name("mul", "div")

    def check(self, module: Module, r: MatchResult):
        plan = match_layernorm(r.root)
        if isinstance(plan, str):
            return plan
        lens = plan[0].shape.lens
        rows = int(np.prod(lens[:-1], dtype=np.int64))
        if lens[-1] < self.min_row or rows > SPLIT_FEW_ROWS:
            return f"rows ({rows} of {lens[-1]}) not few and long enough to split"
        if plan[0].shape.type not in ("float32", "float16", "bfloat16"):
            return "not a float type"
        chunk = split_chunk(lens[-1])
        if chunk is None:
            return f"a row of {lens[-1]} does not split into chunks of 256..{SPLIT_CHUNK}"
        return plan[0], plan[1], chunk

    def rewrite(self, module: Module, r: MatchResult, plan) -> None:
        x, eps, chunk = plan
        at = r.root

        def op(name_: str, inputs: list[Instruction], **attrs) -> Instruction:
            return module.insert_instruction(at, Op(name_, **attrs), inputs)

        def bcast(v: Instruction, lens) -> Instruction:
            return op("multibroadcast", [v], out_lens=list(lens))

        def scalar(value: float, lens) -> Instruction:
            lit = module.add_literal(np.asarray([value], np.float32), Shape.of("float32", [1]))
            return bcast(lit, lens)

        lens = list(x.shape.lens)
        n = lens[-1]
        s = n // chunk
        xf = x if x.shape.type == "float32" else op("convert", [x], target_type="float32")
        xc = op("reshape", [xf], dims=lens[:-1] + [s, chunk])
        clens = xc.shape.lens
        m_c = op("reduce_mean", [xc], axes=[-1])  # [..., S, 1]
        d_c = op("sub", [xc, bcast(m_c, clens)])
        q_c = op("reduce_sum", [op("mul", [d_c, d_c])], axes=[-1])
        mean = op("reduce_mean", [m_c], axes=[-2])  # [..., 1, 1]
        dm = op("sub", [m_c, bcast(mean, m_c.shape.lens)])
        within = op("reduce_sum", [q_c], axes=[-2])
        between = op("reduce_sum", [op("mul", [dm, dm])], axes=[-2])
        slens = within.shape.lens
        m2 = op("add", [within, op("mul", [between, scalar(float(chunk), slens)])])
        var = op("mul", [m2, scalar(1.0 / n, slens)])
        inv = op("rsqrt", [op("add", [var, scalar(float(eps), slens)])])
        row = lens[:-1] + [1]
        mean_r = op("reshape", [mean], dims=row)
        inv_r = op("reshape", [inv], dims=row)
        y = op("mul", [op("sub", [xf, bcast(mean_r, lens)]), bcast(inv_r, lens)])
        if x.shape.type != "float32":
            y = op("convert", [y], target_type=x.shape.type)
        module.replace_all_uses(r.root, y)


def _dce(module: Module) -> None:
    from .dead_code_elimination import DeadCodeElimination

    DeadCodeElimination().apply_module(module, None)


@dataclass(frozen=True)
class PrefuseOps(Pass):
    """Recognise layer normalization (and add + layernorm) before fusion."""

    name: ClassVar[str] = "prefuse_ops"
    enable_layernorm_fusion: bool = True
    # rows at least this long, in a layernorm of at most SPLIT_FEW_ROWS rows, are normalized from
    # chunked statistics (FindSplitLayernorm; ours, not MIGraphX's); 0 turns it off
    split_long_rows: int = 16384

    def apply_module(self, module: Module, ctx) -> bool:
        if not self.enable_layernorm_fusion:
            return False
        # MIGraphX: find_matches per finder with DCE in between (a finder would otherwise match
        # the dead roots the one before left behind).
        finders: list[Rule] = [FindLayernorm(), FindAddLayernorm()]
        if self.split_long_rows > 0:
            finders.insert(0, FindSplitLayernorm(self.split_long_rows))
        changed = False
        for finder in finders:
            if rewriter_of(ctx).find_matches(module, finder) > 0:
                _dce(module)
                changed = True
        return changed
