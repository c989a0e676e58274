"""simplify_reshapes finders on chains of views: nop reshapes, flatten, nested shape transforms
(through the exact atom model of shape_chains) and unary ops moved across a view chain."""

from __future__ import annotations

from ...matcher import arg, name, none_of, pointwise, pred, skip, used_once
from ...op import Op, compute_shape
from ...pattern_rewriter import Rule, replace_value, replace_with_op
from ..rule_helpers import all_static, insert_ops
from .move_rules import (
    skip_output,
)
from .shape_chains import BROADCASTS, RESHAPES, TRANSFORMS, plan_broadcast_chain, plan_reshape_transpose

_SHAPE_NOPS = frozenset(
    {
        "flatten",
        "reshape",
        "contiguous",
        "squeeze",
        "unsqueeze",
        "broadcast",
        "concat",
        "convert",
        "multibroadcast",
        "pad",
        "slice",
        "step",
        "transpose",
    }
)
_REDUCE_NOPS = frozenset({"reduce_mean", "reduce_max", "reduce_min", "reduce_sum", "reduce_prod"})


class NopReshapes(Rule):
    """A view/copy op whose output shape equals its input's (or a reduce over size-1 axes) -> x."""

    name = "find_nop_reshapes"

    def pattern(self):
        def same(ins):
            x = ins.inputs[0].shape
            if ins.name in _REDUCE_NOPS:
                return x.lens == ins.shape.lens and x.type == ins.shape.type
            if ins.name in BROADCASTS:
                # Our broadcasts give a kept size-1 axis stride 0 where MIGraphX keeps the input's
                # stride; that stride addresses nothing, so only the other axes must agree.
                return (
                    x.lens == ins.shape.lens
                    and x.type == ins.shape.type
                    and all(n == 1 or a == b for n, a, b in zip(x.lens, x.strides, ins.shape.strides))
                )
            return x == ins.shape

        return name(*(_SHAPE_NOPS | _REDUCE_NOPS))(pred("same_shape(arg 0)", same, "changes the shape"))

    def check(self, m, r):
        return lambda: replace_value(m, r.root, r.root.inputs[0])


class Flatten(Rule):
    """flatten[axis](x) -> reshape[dims=out lens](x)."""

    name = "find_flatten"

    def pattern(self):
        return name("flatten")(all_static())

    def check(self, m, r):
        return lambda: replace_with_op(m, r.root, Op("reshape", dims=r.root.shape.lens), r.root.inputs)


class NestedShapeTransforms(Rule):
    """A chain of reshape/squeeze/unsqueeze/flatten/transpose/broadcast views (with the copies
    `contiguous` between them) -> its shortest form."""

    name = "find_nested_shape_transforms"

    def pattern(self):
        def chain_end(i):
            nxt = skip_output(i, ("contiguous",))
            return nxt is None or nxt.name not in TRANSFORMS

        end = pred("chain_end", chain_end, "feeds another shape transform (the chain is simplified from its end)")
        return name(*TRANSFORMS)(end, all_static(), arg(0)(skip("contiguous")(name(*TRANSFORMS))))

    def check(self, m, r):
        full, x = [], r.root
        while x.name in TRANSFORMS or x.name == "contiguous":
            full.append(x)
            x = x.inputs[0]
        full.reverse()
        out = r.root.shape
        if x.shape.scalar_shape() and _broadcastable(x.shape.lens, out.lens):
            ops = [Op("multibroadcast", out_lens=out.lens)]
        elif x.shape.elements() == 1 and out.elements() == 1:
            ops = [Op("reshape", dims=out.lens)]
        else:
            chain = [i for i in full if i.name != "contiguous"]
            if any(i.name in BROADCASTS for i in chain):
                ops = plan_broadcast_chain(x, chain)
            else:
                ops = plan_reshape_transpose(x.shape.lens, chain)
            if ops is None:
                return "no equivalent form of the chain is shorter"
            ops = [o for o in ops if o is not None]
        if len(ops) > len(full) or (
            len(ops) == len(full) and not _canonicalizes(x, full, ops) and not _broadcast_last(full, ops)
        ):
            return f"the chain of {len(full)} ops is already minimal"

        def apply():
            if not ops:
                replace_value(m, r.root, x)
                return
            y = insert_ops(m, r.root, ops[:-1], x)
            replace_with_op(m, r.root, ops[-1], [y])

        return apply


