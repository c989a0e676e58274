"""simplify_algebra (MIGraphX src/simplify_algebra.cpp): up to 8 sweeps of the finders below, in
MIGraphX's order, each sweep followed by DCE. Simple algebraic identities are table rows here;
the convolution/dot finders live in conv_rules, the concat/split ones in concat_rules,
those moving broadcasts / reshapes / transposes across an op in shape_rules.

find_conv_conv_1x1 (unmerged MIGraphX branch, PR #4785; conv1x1_rules) is inserted after
find_conv_add. In a full run find_conv_add first splits a bias that sits between two convolutions
(conv2(conv1(x) + b) -> conv2(conv1(x)) + conv2(b)); find_conv_conv_1x1 then folds the bias-free
pair and find_conv_broadcast_input shrinks conv2(b) to a dot. Applied on its own the rule also
folds the bias directly (new bias = W2 . b). `CONV_CONV_1X1` is the rule object for notebooks:
`matches(module, CONV_CONV_1X1)`, `near_misses(module, CONV_CONV_1X1)`.

Deliberate difference: find_split_reshape refuses what MIGraphX's version gets wrong, a one-element
slice block matched against the last reshape axis, which slices the wrong elements (MIGraphX's own
test reorder_reshape_slice_len_1 expects that program, which computes different values).

Where MIGraphX's own construction throws (an invalid program), ours refuses with a reason instead
(find_inner_broadcast tries its plan on shapes first). One extension, numerically exact:
find_conv_broadcast_input also takes a per-channel input shared by the batch.

All 32 of MIGraphX's finders are here, plus find_conv_conv_1x1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...matcher import Matcher, any_, any_of, arg, args, either_arg, has_value, is_constant, name, none_of, used_once
from ...op import Op
from ...pattern_rewriter import repeat_while_changes, replace_value, replace_with_op, row, to
from ..base import Pass, rewriter_of
from ..rule_helpers import is_integral, lit_broadcast, not_lit_broadcast
from ..rule_pass import sweep
from .concat_rules import (
    CONCAT_OP,
    CONCAT_SAME_INPUT,
    SPLIT_CONCAT,
    SPLITS,
)
from .conv1x1_rules import CONV_CONV_1X1, ConvConv1x1
from .conv_rules import (
    ADD_CONVS,
    CONCAT_CONV,
    CONV_ADD,
    CONV_BROADCAST_INPUT,
    CONV_DOT_HORIZ_FUSION,
    DOT_MUL,
    DOT_SLICE,
    MUL_CONV,
    MUL_DOT,
    MUL_SLICE_CONV,
    conv_const_weights,
)
from .shape_rules import DOT_BROADCAST, INNER_BROADCAST, SPLIT_RESHAPE, SPLIT_TRANSPOSE

X = any_().bind("x")


def op_lit_broadcast(op: str, lit: str, other: str) -> Matcher:
    """op(lit, other) in either order, where `lit` is a constant or a broadcast and `other` is not."""
    return name(op)(either_arg(0, 1)(lit_broadcast().bind(lit), not_lit_broadcast().bind(other)))


def _not_integral(m, r):
    return "integer division does not distribute as a reciprocal" if is_integral(r.root.shape) else None


def _not_bool(m, r):
    return "bool has no negation" if r.root.shape.type == "bool" else None


def _neg(m, r):
    """A new neg takes the root's place (as MIGraphX: a trailing root becomes identity(neg))."""
    replace_value(m, r.root, m.insert_instruction(r.root, Op("neg"), [r["x"]]))


def _zero(m, r):
    """The zero takes the root's place; a zero with all strides 0 (a scalar or a broadcast) is
    first reshaped to the root's lens, as MIGraphX does (a standard-shaped value)."""
    zero = r["zero"]
    if zero.shape.scalar_shape():
        zero = m.insert_instruction(r.root, Op("reshape", dims=list(r.root.shape.lens)), [zero])
    replace_value(m, r.root, zero)


