"""simplify_algebra's find_conv_conv_1x1, the finder not on MIGraphX's develop branch: conv(x, W1)
followed by a 1x1 convolution W2 is one convolution with weights W2 . W1 (contracted over the middle channels).
It decides as the unmerged MIGraphX version (branch conv1x1-fusion, PR #4785): grouped and
depthwise first convolutions and non-constant weights are fused too. That version builds the
combined weight with dims taken from the first conv, which is only right when the 1x1 conv keeps
the channel count; here:

* out != mid is fine: the combined weight is (out, in, kh, kw).
* A grouped or depthwise first conv is expanded to a dense block-diagonal (mid, in, kh, kw) weight
  before combining, so the result is an ordinary group-1 conv. Expansion can make the fused conv
  *bigger* than the pair (depthwise 3x3 then 1x1 is the classic case: out x in x 9 MACs per pixel
  instead of in x 9 + out x in); MIGraphX's branch fuses it anyway, and so does the default here.
  `ConvConv1x1(max_growth=1.0)` refuses when the fused weight has more elements than the two
  original weights together.
* Constant weights are combined here, in float64, into one literal; non-constant weights are
  combined in the graph (reshape, transpose, batched dot per group, as MIGraphX's branch).
* Stride, padding (also asymmetric) and dilation of the first conv carry over unchanged.
* A constant per-channel bias between them, conv1(x) + b, becomes conv(x) + W2 . b (constant
  weights only; MIGraphX's branch takes no bias: there find_conv_add splits it off first).
* It refuses (reasons visible through near_misses) when the middle value has other users, when
  anything else (a relu, ...) sits between, or when the second conv is not 1x1 / group 1 /
  stride 1 / unpadded.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import Instruction
from ...matcher import Matcher, MatchState, name
from ...op import Op
from ...pattern_rewriter import Rule, replace_with_op
from ...ref import eval_instruction
from .conv_rules import channel_only


class _FirstConv(Matcher):
    """Input 0 of the 1x1 conv: a convolution, or a convolution plus a constant (the bias)."""

    desc = "conv_or_biased_conv"

    def _test(self, ins, st: MatchState) -> bool:
        x = ins.inputs[0] if ins.inputs else None
        if x is None:
            st.reason = "no input"
            return False
        conv, bias = x, None
        if x.name == "add":
            a, b = x.inputs
            conv, bias = (a, b) if a.name == "convolution" else (b, a)
            if conv.name != "convolution":
                st.reason = "an add between the convolutions does not take a convolution"
                return False
            if not bias.can_eval(st.eval_cache):
                st.reason = "the value added between the convolutions is not constant"
                return False
            if len(x.outputs) != 1:
                st.reason = f"the biased middle value has {len(x.outputs)} users (the fused conv would drop it)"
                return False
        elif x.name != "convolution":
            if any(i.name == "convolution" for i in x.inputs):
                st.reason = f"{x.name} sits between the convolutions (only a constant bias add may)"
            else:
                st.reason = f"input 0 is {x.name}, not a convolution"
            return False
        if len(conv.outputs) != 1:
            st.reason = f"the first convolution's result has {len(conv.outputs)} users (the fused conv would drop it)"
            return False
        st.bindings.update({"first": conv, "mid": x})
        if bias is not None:
            st.bindings["bias"] = bias
        return True


class ConvConv1x1(Rule):
    """conv(conv(x, W1)[+ b], W2) with W2 1x1 -> conv(x, W2 . W1)[+ W2 . b]."""

    name = "find_conv_conv_1x1"

    def __init__(self, max_growth: float = math.inf):
        # Largest accepted ratio of fused weight elements to the pair's (see the module docstring);
        # unbounded by default, as MIGraphX's branch.
        self.max_growth = max_growth

    def pattern(self):
        return name("convolution")(_FirstConv())

    def check(self, m, r):
        ins, first, bias = r.root, r["first"], r.get("bias")
        w1, w2 = first.inputs[1], ins.inputs[1]
        reason = self._second_ok(ins)
        if reason:
            return reason
        constant = w1.can_eval() and w2.can_eval()
        if bias is not None and not constant:
            return "a bias between the convolutions needs constant weights to fold"
        if first.shape.dyn_dims is not None or ins.shape.dyn_dims is not None:
            return "dynamic shapes"
        out, mid = w2.shape.lens[:2]
        cin = first.inputs[0].shape.lens[1]
        kernel = math.prod(w1.shape.lens[2:])
        pair = w1.shape.elements() + w2.shape.elements()
        fused = out * cin * kernel
        if fused > self.max_growth * pair:
            g = first.op["group"]
            why = f" (group {g} expands to dense)" if g > 1 else ""
            return f"the fused weights would have {fused} elements, more than the pair's {pair}{why}"
        if bias is not None and not _is_channel_bias(bias, mid):
            return "the bias between the convolutions is not one value per channel"
        if not constant:
            return lambda: self._fuse_in_graph(m, ins, first)
        return lambda: self._fuse(m, ins, first, bias)

    @staticmethod
    def _second_ok(ins) -> str | None:
        op, w = ins.op, ins.inputs[1].shape
        if any(n != 1 for n in w.lens[2:]):
            return f"the second convolution is {'x'.join(map(str, w.lens[2:]))}, not 1x1"
        if op["group"] != 1:
            return f"the 1x1 convolution is grouped (group={op['group']})"
        if any(s != 1 for s in op["stride"]):
            return f"the 1x1 convolution has stride {tuple(op['stride'])}"
        if any(op["padding"]):
            return f"the 1x1 convolution is padded {tuple(op['padding'])}"
        # Dilation does not matter for a 1x1 kernel, so it is not checked.
        return None

    @staticmethod
    def _fuse_in_graph(m, ins, first) -> None:
        w = _combined_weights_in_graph(m, ins, first.inputs[1], ins.inputs[1], first.op["group"])
        replace_with_op(m, ins, first.op.with_(group=1), [first.inputs[0], w])

    @staticmethod
    def _fuse(m, ins, first, bias) -> None:
        w1 = np.asarray(eval_instruction(first.inputs[1]))
        w2 = np.asarray(eval_instruction(ins.inputs[1]), np.float64).reshape(ins.inputs[1].shape.lens[:2])
        # Combine in float64 and round once, so low-precision weights lose no more than one rounding.
        dense = _dense_weights(w1.astype(np.float64), first.op["group"])
        lit = m.add_literal(np.einsum("om,mc...->oc...", w2, dense).astype(w1.dtype))
        op = first.op.with_(group=1)
        x = first.inputs[0]
        if bias is None:
            replace_with_op(m, ins, op, [x, lit])
            return
        b = np.asarray(eval_instruction(bias))
        bvec = b[(0, slice(None)) + (0,) * (b.ndim - 2)].astype(np.float64)
        nb = m.add_literal((w2 @ bvec).astype(b.dtype))
        conv = m.insert_instruction(ins, op, [x, lit])
        bb = m.insert_instruction(ins, Op("broadcast", axis=1, out_lens=ins.shape.lens), [nb])
        replace_with_op(m, ins, Op("add"), [conv, bb])


def _combined_weights_in_graph(m, before, w1: Instruction, w2: Instruction, group: int) -> Instruction:
    """W2 . W1 as instructions, per group (MIGraphX's branch): (out, g, mid/g) x (g, mid/g, cin/g * k)
    batched over g, then (out, g * cin/g, *k). The result is (out, in, *k) for any out / mid."""
    out, mid = w2.shape.lens[:2]
    cpg, kernel = w1.shape.lens[1], list(w1.shape.lens[2:])
    per = mid // group

    def op(name: str, x: Instruction, **attrs) -> Instruction:
        return m.insert_instruction(before, Op(name, **attrs), [x])

    a = op("transpose", op("reshape", w2, dims=[out, group, per]), permutation=[1, 0, 2])
    b = op("reshape", w1, dims=[group, per, cpg * math.prod(kernel)])
    d = m.insert_instruction(before, Op("dot"), [a, b])
    return op("reshape", op("transpose", d, permutation=[1, 0, 2]), dims=[out, group * cpg, *kernel])


def _dense_weights(w: np.ndarray, group: int) -> np.ndarray:
    """(mid, in/group, *k) grouped weights -> (mid, in, *k) block-diagonal dense weights."""
    if group == 1:
        return w
    mid, cg = w.shape[:2]
    dense = np.zeros((mid, cg * group) + w.shape[2:], w.dtype)
    per = mid // group
    for g in range(group):
        dense[g * per : (g + 1) * per, g * cg : (g + 1) * cg] = w[g * per : (g + 1) * per]
    return dense


def _is_channel_bias(bias: Instruction, mid: int) -> bool:
    s = bias.shape
    if s.ndim < 2 or s.lens[1] != mid:
        return False
    if channel_only(s):
        return True
    v = np.asarray(eval_instruction(bias))
    corner = v[(slice(0, 1), slice(None)) + (slice(0, 1),) * (v.ndim - 2)]
    return bool(np.array_equal(np.broadcast_to(corner, v.shape), v))


CONV_CONV_1X1 = ConvConv1x1()