def _canonicalizes(x, chain, ops) -> bool:
    """As long as `chain`, and the same but for reshapes that only add or drop 1-axes, which
    become the (un)squeeze MIGraphX writes for them."""
    s, changed = x.shape, False
    for ins, op in zip(chain, ops):
        s = compute_shape(op, [s])
        if s.lens != ins.shape.lens:
            return False
        if op != ins.op:
            if not (ins.name == "reshape" and op.name in ("squeeze", "unsqueeze")):
                return False
            changed = True
    return changed


def _broadcast_last(chain, ops) -> bool:
    """`ops` broadcast last where `chain` regroups a broadcast: a reshape needs a standard
    input, so reshape(multibroadcast(g)) costs a copy of the whole broadcast tensor (8 MB for a
    VAE's GroupNorm scale after fuse_pointwise splits its channels), multibroadcast(reshape(g)) none."""
    regroups_broadcast = any(a.name in BROADCASTS and b.name in RESHAPES for a, b in zip(chain, chain[1:]))
    return regroups_broadcast and ops[-1].name in BROADCASTS and all(o.name not in BROADCASTS for o in ops[:-1])


def _broadcastable(src, out) -> bool:
    k = len(out) - len(src)
    return k >= 0 and all(n in (1, out[k + i]) for i, n in enumerate(src))


class UnaryShapeTransforms(Rule):
    """u(views(x)) -> views(u(x)) (moved up) or, when what follows the views fuses with u, u(views)
    moved down past them: a unary pointwise op goes next to the op it can fuse with."""

    name = "find_unary_shape_transforms"

    def pattern(self):
        def output_not_pointwise(i):
            nxt = skip_output(i, ("contiguous",))
            return nxt is None or not nxt.op.has("pointwise")

        return pointwise()(
            none_of(name("layout")),
            pred("unary", lambda i: len(i.inputs) == 1, "not unary"),
            used_once(),
            all_static(),
            arg(0)(skip("contiguous")(name(*TRANSFORMS))),
            pred("output_not_pointwise", output_not_pointwise, "feeds a pointwise op"),
        )

    def check(self, m, r):
        ins = r.root
        if not ins.outputs:
            return "no users"
        xops, x = [], ins.inputs[0]
        while _is_view_step(x):
            xops.append(x.op)
            x = x.inputs[0]
        xops.reverse()
        yops, y, last = [], ins.outputs[0], None
        while _is_view_step(y) and len(y.outputs) == 1:
            yops.append(y.op)
            last, y = y, y.outputs[0]
        up, down = _fuses_unary(x), _fuses_unary(y)
        if up and down:  # one direction only: towards a literal, else down when there are views below
            if x.is_literal():
                down = False
            elif not yops:
                up = False
            else:
                down = False
        elif not up and not down and yops:
            up = True
        if up:

            def apply_up():
                z = m.insert_instruction(ins, ins.op, [x], ins.module_inputs)
                replace_value(m, ins, insert_ops(m, ins, xops, z))

            return apply_up
        if down and yops:

            def apply_down():
                z = insert_ops(m, last, yops, ins.inputs[0])
                replace_value(m, last, m.insert_instruction(last, ins.op, [z], ins.module_inputs))

            return apply_down
        return "neither side of the views fuses with the op"


def _is_view_step(ins) -> bool:
    return len(ins.inputs) == 1 and (ins.name in TRANSFORMS or ins.name == "contiguous")


def _fuses_unary(ins) -> bool:
    return ins.is_literal() or ins.op.has("pointwise") or "reduce" in ins.name


# ---- gather --------------------------------------------------------------------------------------
