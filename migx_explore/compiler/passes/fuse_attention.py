"""fuse_attention (MIGraphX src/fuse_attention.cpp, find_attention): the attention group

    dot(Q, Kᵀ) -> elementwise score ops (scale, additive or `where` masks) -> softmax -> dot(·, V)

becomes one `group[tag=attention](inputs...), [attnN]` whose bypass submodule holds exactly those
instructions, so the backend can compile it into one flash-attention kernel (MIGraphX hands the
same group to rocMLIR). The softmax is matched both as the `softmax` op and in the form
rewrite_reduce leaves (div(exp(x - max(x)), sum(exp(x - max(x))))), with converts skipped
before the second dot, as match::softmax_input does.

Real exporters add two forms around that core (torch's scaled_dot_product_attention, which HF
BERT, GPT-2 and Llama use with attn_implementation="sdpa", in both the TorchScript and the dynamo
exporter):

* Q and Kᵀ scaled separately, `dot(mul(Q, √s), mul(Kᵀ, √s))` (it keeps half-precision products in
  range). Where each mul has a scalar constant and no other user, the group takes the unscaled
  Q and Kᵀ and scales the score inside (`dot(Q, Kᵀ) · √s · √s`): the fused kernel accumulates the
  product in float, so the range argument does not apply to it.
* a NaN guard on the probabilities, `where(isnan(p), 0, p)`: a row whose keys are all masked
  with -inf has softmax 0/0 = NaN, and the guard makes that row's output 0. It is part of the
  group; the kernel writes 0 for a row with no unmasked key (gpu/codegen/attention.py).

The mask (a `where`/`add` of a bool-derived tensor) and what computes Q, K and V (rotary
embeddings, the repeat of K/V heads for grouped-query attention) stay outside as inputs.

Views that copy do not: grouped-query attention repeats each K/V head for `rep` query heads
(unsqueeze, expand, then a reshape of that broadcast, which materialises it), and exporters put a
`contiguous` before reshaping Kᵀ's transpose. A second rule, fold_attention_views, moves such a
chain (from its first copying view on) into the group, which then takes the chain's source: the
kernel generator composes the views into strides (compiler/strided_view.py), splitting the head
axis into [Hkv, rep] with stride 0 on rep, so no copy is made. It applies only where those
strides exist, for the source as it is and as a standard buffer.

What goes inside: the two dots, every instruction on a path between them, and scalar constants
(a scale, a -inf fill) they read. Everything else stays outside as an input: Q, Kᵀ and V with
their views (transposes, slices), mask tensors (a causal -inf literal, a padding mask computed
from an input) with the broadcast that widens them to the score shape. Keeping views outside
means every submodule param already has the score's (or Q/K/V's) lens, so a kernel generator
reads each input through its own strides.

The pattern code is self-contained (`match_attention` returns a plan or the reason it refuses)
so it can move to the public rule API unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..ir import Instruction, Module
from ..matcher import MatchResult, name
from ..op import Op
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule
from ..shape import Shape
from ..strided_view import Axes, axes_of, compose, refine_batch, view_chain
from .fusion_helpers import copy_body, new_submodule, param_name, remove_dead

ATTENTION_TAG = "attention"
_VIEWS_OF_SCALARS = ("multibroadcast", "broadcast", "reshape", "squeeze", "unsqueeze", "contiguous")


@dataclass
class AttentionMatch:
    """What match_attention found: the two dots, the softmax input, the instructions to move
    into the group (module order) and the scalar constants to copy into it."""

    dot1: Instruction
    dot2: Instruction
    scores: Instruction  # the softmax input
    region: list[Instruction]
    constants: list[Instruction]
    # muls by a scalar constant on dot1's operands that the group absorbs: (operand index, mul,
    # the constant); the group reads the mul's other input instead
    operand_scales: list[tuple[int, Instruction, Instruction]] = field(default_factory=list)


def _skip(ins: Instruction, *names: str) -> Instruction:
    while ins.name in names and len(ins.inputs) == 1:
        ins = ins.inputs[0]
    return ins


def _through_broadcasts(ins: Instruction) -> Instruction:
    return _skip(ins, "broadcast", "multibroadcast")


def _last_axis_only(ins: Instruction, ndim: int) -> bool:
    return tuple(a % ndim for a in ins.op["axes"]) == (ndim - 1,)


def softmax_input(probs: Instruction) -> Instruction | str:
    """The x of softmax(x) over the last axis that `probs` computes, or why it is not one."""
    if probs.name == "softmax":
        x = probs.inputs[0]
        if probs.op["axis"] % x.shape.ndim != x.shape.ndim - 1:
            return f"softmax over axis {probs.op['axis']}, not the last axis (the keys)"
        return x
    if probs.name != "div":
        return f"the first input of the second dot is {probs.name}, not a softmax"
    e, total = probs.inputs[0], _through_broadcasts(probs.inputs[1])
    if e.name != "exp" or e.inputs[0].name != "sub":
        return "div is not exp(x - max(x)) / sum(...) (a decomposed softmax)"
    x, mx = e.inputs[0].inputs[0], _through_broadcasts(e.inputs[0].inputs[1])
    if total.name != "reduce_sum" or total.inputs[0] is not e:
        return "the divisor is not reduce_sum of the same exp"
    if mx.name != "reduce_max" or mx.inputs[0] is not x:
        return "the subtracted value is not reduce_max of the softmax input"
    nd = x.shape.ndim
    if not (_last_axis_only(total, nd) and _last_axis_only(mx, nd)):
        return "the softmax reductions are not over the last axis (the keys)"
    return x


def unguarded_probs(probs: Instruction) -> Instruction | str:
    """The p of `where(isnan(p), 0, p)` (the exporters' guard for fully masked rows), `probs`
    itself when it is not such a where, or why the guard is one the kernel cannot compute."""
    if probs.name != "where" or len(probs.inputs) != 3:
        return probs
    cond, fill, p = probs.inputs
    if cond.name != "isnan" or cond.inputs[0] is not p:
        return probs
    src = _skip(fill, *_VIEWS_OF_SCALARS)
    if not (src.is_literal() and src.shape.elements() == 1):
        return f"the NaN guard where(isnan(p), fill, p) fills with {fill.name} #{fill.id}, not a constant"
    value = float(src.literal.data.reshape(-1)[0])
    if value != 0.0:
        return f"the NaN guard fills with {value}, not 0 (the fused kernel writes 0 for a fully masked row)"
    return p


def _scalar_mul(ins: Instruction) -> tuple[Instruction, Instruction] | None:
    """(x, c) when `ins` is mul(x, c) or mul(c, x) with c a scalar constant, else None."""
    if ins.name != "mul" or len(ins.inputs) != 2:
        return None
    a, b = ins.inputs
    if _scalar_constant(b) and not _scalar_constant(a):
        return a, b
    if _scalar_constant(a) and not _scalar_constant(b):
        return b, a
    return None


def operand_scales(dot1: Instruction) -> list[tuple[int, Instruction, Instruction]]:
    """dot1's operands that are a mul by a scalar constant used only by dot1 (Q and Kᵀ scaled
    separately): (operand index, mul, constant)."""
    out = []
    for k, x in enumerate(dot1.inputs[:2]):
        hit = _scalar_mul(x)
        if hit is not None and all(o is dot1 for o in x.outputs) and x.shape.lens == hit[0].shape.lens:
            out.append((k, x, hit[1]))
    return out


def _score_leaves(x: Instruction) -> tuple[list[Instruction], list[Instruction]]:
    """Walk back from the softmax input through elementwise ops: (dots reached, other leaves)."""
    dots, seen, stack = [], set(), [x]
    others = []
    while stack:
        ins = stack.pop()
        if ins.id in seen:
            continue
        seen.add(ins.id)
        if ins.name == "dot":
            dots.append(ins)
        elif ins.op.has("pointwise") and not ins.is_builtin():
            stack.extend(ins.inputs)
        else:
            others.append(ins)
    return dots, others


def _between(dot1: Instruction, dot2: Instruction, module: Module) -> list[Instruction]:
    """dot1, dot2 and every instruction on a path from dot1 to dot2, in module order."""
    index = module.index_of()
    stop = index[dot2.id]
    down, stack = {dot1.id}, [dot1]
    while stack:
        for o in stack.pop().outputs:
            if o.id not in down and o.id in index and index[o.id] <= stop:
                down.add(o.id)
                stack.append(o)
    up, stack = {dot2.id}, [dot2]
    while stack:
        for i in stack.pop().inputs:
            if i.id not in up and i.id in down:
                up.add(i.id)
                stack.append(i)
    return sorted((i for i in module if i.id in up), key=lambda i: index[i.id])


def _scalar_constant(ins: Instruction) -> bool:
    src = _skip(ins, *_VIEWS_OF_SCALARS)
    return src.is_literal() and src.shape.elements() == 1


def match_attention(dot2: Instruction, max_head_dim: int = 0) -> AttentionMatch | str:
    """The attention group ending in `dot2`, or the reason there is none (max_head_dim 0: any)."""
    module = dot2.module
    probs = unguarded_probs(_skip(dot2.inputs[0], "convert"))
    if isinstance(probs, str):
        return probs
    x = softmax_input(_skip(probs, "convert"))
    if isinstance(x, str):
        return x
    dots, _ = _score_leaves(x)
    if not dots:
        return "the softmax input is not computed from a dot through elementwise ops"
    if len(dots) > 1:
        return f"the softmax input depends on {len(dots)} dots through elementwise ops; expected one (Q·Kᵀ)"
    dot1 = dots[0]
    q, k = dot1.inputs
    v = dot2.inputs[1]
    nd = dot1.shape.ndim
    if nd < 2 or dot2.shape.ndim != nd:
        return "the two dots have different ranks"
    for ins in (dot1, dot2):
        if ins.shape.type not in ("float32", "float16", "bfloat16"):
            return f"{ins.shape.type} attention (the fused kernel computes float, half and bfloat16)"
    if dot2.inputs[0].shape.lens != dot1.shape.lens:
        return "the probabilities have other lens than the scores"
    head, vdim = q.shape.lens[-1], v.shape.lens[-1]
    if max_head_dim and max(head, vdim) > max_head_dim:
        return (
            f"head dim {max(head, vdim)} > {max_head_dim} (the fused kernel keeps a row's accumulator in "
            f"registers and a K/V tile in shared memory)"
        )
    region = _between(dot1, dot2, module)
    inside = {i.id for i in region}
    for ins in region:
        if ins is dot2:
            continue
        if ins.shape.lens != dot1.shape.lens and ins.name not in ("reduce_max", "reduce_sum"):
            return f"{ins.name} #{ins.id} changes the score shape inside the group"
        outside = [o for o in ins.outputs if o.id not in inside]
        if outside:
            return (
                f"{ins.name} #{ins.id} (scores or probabilities) is also used outside the attention, by "
                f"{outside[0].name} #{outside[0].id}"
            )
    constants = []
    for ins in region:
        for i in ins.inputs:
            if i.id not in inside and _scalar_constant(i) and i not in constants:
                constants.append(i)
    return AttentionMatch(dot1, dot2, x, region, constants, operand_scales(dot1))


def fuse_attention_group(module: Module, m: AttentionMatch, mod_name: str) -> Instruction:
    """Move `m.region` into a new bypass submodule; the group instruction replaces dot2."""
    sub = new_submodule(module.program, mod_name)
    mapping: dict[int, Instruction] = {}
    inputs: list[Instruction] = []

    def copy_constant(c: Instruction) -> Instruction:
        if c.id not in mapping:
            mapping[c.id] = (
                sub.add_literal(c.literal)
                if c.is_literal()
                else sub.add_instruction(c.op, [copy_constant(c.inputs[0])])
            )
        return mapping[c.id]

    def arg(x: Instruction) -> Instruction:
        if x.id not in mapping:
            if x in m.constants:
                return copy_constant(x)
            mapping[x.id] = sub.add_parameter(param_name(len(inputs)), Shape.of(x.shape.type, x.shape.lens))
            inputs.append(x)
        return mapping[x.id]

    unscaled = {k: mul.inputs[0] if mul.inputs[1] is c else mul.inputs[1] for k, mul, c in m.operand_scales}
    for ins in m.region:
        if ins is m.dot1:
            ops = [arg(unscaled.get(k, x)) for k, x in enumerate(ins.inputs)]
            score = sub.add_instruction(ins.op, ops, ins.module_inputs)
            for _, _, c in m.operand_scales:  # dot(a·c1, b·c2) = dot(a, b)·c1·c2
                lit = copy_constant(_skip(c, *_VIEWS_OF_SCALARS))
                scalar = sub.add_instruction(Op("multibroadcast", out_lens=list(ins.shape.lens)), [lit])
                score = sub.add_instruction(Op("mul"), [score, scalar])
            mapping[ins.id] = score
            continue
        mapping[ins.id] = sub.add_instruction(ins.op, [arg(x) for x in ins.inputs], ins.module_inputs)
    sub.add_return([mapping[m.dot2.id]])
    group = module.insert_instruction(m.dot2, Op("group", tag=ATTENTION_TAG), inputs, [sub])
    module.replace_all_uses(m.dot2, group)
    module.remove_instructions(m.region + [mul for _, mul, _ in m.operand_scales])
    return group


class FindAttention(Rule):
    """dot(softmax(elementwise(dot(Q, Kᵀ))), V) -> group[tag=attention] (MIGraphX find_attention)."""

    name = "find_attention"

    def __init__(self, max_head_dim: int = 0):
        self.max_head_dim = max_head_dim

    def pattern(self):
        return name("dot")

    def check(self, module: Module, r: MatchResult) -> str | AttentionMatch:
        return match_attention(r.root, self.max_head_dim)

    def rewrite(self, module: Module, r: MatchResult, plan: AttentionMatch) -> None:
        fuse_attention_group(module, plan, "attn")

    def target(self) -> str:
        return "group[tag=attention](Q, Kᵀ, masks..., V)"


def _operand_params(sub: Module) -> list[int]:
    """Indices of the params the group's two dots read as Q, Kᵀ and V (directly)."""
    dots = [i for i in sub if i.name == "dot"]
    if len(dots) != 2:
        return []
    index = {p.id: k for k, p in enumerate(sub.params())}
    return [index[x.id] for x in (dots[0].inputs[0], dots[0].inputs[1], dots[1].inputs[1]) if x.id in index]