def _double_add(m, r):
    """(x + a) + (y + b) -> (x + y) + (a + b); two equal broadcasts add their sources first."""
    ins, a, b = r.root, r["a"], r["b"]
    if a.name == "broadcast" and b.name == "broadcast" and a.op == b.op \
            and a.inputs[0].shape.lens == b.inputs[0].shape.lens:
        pre = m.insert_instruction(ins, Op("add"), [a.inputs[0], b.inputs[0]])
        ab = m.insert_instruction(ins, a.op, [pre])
    else:
        ab = m.insert_instruction(ins, Op("add"), [a, b])
    xy = m.insert_instruction(ins, Op("add"), [r["x"], r["y"]])
    replace_with_op(m, ins, Op("add"), [xy, ab])


def _dot_add(m, r):
    """dot(x + b, a) -> dot(x, a) + dot(b, a), keeping the operand order."""
    ins, a = r.root, r["a"]
    flipped = ins.inputs[0] is a

    def dot(u):
        return m.insert_instruction(ins, Op("dot"), [a, u] if flipped else [u, a])

    replace_with_op(m, ins, Op("add"), [dot(r["x"]), dot(r["b"])])


_add_of_const = name("add")(either_arg(0, 1)(any_().bind("x"), is_constant().bind("b")),
                            none_of(args(is_constant(), is_constant())), used_once())
_positive = any_of(name("exp"), name("reduce_sum")(args(name("exp"))),
                   name("multibroadcast")(args(name("reduce_sum")(args(name("exp"))))))

DOUBLE_ADD_LIT_BROADCAST = row(
    # (x + a) + (y + b) -> (x + y) + (a + b)
    "find_double_add_lit_broadcast",
    name("add")(args(op_lit_broadcast("add", "a", "x"), op_lit_broadcast("add", "b", "y"))), _double_add)
ADD_LIT_BROADCAST = row(
    # (x + a) + b -> x + (a + b)
    "find_add_lit_broadcast",
    name("add")(either_arg(0, 1)(op_lit_broadcast("add", "a", "x"), lit_broadcast().bind("b"))),
    to("add", "x", to("add", "a", "b")))
MUL_ADD = row(
    # a * (x + b) -> a * x + a * b      (a constant; b constant or a conv with constant weights)
    "find_mul_add",
    name("mul")(either_arg(0, 1)(
        name("add")(either_arg(0, 1)(any_().bind("x"), any_of(conv_const_weights(), is_constant()).bind("b")),
                    none_of(args(is_constant(), is_constant())), used_once()),
        is_constant().bind("a"))),
    to("add", to("mul", "a", "x"), to("mul", "a", "b")))
UNIT_OPS = (
    row("find_unit_ops", name("mul")(either_arg(0, 1)(has_value(1.0), X)), "x"),  # x * 1 -> x
    row("find_unit_ops", name("div")(args(X, has_value(1.0))), "x"),  # x / 1 -> x
    row("find_unit_ops", name("add")(either_arg(0, 1)(has_value(0.0), X)), "x"),  # x + 0 -> x
    row("find_unit_ops", name("sub")(args(X, has_value(0.0))), "x"),  # x - 0 -> x
)
NEG_UNIT_OPS = (
    row("find_neg_unit_ops", name("mul")(either_arg(0, 1)(has_value(-1.0), X)), _neg),  # x * -1 -> -x
    row("find_neg_unit_ops", name("div")(args(X, has_value(-1.0))), _neg),  # x / -1 -> -x
    row("find_neg_unit_ops", name("sub")(args(has_value(0.0), X)), _neg, _not_bool),  # 0 - x -> -x
)
ZERO_POINT = row(
    # quantizelinear(x, s, 0) -> quantizelinear[out_type](x, s); dequantizelinear(x, s, 0) -> dequantizelinear(x, s)
    "eliminate_zero_point",
    name("quantizelinear", "dequantizelinear")(arg(0)(any_().bind("x")), arg(1)(any_().bind("s")),
                                               arg(2)(has_value(0.0))),
    lambda m, r: replace_with_op(m, r.root, r.root.op.with_(out_type=r.root.shape.type)
                                 if r.root.name == "quantizelinear" else r.root.op, [r["x"], r["s"]]))
