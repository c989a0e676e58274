"""rewrite_reduce (MIGraphX src/rewrite_reduce.cpp): express softmax-like ops and reduce_mean with
the basic reductions the fusion passes understand.

Steps, as in MIGraphX:
1. find_logsoftmax:  logsoftmax(x) -> log(softmax(x))
2. find_softmax:     softmax(x) -> exp(x - max) / sum(exp(x - max)), with multibroadcasts;
   find_reduce_mean_variance: mean((x - mean(x))^2) -> mean(x * x) - mean(x)^2
3. (fp32_softmax, MIGraphX's default unless MIGRAPHX_DISABLE_FP32_SOFTMAX) a softmax of a type
   narrower than fp32 computes in fp32: we build it upcast directly (convert in, convert out),
   which is what MIGraphX reaches after upcasting each op and running eliminate_convert, DCE and
   CSE; those three then run here as nested passes. find_dot_softmax_fp32: when the softmax
   input comes from a dot through elementwise ops (a scale, a mask), those ops compute in fp32
   too, from the dot's result on (the dot itself stays in its type).
4. find_reduce_mean: reduce_mean -> reduce_sum of x / n (float) or reduce_sum(x) / n (integral),
   accumulating in float/int32 for 1-byte types or when n is large for a 2-byte type.
5. simplify_reshapes (nested), to tidy the broadcasts made above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import dtypes
from ..ir import Instruction, Module
from ..matcher import any_, any_of, arg, args, either_arg, has_value, name, skip_broadcasts
from ..op import Op
from ..ops.common import norm_axis
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_value, replace_with_op, row, to
from .dead_code_elimination import DeadCodeElimination
from .eliminate_common_subexpression import EliminateCommonSubexpression
from .eliminate_convert import EliminateConvert
from .rewrite import sweep
from .rule_helpers import broadcast_scalar, is_integral
from .simplify_reshapes import SimplifyReshapes

LOGSOFTMAX = row(
    # logsoftmax(x) -> log(softmax(x))
    "find_logsoftmax",
    name("logsoftmax")(arg(0)(any_().bind("x"))),
    to("log", to("softmax", "x", axis=lambda r: r.root.op["axis"])),
)


def upstream_dot(x: Instruction) -> Instruction | None:
    """MIGraphX find_dot_softmax_fp32's walk back from a softmax input: through single inputs, else
    the first non-constant, non-bool input (skipping scales, -inf literals, masks) to a dot."""
    seen: set[int] = set()
    while x.id not in seen:
        seen.add(x.id)
        if x.name == "dot":
            return x
        if len(x.inputs) == 1:
            x = x.inputs[0]
            continue
        data = [i for i in x.inputs if not i.can_eval() and i.shape.type != "bool"]
        if not data:
            return None
        x = data[0]
    return None


def upcast_from_dot(m: Module, dot: Instruction, x: Instruction) -> Instruction:
    """Recompute the instructions after `dot` up to `x` in float32, each converted back to its own
    type for its users; returns what now stands for x."""
    index = m.index_of()
    down, stack = {dot.id}, [dot]
    while stack:  # everything reachable from the dot, up to x
        for o in stack.pop().outputs:
            if o.id not in down and o.id in index and index[o.id] <= index[x.id]:
                down.add(o.id)
                stack.append(o)
    chain, stack = {x.id}, [x]
    while stack:  # ... that x depends on
        for i in stack.pop().inputs:
            if i.id in down and i.id not in chain and i is not dot:
                chain.add(i.id)
                stack.append(i)
    out = x
    for ins in sorted((i for i in m if i.id in chain), key=lambda i: index[i.id]):
        if ins.module_inputs or ins.shape.is_tuple or ins.shape.type in ("float32", "float64", "bool"):
            continue
        args = [
            i
            if i.shape.type in ("bool", "float32")
            else m.insert_instruction(ins, Op("convert", target_type="float32"), [i])
            for i in ins.inputs
        ]
        up = m.insert_instruction(ins, ins.op, args)
        back = m.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [up])
        m.replace_all_uses(ins, back)
        m.remove_instruction(ins)
        if ins is x:
            out = back
    return out


class Softmax(Rule):
    """softmax(x) -> e / broadcast(reduce_sum(e)),  e = exp(x - broadcast(reduce_max(x)))."""

    name = "find_softmax"

    def __init__(self, fp32: bool = True):
        self.fp32 = fp32

    def pattern(self):
        return name("softmax")

    def check(self, m, r):
        ins = r.root
        if ins.shape.dyn_dims is not None:
            return "dynamic shape"
        upcast = self.fp32 and ins.shape.type in ("float16", "bfloat16")

        def apply():
            x = ins.inputs[0]
            dot = upstream_dot(x) if upcast else None
            if dot is not None and x is not dot:
                x = upcast_from_dot(m, dot, x)
            if upcast:
                x = m.insert_instruction(ins, Op("convert", target_type="float32"), [x])
            axis = norm_axis(ins.op["axis"], x.shape.ndim, "softmax")
            lens = x.shape.lens

            def op(o, *a):
                return m.insert_instruction(ins, o, list(a))

            mx = op(Op("multibroadcast", out_lens=lens), op(Op("reduce_max", axes=[axis]), x))
            e = op(Op("exp"), op(Op("sub"), x, mx))
            s = op(Op("multibroadcast", out_lens=lens), op(Op("reduce_sum", axes=[axis]), e))
            if upcast:
                replace_with_op(m, ins, Op("convert", target_type=ins.shape.type), [op(Op("div"), e, s)])
            else:
                replace_with_op(m, ins, Op("div"), [e, s])

        return apply


_mean = skip_broadcasts(name("reduce_mean").bind("mean"))
_x_minus_mean = name("sub")(arg(0)(any_().bind("x")), arg(1)(_mean))
REDUCE_MEAN_VARIANCE = row(
    # mean((x - mean(x))^2) -> mean(x * x) - mean(x) * mean(x)
    "find_reduce_mean_variance",
    name("reduce_mean")(
        arg(0)(
            any_of(
                name("pow")(arg(0)(_x_minus_mean), arg(1)(has_value(2.0))),
                name("mul")(args(_x_minus_mean, _x_minus_mean)),
                name("sqdiff")(either_arg(0, 1)(any_().bind("x"), _mean)),
            )
        )
    ),
    to("sub", to("reduce_mean", to("mul", "x", "x"), axes=lambda r: r.root.op["axes"]), to("mul", "mean", "mean")),
    lambda m, r: (
        None
        if (r.root.op == r["mean"].op and r["mean"].inputs[0] is r["x"])
        else "the inner mean is over other axes or of another value"
    ),
)


class ReduceMean(Rule):
    name = "find_reduce_mean"

    def pattern(self):
        return name("reduce_mean")

    def check(self, m, r):
        ins = r.root
        x = ins.inputs[0]
        if x.shape.dyn_dims is not None:
            return "dynamic shape"
        n = x.shape.elements() // max(ins.shape.elements(), 1)
        t = x.shape.dtype
        integral = is_integral(x.shape)
        if t.name == "bool":
            return "bool mean"
        top = np.iinfo(t.np_dtype).max if integral else float(dtypes.finfo(t.name).max)
        acc = None
        if t.size == 1 or (n >= top / 4 and t.size < 3):
            acc = "int32" if integral else "float32"
        axes = list(ins.op["axes"])

        def apply():
            y = m.insert_instruction(ins, Op("convert", target_type=acc), [x]) if acc else x
            if integral:
                s = m.insert_instruction(ins, Op("reduce_sum", axes=axes), [y])
                out = m.insert_instruction(ins, Op("div"), [s, broadcast_scalar(m, ins, n, s)])
            else:
                d = m.insert_instruction(ins, Op("div"), [y, broadcast_scalar(m, ins, n, y)])
                out = m.insert_instruction(ins, Op("reduce_sum", axes=axes), [d])
            if out.shape.type != ins.shape.type:
                replace_with_op(m, ins, Op("convert", target_type=ins.shape.type), [out])
            else:
                replace_value(m, ins, out)

        return apply


@dataclass(frozen=True)
class RewriteReduce(Pass):
    name: ClassVar[str] = "rewrite_reduce"
    fp32_softmax: bool = True

    def apply_module(self, module, ctx) -> bool:
        rewriter = rewriter_of(ctx)
        changed = sweep(module, [LOGSOFTMAX], with_dce=False, rewriter=rewriter)
        changed = (
            sweep(module, [Softmax(self.fp32_softmax), REDUCE_MEAN_VARIANCE], with_dce=False, rewriter=rewriter)
            or changed
        )
        if self.fp32_softmax:
            changed = (
                ctx.run_passes((EliminateConvert(), DeadCodeElimination(), EliminateCommonSubexpression())) or changed
            )
        changed = sweep(module, [ReduceMean()], with_dce=False, rewriter=rewriter) or changed
        return ctx.run_pass(SimplifyReshapes()) or changed