def _refines(group: Instruction, folds: dict[int, list[Instruction]], standard: bool) -> bool:
    """Whether every input (folded ones through their views) and the output read as strided
    tensors over one split of the batch axes; `standard`: folded sources as standard buffers."""
    operands: list[Axes] = []
    for k, x in enumerate(group.inputs):
        if k in folds:
            src = folds[k][0].inputs[0].shape
            axes = compose(src.as_standard() if standard else src, folds[k])
            if axes is None:
                return False
        else:
            axes = axes_of(x.shape)
        if len(axes) != group.shape.ndim:
            return False
        operands.append(axes)
    operands.append(axes_of(group.shape))
    return refine_batch(operands, group.shape.ndim - 2) is not None


def attention_view_folds(group: Instruction) -> dict[int, list[Instruction]] | str:
    """For each Q/Kᵀ/V input of an attention group made by views that copy: its input index
    and the views (source side first) to move inside; or why there are none."""
    if group.name != "group" or group.op["tag"] != ATTENTION_TAG or len(group.module_inputs) != 1:
        return "not an attention group"
    sub = group.module_inputs[0]
    folds: dict[int, list[Instruction]] = {}
    for k in _operand_params(sub):
        chain = view_chain(group.inputs[k])
        if not chain:
            continue
        src = chain[0].inputs[0]
        if src in group.inputs or any(src is c[0].inputs[0] for c in folds.values()):
            continue  # one param would stand for two operands
        folds[k] = chain
    if not folds:
        return "no Q, Kᵀ or V input is a copy made by views (a repeat of K/V heads, a contiguous transpose)"
    # GQA's K and V splits agree; otherwise drop folds (the last input's first) until the rest
    # do, for each source as it is and as the standard buffer lowering may give it
    while folds and not (_refines(group, folds, False) and _refines(group, folds, True)):
        del folds[max(folds)]
    return folds or "the views of Q, Kᵀ and V split the batch axes in ways no one strided read can follow"


