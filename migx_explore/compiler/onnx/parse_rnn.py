"""RNN, GRU and LSTM -> the `rnn` / `gru` / `lstm` ops (ops/rnn.py), which `rewrite_rnn` unrolls,
as in MIGraphX's parse_rnn / parse_gru / parse_lstm. Missing optional inputs become zero
literals (sequence lengths: the full length), layout 1 (batch first) is transposed to layout 0
around the op, and activation names are lower-cased (ONNX spells them "Sigmoid", "Tanh", ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ops.rnn import DEFAULT_ACTIVATIONS, GATES
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _zeros(ctx, like, lens):
    return ctx.literal(np.zeros(lens, dtype=like.shape.dtype.np_dtype))


def _recurrent(ctx: NodeContext, args: Args, name: str) -> Result:
    args = list(args) + [None] * (8 - len(args))
    x, w, r = args[:3]
    layout = int(ctx.attr("layout", 0))
    if layout:
        x = ctx.add("transpose", [x], permutation=[1, 0, 2])
    direction = ctx.attr_choice("direction", ("forward", "reverse", "bidirectional"), "forward")
    nd = 2 if direction == "bidirectional" else 1
    hidden = int(ctx.attr("hidden_size", r.shape.lens[-1]))
    seq, batch, _ = x.shape.lens
    g = GATES[name]
    b = args[3] if args[3] is not None else _zeros(ctx, x, [nd, 2 * g * hidden])
    lens = args[4]
    lens = ctx.literal(np.full([batch], seq, np.int32)) if lens is None else ctx.convert(lens, "int32")

    def state(v):
        if v is None:
            return _zeros(ctx, x, [nd, batch, hidden])
        return ctx.add("transpose", [v], permutation=[1, 0, 2]) if layout else v

    inputs = [x, w, r, b, lens, state(args[5])]
    attrs = dict(
        hidden_size=hidden,
        direction=direction,
        clip=float(ctx.attr("clip", 0.0)),
        actv_alpha=list(ctx.attr("activation_alpha", [])),
        actv_beta=list(ctx.attr("activation_beta", [])),
    )
    acts = [a.lower() for a in ctx.attr("activations", [])]
    if acts and len(acts) == len(DEFAULT_ACTIVATIONS[name]) and nd == 2:
        acts = acts * 2  # one set given for both directions
    attrs["actv_funcs"] = tuple(acts)
    if name == "lstm":
        inputs += [state(args[6]), args[7] if args[7] is not None else _zeros(ctx, x, [nd, 3 * hidden])]
        attrs["input_forget"] = int(ctx.attr("input_forget", 0))
    if name == "gru":
        attrs["linear_before_reset"] = int(ctx.attr("linear_before_reset", 0))
    ins = ctx.add(name, inputs, **attrs)
    outs = [ctx.add("get_tuple_elem", [ins], index=i) for i in range(len(ins.shape.sub_shapes))]
    if layout:
        outs[0] = ctx.add("transpose", [outs[0]], permutation=[2, 0, 1, 3])
        outs[1:] = [ctx.add("transpose", [o], permutation=[1, 0, 2]) for o in outs[1:]]
    return outs


@register("RNN")
def parse_rnn(ctx: NodeContext, args: Args) -> Result:
    return _recurrent(ctx, args, "rnn")


@register("GRU")
def parse_gru(ctx: NodeContext, args: Args) -> Result:
    return _recurrent(ctx, args, "gru")


@register("LSTM")
def parse_lstm(ctx: NodeContext, args: Args) -> Result:
    return _recurrent(ctx, args, "lstm")
