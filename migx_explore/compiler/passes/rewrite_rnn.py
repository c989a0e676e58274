"""rewrite_rnn (MIGraphX src/rewrite_rnn.cpp): unroll `rnn`, `gru` and `lstm` over time.

As in MIGraphX, each direction becomes a chain of per-step cells built from slice / squeeze /
dot / add / pointwise activations: W and R are sliced per direction and transposed once, and
each step computes x_t W^T + Wb + h R^T + Rb and the gates from column slices of that. Unlike
MIGraphX, x_t W^T is one GEMM over the whole sequence per direction (cuDNN's input projection),
sliced per step: only h R^T stays inside the recurrence; and an LSTM adds each gate's columns
separately, so the sums fuse into the cell's kernel. The per-step hidden states are stacked
with concat into Y; the last step's hidden (and cell) state feed Y_h (Y_c). The op's
get_tuple_elem users are rewired to those.

Sequence lengths must be known at compile time. When they are all the full length (the
importer's default) nothing is masked; shorter forward sequences keep their state with a
`where` per step and write zeros to Y. A reverse direction with uneven lengths is refused
(near-miss reason), and the op stays (the backend runs its reference compute on the host).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Instruction, Module
from ..matcher import any_of, name
from ..op import Op
from ..ops.rnn import DEFAULT_ACTIVATIONS, activations, directions
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule, replace_value
from ..ref import eval_instruction
from .rewrite import sweep

RNN_OPS = ("rnn", "gru", "lstm")


class _Builder:
    """Inserts ops before the recurrent instruction; scalars become broadcast literals."""

    def __init__(self, m: Module, at: Instruction):
        self.m, self.at, self.type = m, at, at.inputs[0].shape.type
        self.made: list[Instruction] = []  # what was inserted, in order (scoped by step below)

    def __call__(self, op: str, *args: Instruction, **attrs) -> Instruction:
        made = self.m.insert_instruction(self.at, Op(op, **attrs), list(args))
        self.made.append(made)
        return made

    def literal(self, value: np.ndarray) -> Instruction:
        lit = self.m.add_literal(value, before=self.at)
        self.made.append(lit)
        return lit

    def const(self, value: float, like: Instruction) -> Instruction:
        lit = self.literal(np.asarray(value, dtype=like.shape.dtype.np_dtype))
        return self("multibroadcast", lit, out_lens=like.shape.lens)

    def cols(self, v: Instruction, k: int, width: int) -> Instruction:
        return self("slice", v, axes=[v.shape.ndim - 1], starts=[k * width], ends=[(k + 1) * width])

    def pick(self, v: Instruction, i: int) -> Instruction:
        """v[i] along axis 0."""
        return self("squeeze", self("slice", v, axes=[0], starts=[i], ends=[i + 1]), axes=[0])

    def act(self, spec: tuple[str, float, float], v: Instruction) -> Instruction:
        f, alpha, beta = spec
        if f in ("sigmoid", "tanh", "relu"):
            return self(f, v)
        if f == "leakyrelu":
            return self("leaky_relu", v, alpha=alpha)
        if f == "elu":
            return self("elu", v, alpha=alpha)
        if f == "softsign":
            return self("div", v, self("add", self("abs", v), self.const(1, v)))
        if f == "softplus":
            return self("log", self("add", self("exp", v), self.const(1, v)))
        if f == "thresholdedrelu":
            return self("where", self("greater", v, self.const(alpha, v)), v, self.const(0, v))
        scaled = self("mul", v, self.const(alpha if f != "scaledtanh" else beta, v))
        if f == "scaledtanh":
            return self("mul", self("tanh", scaled), self.const(alpha, v))
        shifted = self("add", scaled, self.const(beta, v))
        if f == "affine":
            return shifted
        return self("clip", shifted, self.const(0, v), self.const(1, v))  # hardsigmoid


def _cell(
    b: _Builder,
    op: Op,
    xw: Instruction,
    wb: Instruction,
    h: Instruction,
    c: Instruction | None,
    rd: Instruction,
    rb: Instruction,
    p: Instruction | None,
    acts,
) -> tuple[Instruction, Instruction | None]:
    """One step: xw = x_t W^T (all gates, no bias yet), wb its bias; returns the new (h, c)."""
    hs = op["hidden_size"]
    if op.name == "lstm":
        wrb = b("add", wb, rb)  # constant: folded at compile time
    else:
        xw = b("add", xw, wb)
    f = acts[0]
    clip = op["clip"]

    def cl(v):
        return b("clip", v, b.const(-clip, v), b.const(clip, v)) if clip > 0 else v

    if op.name == "rnn":
        return b.act(f, cl(b("add", xw, b("add", b("dot", h, rd), rb)))), c
    if op.name == "gru":
        hr = b("add", b("dot", h, rd), rb)  # h R^T + Rb, all three gates
        z = b.act(f, cl(b("add", b.cols(xw, 0, hs), b.cols(hr, 0, hs))))
        r = b.act(f, cl(b("add", b.cols(xw, 1, hs), b.cols(hr, 1, hs))))
        if op["linear_before_reset"]:
            hn = b("mul", r, b.cols(hr, 2, hs))
        else:
            rh = b("dot", b("mul", r, h), b.cols(rd, 2, hs))
            hn = b("add", rh, b.cols(rb, 2, hs))
        n = b.act(acts[1], cl(b("add", b.cols(xw, 2, hs), hn)))
        one_minus_z = b("sub", b.const(1, z), z)
        return b("add", b("mul", one_minus_z, n), b("mul", z, h)), c
    # Each gate adds its own columns of x_t W^T, h R^T and the biases (rather than slicing one
    # full-width sum), so fuse_pointwise folds the sums into the cell's kernel: one kernel a step
    # after the recurrent GEMM, not an add kernel and then the cell.
    hr = b("dot", h, rd)
    gi, go, gf, gc = (b("add", b.cols(xw, k, hs), b("add", b.cols(hr, k, hs), b.cols(wrb, k, hs))) for k in range(4))

    def peep(k: int, state: Instruction) -> Instruction:
        return b("mul", b("multibroadcast", b.cols(p, k, hs), out_lens=state.shape.lens), state)

    i = b.act(f, cl(b("add", gi, peep(0, c))))
    ff = b("sub", b.const(1, i), i) if op["input_forget"] else b.act(f, cl(b("add", gf, peep(2, c))))
    c2 = b("add", b("mul", ff, c), b("mul", i, b.act(acts[1], cl(gc))))
    o = b.act(f, cl(b("add", go, peep(1, c2))))
    return b("mul", o, b.act(acts[2], c2)), c2


def _input_projection(b: _Builder, x: Instruction, wd: Instruction) -> Instruction:
    """x_t W^T for every step at once, [seq, batch, G*hidden]: one GEMM over the whole sequence
    instead of one per step (the input does not depend on the recurrence; cuDNN does the same).
    Each step then slices its rows."""
    seq, batch, size = x.shape.lens
    flat = b("reshape", x, dims=[seq * batch, size])
    return b("reshape", b("dot", flat, wd), dims=[seq, batch, wd.shape.lens[1]])


FUSED_LSTM_MAX_STATE = 2048  # batch x hidden: lstm_recurrence keeps h, c and the gates in one block


def _plain_directions(op: Op, acts, n_act: int, peepholes: Instruction, lens, batch: int) -> list[bool]:
    """Per direction, whether lstm_recurrence computes it: the default activations, no clip, no
    coupled input and forget gates, zero peepholes, every sequence full length, a state one block
    holds. Reads the peepholes' value without adding instructions."""
    ndir = len(directions(op))
    if op["clip"] > 0 or op["input_forget"] or lens is not None or batch * op["hidden_size"] > FUSED_LSTM_MAX_STATE:
        return [False] * ndir
    if not peepholes.can_eval():
        return [False] * ndir
    pv = np.asarray(eval_instruction(peepholes))
    default = list(DEFAULT_ACTIVATIONS["lstm"])
    return [[a[0] for a in acts[d * n_act : (d + 1) * n_act]] == default and not np.any(pv[d]) for d in range(ndir)]


