"""simplify_algebra's simple algebraic identities, one table row each with its `# a -> b` comment
(tinygrad's symbolic tables): unit and zero operands, constant folding of adds and muls through
broadcasts, and the log/exp/pow/rsqrt forms. The pass (this package's __init__) puts them in
MIGraphX's order among the other finders."""

from __future__ import annotations

from ...matcher import Matcher, any_, any_of, arg, args, either_arg, has_value, is_constant, name, none_of, used_once
from ...op import Op
from ...pattern_rewriter import replace_value, replace_with_op, row, to
from ..rule_helpers import is_integral, lit_broadcast, not_lit_broadcast
from .conv_rules import conv_const_weights

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
    if (
        a.name == "broadcast"
        and b.name == "broadcast"
        and a.op == b.op
        and a.inputs[0].shape.lens == b.inputs[0].shape.lens
    ):
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


_add_of_const = name("add")(
    either_arg(0, 1)(any_().bind("x"), is_constant().bind("b")),
    none_of(args(is_constant(), is_constant())),
    used_once(),
)
_positive = any_of(
    name("exp"),
    name("reduce_sum")(args(name("exp"))),
    name("multibroadcast")(args(name("reduce_sum")(args(name("exp"))))),
)

DOUBLE_ADD_LIT_BROADCAST = row(
    # (x + a) + (y + b) -> (x + y) + (a + b)
    "find_double_add_lit_broadcast",
    name("add")(args(op_lit_broadcast("add", "a", "x"), op_lit_broadcast("add", "b", "y"))),
    _double_add,
)
ADD_LIT_BROADCAST = row(
    # (x + a) + b -> x + (a + b)
    "find_add_lit_broadcast",
    name("add")(either_arg(0, 1)(op_lit_broadcast("add", "a", "x"), lit_broadcast().bind("b"))),
    to("add", "x", to("add", "a", "b")),
)
MUL_ADD = row(
    # a * (x + b) -> a * x + a * b      (a constant; b constant or a conv with constant weights)
    "find_mul_add",
    name("mul")(
        either_arg(0, 1)(
            name("add")(
                either_arg(0, 1)(any_().bind("x"), any_of(conv_const_weights(), is_constant()).bind("b")),
                none_of(args(is_constant(), is_constant())),
                used_once(),
            ),
            is_constant().bind("a"),
        )
    ),
    to("add", to("mul", "a", "x"), to("mul", "a", "b")),
)
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
    name("quantizelinear", "dequantizelinear")(
        arg(0)(any_().bind("x")), arg(1)(any_().bind("s")), arg(2)(has_value(0.0))
    ),
    lambda m, r: replace_with_op(
        m,
        r.root,
        r.root.op.with_(out_type=r.root.shape.type) if r.root.name == "quantizelinear" else r.root.op,
        [r["x"], r["s"]],
    ),
)
ZERO_OPS = (
    # As in MIGraphX these ignore x = inf/nan (0 * inf is nan, not 0).
    row("find_zero_ops", name("mul")(either_arg(0, 1)(has_value(0.0).bind("zero"), any_())), _zero),  # 0 * x -> 0
    row("find_zero_ops", name("div")(args(has_value(0.0).bind("zero"), any_())), _zero),  # 0 / x -> 0
)
DOT_ADD = row(
    # dot(x + b, a) -> dot(x, a) + dot(b, a)        (a, b constant)
    "find_dot_add",
    name("dot")(either_arg(0, 1)(_add_of_const, is_constant().bind("a"))),
    _dot_add,
)
DIV_CONST = row(
    # x / c -> x * recip(c)                          (floating point only)
    "find_div_const",
    name("div")(args(X, is_constant().bind("c"))),
    to("mul", "x", to("recip", "c")),
    _not_integral,
)
SUB_CONST = row(
    # x - c -> x + neg(c)
    "find_sub_const",
    name("sub")(args(X, is_constant().bind("c"))),
    to("add", "x", to("neg", "c")),
    _not_bool,
)
RSQRT = row(
    # recip(sqrt(x)) -> rsqrt(x)
    "find_rsqrt",
    name("recip")(args(name("sqrt")(used_once(), args(X)))),
    to("rsqrt", "x"),
)
LOG_EXP = row(
    # log(exp(x)) -> x
    "find_log_exp",
    name("log")(args(name("exp")(args(X)))),
    "x",
)
LOG_DIV = row(
    # log(x / y) -> log(x) - log(y)                  (x, y: exp or a sum of exps, so positive)
    "find_log_div",
    name("log")(args(name("div")(used_once(), args(_positive.bind("x"), _positive.bind("y"))))),
    to("sub", to("log", "x"), to("log", "y")),
)
POW2 = row(
    # pow(x, 2) -> x * x
    "find_pow2",
    name("pow")(args(X, has_value(2.0))),
    to("mul", "x", "x"),
)