ZERO_OPS = (
    # As in MIGraphX these ignore x = inf/nan (0 * inf is nan, not 0).
    row("find_zero_ops", name("mul")(either_arg(0, 1)(has_value(0.0).bind("zero"), any_())), _zero),  # 0 * x -> 0
    row("find_zero_ops", name("div")(args(has_value(0.0).bind("zero"), any_())), _zero),  # 0 / x -> 0
)
DOT_ADD = row(
    # dot(x + b, a) -> dot(x, a) + dot(b, a)        (a, b constant)
    "find_dot_add", name("dot")(either_arg(0, 1)(_add_of_const, is_constant().bind("a"))), _dot_add)
DIV_CONST = row(
    # x / c -> x * recip(c)                          (floating point only)
    "find_div_const", name("div")(args(X, is_constant().bind("c"))), to("mul", "x", to("recip", "c")), _not_integral)
SUB_CONST = row(
    # x - c -> x + neg(c)
    "find_sub_const", name("sub")(args(X, is_constant().bind("c"))), to("add", "x", to("neg", "c")), _not_bool)
RSQRT = row(
    # recip(sqrt(x)) -> rsqrt(x)
    "find_rsqrt", name("recip")(args(name("sqrt")(used_once(), args(X)))), to("rsqrt", "x"))
LOG_EXP = row(
    # log(exp(x)) -> x
    "find_log_exp", name("log")(args(name("exp")(args(X)))), "x")
LOG_DIV = row(
    # log(x / y) -> log(x) - log(y)                  (x, y: exp or a sum of exps, so positive)
    "find_log_div", name("log")(args(name("div")(used_once(), args(_positive.bind("x"), _positive.bind("y"))))),
    to("sub", to("log", "x"), to("log", "y")))
POW2 = row(
    # pow(x, 2) -> x * x
    "find_pow2", name("pow")(args(X, has_value(2.0))), to("mul", "x", "x"))

# MIGraphX's order (src/simplify_algebra.cpp), with find_conv_conv_1x1 after find_conv_add.
RULES = (
    CONV_BROADCAST_INPUT, INNER_BROADCAST, DOT_BROADCAST, DOUBLE_ADD_LIT_BROADCAST, ADD_LIT_BROADCAST, ADD_CONVS,
    CONV_DOT_HORIZ_FUSION, MUL_CONV, MUL_SLICE_CONV, MUL_DOT, DOT_SLICE, DOT_MUL, MUL_ADD, *UNIT_OPS, *NEG_UNIT_OPS,
    ZERO_POINT, *ZERO_OPS, DOT_ADD, CONV_ADD,
    CONV_CONV_1X1, DIV_CONST, SUB_CONST, RSQRT, LOG_EXP, LOG_DIV, CONCAT_CONV, CONCAT_SAME_INPUT, CONCAT_OP,
    SPLIT_CONCAT, SPLITS, SPLIT_RESHAPE, SPLIT_TRANSPOSE, POW2,
)


@dataclass(frozen=True)
class SimplifyAlgebra(Pass):
    name: ClassVar[str] = "simplify_algebra"
    note: ClassVar[str] = (
        "MIGraphX's 32 finders, in its order, plus find_conv_conv_1x1 (unmerged "
        "upstream) after find_conv_add; find_split_reshape refuses a reorder MIGraphX gets wrong (len-1 slices)")

    def apply_module(self, module, ctx) -> bool:
        return repeat_while_changes(8, lambda: sweep(module, RULES, rewriter=rewriter_of(ctx))) > 0


__all__ = ["CONV_CONV_1X1", "ConvConv1x1", "RULES", "SimplifyAlgebra"]