def _lengths(ins: Instruction) -> np.ndarray | None:
    lens = ins.inputs[4]
    return np.asarray(eval_instruction(lens)).reshape(-1) if lens.can_eval() else None


class UnrollRecurrent(Rule):
    name = "unroll_rnn"

    def __init__(self, fuse_lstm: bool = True):
        self.fuse_lstm = fuse_lstm

    def pattern(self):
        return any_of(*(name(n) for n in RNN_OPS))

    def check(self, m: Module, r):
        ins = r.root
        lens = _lengths(ins)
        if lens is None:
            return "sequence lengths are computed at run time"
        seq = ins.inputs[0].shape.lens[0]
        uneven = bool((np.minimum(lens, seq) != seq).any())
        if uneven and any(directions(ins.op)):
            return "a reverse direction with uneven sequence lengths"
        if any(u.name != "get_tuple_elem" for u in ins.outputs):
            return "the result is used other than through get_tuple_elem"
        return lambda: self._unroll(m, ins, np.minimum(lens, seq) if uneven else None)

    def _unroll(self, m: Module, ins: Instruction, lens: np.ndarray | None) -> None:
        b, op = _Builder(m, ins), ins.op
        batch = ins.inputs[0].shape.lens[1]
        # Scopes for what the unrolling makes (the explorer groups by them: one box per step)
        scope = f"{m.program.scopes.get(ins.id, '')}/{op.name}_{ins.id}".lstrip("/")
        scopes = _Scopes(b)
        n_act = len(DEFAULT_ACTIVATIONS[op.name])
        fused = self.fuse_lstm and op.name == "lstm"
        plain = _plain_directions(op, activations(op), n_act, ins.inputs[7], lens, batch) if fused else []
        if len(plain) == 2 and all(plain):
            values = _both_directions(b, ins, ins.inputs[1].shape.lens[1])
        else:
            values = _each_direction(b, ins, lens, plain, scope, scopes)
        scopes.enter(scope)
        # a new mapping, never a change to the shared one (copies and snapshots hold it)
        m.program.scopes = {**m.program.scopes, **scopes.scoped}
        for u in list(ins.outputs):
            replace_value(m, u, values[u.op["index"]])