def fold_attention_views(module: Module, group: Instruction, folds: dict[int, list[Instruction]]) -> Instruction:
    """The group rebuilt (same submodule name) to take each fold's source, the views inside."""
    program = module.program
    old = group.module_inputs[0]
    sub = new_submodule(program, old.name + "_")
    params = old.params()
    mapping: dict[int, Instruction] = {}
    inputs = []
    for k, (p, x) in enumerate(zip(params, group.inputs)):
        src = folds[k][0].inputs[0] if k in folds else x
        inputs.append(src)
        mapping[p.id] = sub.add_parameter(param_name(k), Shape.of(src.shape.type, src.shape.lens))
    for k, chain in folds.items():
        v = mapping[params[k].id]
        for c in chain:
            v = sub.add_instruction(c.op, [v])
        mapping[params[k].id] = v
    sub.add_return(copy_body(old, sub, mapping))
    new = module.insert_instruction(group, group.op, inputs, [sub])
    module.replace_all_uses(group, new)
    module.remove_instruction(group)
    remove_dead(module, [c for chain in folds.values() for c in chain])
    program.remove_module(old.name)
    program.rename_module(sub.name, old.name)
    return new


class FoldAttentionViews(Rule):
    """group[tag=attention](Q, copy(views(K)), ...) -> group[tag=attention](Q, K, ...) with the
    views inside: the kernel reads through them (GQA's K/V head repeat, Kᵀ's contiguous)."""

    name = "fold_attention_views"

    def pattern(self):
        return name("group")

    def check(self, module: Module, r: MatchResult) -> str | dict[int, list[Instruction]]:
        return attention_view_folds(r.root)

    def rewrite(self, module: Module, r: MatchResult, plan: dict[int, list[Instruction]]) -> None:
        fold_attention_views(module, r.root, plan)

    def target(self) -> str:
        return "group[tag=attention](Q, K, masks..., V) reading K/V through the repeat's views"


@dataclass(frozen=True)
class FuseAttention(Pass):
    """Fuse each attention (Q·Kᵀ, scale and masks, softmax, ·V) into a `group[tag=attention]`
    with a bypass submodule, which the GPU backend compiles into one flash-attention kernel
    (online softmax, K/V streamed through shared memory, no score matrix in memory). MIGraphX
    builds the same group and compiles it with rocMLIR; kv-cache attention and flash decoding
    (its other two finders) are not implemented.

    `max_head_dim` (0: no limit, as MIGraphX, whose rocMLIR kernel takes any head size) is where
    a target's kernel stops: the GPU pipeline sets it to what our kernel keeps in registers and
    shared memory (gpu.pipelines), so wider heads stay unfused dots + softmax there."""

    name: ClassVar[str] = "fuse_attention"
    max_head_dim: int = 0

    def apply_module(self, module: Module, ctx) -> bool:
        rewriter = rewriter_of(ctx)
        fused = rewriter.find_matches(module, FindAttention(self.max_head_dim))
        return fused + rewriter.find_matches(module, FoldAttentionViews()) > 0