def _each_direction(
    b: _Builder, ins: Instruction, lens: np.ndarray | None, plain: list[bool], scope: str, scopes: _Scopes
) -> list[Instruction]:
    """The layer's results (Y, Y_h and, for an LSTM, Y_c) from its directions one by one: an
    lstm_recurrence for a plain LSTM direction, else its steps unrolled, each its own scope."""
    op = ins.op
    lstm = op.name == "lstm"
    x, w, r, bias, _, h0 = ins.inputs[:6]
    seq, batch, _ = x.shape.lens
    gh = w.shape.lens[1]
    n_act = len(DEFAULT_ACTIVATIONS[op.name])
    acts = activations(op)
    ys, hs, cs = [], [], []
    for d, backwards in enumerate(directions(op)):
        where = f"{scope}/{'reverse' if backwards else 'forward'}"
        wd = b("transpose", b.pick(w, d), permutation=[1, 0])  # [input, G*hidden]
        rd = b("transpose", b.pick(r, d), permutation=[1, 0])  # [hidden, G*hidden]
        bd = b.pick(bias, d)
        wb = b("multibroadcast", b.cols(bd, 0, gh), out_lens=[batch, gh])
        rb = b("multibroadcast", b.cols(bd, 1, gh), out_lens=[batch, gh])
        h = b.pick(h0, d)
        c = b.pick(ins.inputs[6], d) if lstm else None
        p = b.pick(ins.inputs[7], d) if lstm else None
        xws = _input_projection(b, x, wd)
        dir_acts = acts[d * n_act : (d + 1) * n_act]
        if plain and plain[d]:
            wrb = b("add", b.cols(bd, 0, gh), b.cols(bd, 1, gh))  # constant: folded at compile time
            rec = b("lstm_recurrence", xws, rd, wrb, h, c, reverse=int(backwards))
            y = b("get_tuple_elem", rec, index=0)
            ys.append(b("unsqueeze", y, axes=[1]))
            hs.append(b("unsqueeze", b.pick(y, 0 if backwards else seq - 1), axes=[0]))
            cs.append(b("unsqueeze", b("get_tuple_elem", rec, index=1), axes=[0]))
            continue
        scopes.enter(where)
        cell = functools.partial(_cell, b, op, wb=wb, rd=rd, rb=rb, p=p, acts=dir_acts)
        y, h, c = _unrolled_direction(b, cell, xws, h, c, lens, backwards, where, scopes)
        ys.append(y)
        hs.append(b("unsqueeze", h, axes=[0]))
        cs.append(b("unsqueeze", c, axes=[0]) if lstm else None)
        scopes.enter(where)

    def join(parts, axis):
        return parts[0] if len(parts) == 1 else b("concat", *parts, axis=axis)

    return [join(ys, 1), join(hs, 0)] + ([join(cs, 0)] if lstm else [])


def _both_directions(b: _Builder, ins: Instruction, gh: int) -> list[Instruction]:
    """A plain bidirectional LSTM layer as one lstm_recurrences: one input-projection GEMM for
    both directions (W^T of each side by side), R^T and the summed biases stacked as ONNX holds
    them; its results are the layer's Y, Y_h and Y_c as they are (no concat)."""
    x, w, r, bias = ins.inputs[:4]
    size = x.shape.lens[2]
    # [2, G*h, input] -> [input, 2*G*h]: columns of the forward direction, then the reverse's
    wt = b("reshape", b("contiguous", b("transpose", w, permutation=[2, 0, 1])), dims=[size, 2 * gh])
    rt = b("transpose", r, permutation=[0, 2, 1])  # [2, h, G*h]
    summed = b("add", b.cols(bias, 0, gh), b.cols(bias, 1, gh))  # constant: folded at compile time
    rec = b("lstm_recurrences", _input_projection(b, x, wt), rt, summed, ins.inputs[5], ins.inputs[6])
    return [b("get_tuple_elem", rec, index=k) for k in range(3)]


class _Scopes:
    """Which scope each instruction the unrolling makes belongs to: `enter(where)` gives every
    instruction made since the last call (and not scoped yet) the scope `where`."""

    def __init__(self, b: _Builder) -> None:
        self.b = b
        self.scoped: dict[int, str] = {}

    def enter(self, where: str) -> None:
        for made in self.b.made:
            self.scoped.setdefault(made.id, where)
        self.b.made.clear()


def _unrolled_direction(b, cell, xws, h, c, lens, backwards: bool, where: str, scopes: _Scopes):
    """One direction's steps, each its own scope: (Y of the direction [seq, 1, batch, hidden],
    last h, last c). With uneven `lens`, a batch entry past its length keeps its state and
    outputs zeros."""
    seq = xws.shape.lens[0]
    steps: list[Instruction | None] = [None] * seq
    for step in range(seq):
        t = seq - 1 - step if backwards else step
        h2, c2 = cell(b.pick(xws, t), h=h, c=c)
        if lens is not None:  # forward only (plan refuses reverse with uneven lengths)
            valid = b("multibroadcast", b.literal((t < lens)[:, None]), out_lens=h2.shape.lens)
            steps[t] = b("where", valid, h2, b.const(0, h2))
            h2 = b("where", valid, h2, h)
            c2 = b("where", valid, c2, c) if c is not None else None
        else:
            steps[t] = h2
        h, c = h2, c2
        scopes.enter(f"{where}/step.{t}")
    stacked = [b("unsqueeze", s, axes=[0, 1]) for s in steps]
    for s, u in zip(steps, stacked):  # each step's output row belongs to that step
        scopes.scoped[u.id] = scopes.scoped.get(s.id, where)
    return b("concat", *stacked, axis=0), h, c


@dataclass(frozen=True)
class RewriteRnn(Pass):
    """Unroll rnn/gru/lstm over time (MIGraphX's rewrite_rnn)."""

    name: ClassVar[str] = "rewrite_rnn"

    fuse_lstm: bool = True

    def apply_module(self, module: Module, ctx) -> bool:
        return sweep(module, [UnrollRecurrent(self.fuse_lstm)], rewriter=rewriter_of(ctx))
