"""Recurrent ops `rnn`, `gru` and `lstm` (MIGraphX's names), as ONNX defines them with
layout 0: X [seq, batch, input], W [dirs, G*hidden, input], R [dirs, G*hidden, hidden],
B [dirs, 2*G*hidden], sequence lengths [batch] (int32), initial_h [dirs, batch, hidden]
(lstm also initial_c and peepholes P [dirs, 3*hidden]). The importer fills every optional
input, so the ops always take all of them.

Each returns a tuple (Y [seq, dirs, batch, hidden], Y_h [dirs, batch, hidden][, Y_c]).
`rewrite_rnn` unrolls them over time into dot / slice / pointwise ops (compiler/passes/
rewrite_rnn.py); the compute here is the independent numpy reference the unrolling is checked
against. Steps at or past a batch entry's sequence length leave its state unchanged and write
zeros to Y (ONNX semantics).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ShapeError
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A

GATES = {"rnn": 1, "gru": 3, "lstm": 4}
DEFAULT_ACTIVATIONS = {"rnn": ("tanh",), "gru": ("sigmoid", "tanh"), "lstm": ("sigmoid", "tanh", "tanh")}
ACTIVATIONS = (
    "sigmoid",
    "tanh",
    "relu",
    "leakyrelu",
    "hardsigmoid",
    "elu",
    "softsign",
    "softplus",
    "affine",
    "scaledtanh",
    "thresholdedrelu",
)
_DEFAULT_ALPHA = {
    "leakyrelu": 0.01,
    "hardsigmoid": 0.2,
    "elu": 1.0,
    "affine": 1.0,
    "scaledtanh": 1.0,
    "thresholdedrelu": 1.0,
}
_DEFAULT_BETA = {"hardsigmoid": 0.5, "affine": 0.0, "scaledtanh": 1.0}


def activation_params(name: str, alpha: float | None, beta: float | None) -> tuple[float, float]:
    return (
        _DEFAULT_ALPHA.get(name, 0.0) if alpha is None else alpha,
        _DEFAULT_BETA.get(name, 0.0) if beta is None else beta,
    )


# 1 as an array: adding it skips the conversion of a Python scalar (a third of a small add's time)
_ONE = np.ones((), np.float32)


def _sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """1 / (1 + exp(-x)), in one buffer (`out`, else a new one; each step rounds as written out)."""
    e = np.negative(x, out=out)
    np.exp(e, out=e)
    e += _ONE
    return np.reciprocal(e, out=e)


def np_activation(name: str, x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    if name == "sigmoid":
        return _sigmoid(x)
    if name == "tanh":
        return np.tanh(x)
    if name == "relu":
        return np.maximum(x, 0)
    if name == "leakyrelu":
        return np.where(x >= 0, x, alpha * x)
    if name == "hardsigmoid":
        return np.clip(alpha * x + beta, 0, 1)
    if name == "elu":
        return np.where(x >= 0, x, alpha * (np.exp(x) - 1))
    if name == "softsign":
        return x / (1 + np.abs(x))
    if name == "softplus":
        return np.log1p(np.exp(x))
    if name == "affine":
        return alpha * x + beta
    if name == "scaledtanh":
        return alpha * np.tanh(beta * x)
    return np.where(x > alpha, x, 0)  # thresholdedrelu


def directions(op) -> list[bool]:
    """One entry per direction: whether it runs backwards in time."""
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[op["direction"]]


def activations(op) -> list[tuple[str, float, float]]:
    """(name, alpha, beta) per activation slot, per direction (forward's then reverse's)."""
    names = op["actv_funcs"] or DEFAULT_ACTIVATIONS[op.name] * len(directions(op))
    alphas, betas = op["actv_alpha"], op["actv_beta"]
    out = []
    for k, n in enumerate(names):
        out.append(
            (n, *activation_params(n, alphas[k] if k < len(alphas) else None, betas[k] if k < len(betas) else None))
        )
    return out


def _shape(op, s, mods):
    g, h = GATES[op.name], op["hidden_size"]
    nd = len(directions(op))
    want = 8 if op.name == "lstm" else 6
    if len(s) != want:
        raise ShapeError(f"{op.name}: takes {want} inputs, got {len(s)}")
    x, w, r = s[0], s[1], s[2]
    if x.ndim != 3:
        raise ShapeError(f"{op.name}: X must be [seq, batch, input], got {list(x.lens)}")
    seq, batch, inp = x.lens
    if w.lens != (nd, g * h, inp) or r.lens != (nd, g * h, h):
        raise ShapeError(
            f"{op.name}: W {list(w.lens)} / R {list(r.lens)} do not match {nd} direction(s), "
            f"{g} gate(s), hidden {h}, input {inp}"
        )
    n_act = len(DEFAULT_ACTIVATIONS[op.name])
    if op["actv_funcs"] and len(op["actv_funcs"]) != n_act * nd:
        raise ShapeError(f"{op.name}: needs {n_act * nd} activation functions, got {len(op['actv_funcs'])}")
    for a in op["actv_funcs"]:
        if a not in ACTIVATIONS:
            raise ShapeError(f"{op.name}: activation {a!r} is not one of {', '.join(ACTIVATIONS)}")
    t = x.type
    state = Shape.of(t, [nd, batch, h])
    outs = [Shape.of(t, [seq, nd, batch, h]), state] + ([state] if op.name == "lstm" else [])
    return Shape.tuple_of(outs)


class _Cell:
    """One time step of a layer, its attributes read once: given the input's part of the gates
    `xw` = x W^T + Wb (+ the parts of Rb that are plain sums, `_input_part`), R^T `rt`, the rest
    of Rb and the peepholes `p` (None: all zero), `step(xw, h, c)` returns the new (h, c). Gates
    are the last axis; leading axes (directions stepped together, the batch) broadcast."""

    def __init__(self, op, rt, rb, p, acts):
        self.name, self.hs = op.name, op["hidden_size"]
        self.input_forget = op.name == "lstm" and op["input_forget"]
        self.linear_before_reset = op.name == "gru" and op["linear_before_reset"]
        self.rt, self.rb, self.p = rt, rb, p
        f, g, hh = (list(acts) + [None, None])[:3]
        # `clip` bounds the gates' pre-activations, not the cell (hh)
        self.f, self.g, self.hh = _activation(f, op["clip"]), _activation(g, op["clip"]), _activation(hh, 0.0)
        self.step = {"rnn": self._rnn, "gru": self._gru, "lstm": self._lstm}[op.name]  # chosen once

    @property
    def plain_lstm(self) -> bool:
        """An LSTM without peepholes or coupled gates: `run_plain` steps it."""
        return self.name == "lstm" and self.p is None and not self.input_forget

    def run(self, xws, h, c, ys):
        """Every step of `xws` [seq, ..., G*h] in order from state (h, c), each new h written to
        ys[step]; returns the last (h, c)."""
        for step in range(len(xws)):
            h, c = self.step(xws[step], h, c)
            ys[step] = h
        return h, c

    def run_plain(self, xws, h, c, ys):
        """`run` for a plain LSTM, its inputs gate-major: xws [seq, 4 (i, o, f, c), ..., h]. The
        operations of _lstm, in one frame, each gate a contiguous block (each small ufunc on a
        strided slice of the gates costs up to 2x more): h R^T is added to x W^T into that layout.
        The gates and the i, o, f activations live in buffers rewritten every step, their views
        made once (at ~12 us a step, the views' construction alone was a tenth)."""
        hs, rt, f, g, hh = self.hs, self.rt, self.f, self.g, self.hh
        hr = np.empty(h.shape[:-1] + (4 * hs,), xws.dtype)  # h R^T [directions, batch, 4h]
        hr_gates = hr.reshape(h.shape[:-1] + (4, hs)).transpose(2, 0, 1, 3)  # as [4, directions, batch, h]
        gates = np.empty(xws.shape[1:], xws.dtype)
        iof = np.empty((3,) + xws.shape[2:], xws.dtype)
        pre_iof, pre_c, i, o, ff = gates[:3], gates[3], iof[0], iof[1], iof[2]
        into = f if f in _DIRECT.values() else lambda x, out: np.copyto(out, f(x))  # f(x) written to out
        for step in range(len(xws)):
            np.matmul(h, rt, out=hr)
            np.add(hr_gates, xws[step], out=gates)
            into(pre_iof, out=iof)
            c = ff * c
            c += i * g(pre_c)
            h = np.multiply(o, hh(c), out=ys[step])
        return h, c

    def _rnn(self, xw, h, c):
        return self.f(xw + h @ self.rt), c

    def _gru(self, xw, h, c):
        hs, rt, rb, f, g = self.hs, self.rt, self.rb, self.f, self.g
        zr = f(xw[..., : 2 * hs] + h @ rt[..., : 2 * hs])  # gates z and r in one product
        z, rr = zr[..., :hs], zr[..., hs:]
        if self.linear_before_reset:
            n = g(xw[..., 2 * hs :] + rr * (h @ rt[..., 2 * hs :] + rb[..., 2 * hs :]))
        else:
            n = g(xw[..., 2 * hs :] + (rr * h) @ rt[..., 2 * hs :] + rb[..., 2 * hs :])
        return (1 - z) * n + z * h, c

    def _lstm(self, xw, h, c):
        hs, rt, p, f = self.hs, self.rt, self.p, self.f
        gates = h @ rt  # i, o, f, c
        gates += xw
        if p is None:  # no peepholes: gates i, o, f under one activation, taken over all four
            # gates (the c block's result unused): on the whole array, not a strided view of it,
            # each of its ufuncs runs ~2x faster at these sizes
            iof = f(gates)
            i, o, ff = iof[..., :hs], iof[..., hs : 2 * hs], iof[..., 2 * hs : 3 * hs]
        else:
            i = f(gates[..., :hs] + p[..., :hs] * c)
            ff = f(gates[..., 2 * hs : 3 * hs] + p[..., 2 * hs :] * c)
        if self.input_forget:
            ff = 1 - i
        c2 = ff * c
        c2 += i * self.g(gates[..., 3 * hs :])
        if p is not None:
            o = f(gates[..., hs : 2 * hs] + p[..., hs : 2 * hs] * c2)
        return o * self.hh(c2), c2


# activations without parameters, called directly: each step calls three
_DIRECT: dict[str, Callable[[np.ndarray], np.ndarray]] = {"sigmoid": _sigmoid, "tanh": np.tanh}


def _activation(a: tuple[str, float, float] | None, clip: float) -> Callable[[np.ndarray], np.ndarray] | None:
    """Activation `a` (name, alpha, beta) as a function of the pre-activation, clipped to
    [-clip, clip] first when clip > 0; resolved once per layer, not per step."""
    if a is None:
        return None
    name, alpha, beta = a
    if clip > 0:
        return lambda v: np_activation(name, np.clip(v, -clip, clip), alpha, beta)
    return _DIRECT.get(name) or (lambda v: np_activation(name, v, alpha, beta))


def _input_part(name: str, hs: int, x, w, b):
    """x W^T of every time step, for every direction, in one product [dirs, seq, batch, G*h] (a
    view), the biases to add to it [dirs, G*h] (Wb plus the recurrence biases that are plain sums:
    all of Rb but a GRU's Rh, which its reset gate multiplies), and that rest of Rb [dirs, 1, G*h]:
    only h R^T stays in the loop. The caller adds the biases as it lays x W^T out in time order."""
    half = b.shape[-1] // 2
    (seq, batch, inp), (dirs, gh, _) = x.shape, w.shape
    # One GEMM for all steps and directions (a batched matmul over the time steps would run
    # seq*dirs tiny products), as W x^T: OpenBLAS runs a product of few rows (seq*batch) at
    # about 2/3 the speed of its transpose.
    wx = (w.reshape(dirs * gh, inp) @ x.reshape(seq * batch, inp).T).reshape(dirs, gh, seq, batch)
    bias = b[:, :half].copy()  # summed first: one pass over x W^T
    if name == "gru":
        bias[:, : 2 * hs] += b[:, half : half + 2 * hs]
    else:
        bias += b[:, half:]
    return np.transpose(wx, (0, 2, 3, 1)), bias, b[:, None, half:]


def _compute(op, args, out, run):
    lstm = op.name == "lstm"
    x, w, r, b, lens, h0 = (np.asarray(a) for a in args[:6])
    acc = np.float64 if x.dtype == np.float64 else np.float32
    c0 = np.asarray(args[6]).astype(acc, copy=False) if lstm else np.zeros(h0.shape, acc)
    p = np.asarray(args[7]).astype(acc, copy=False)[:, None, :] if lstm else None  # [dirs, 1, 3h]
    seq, batch, _ = x.shape
    dirs = directions(op)
    n_act = len(DEFAULT_ACTIVATIONS[op.name])
    every = activations(op)
    acts = [every[d * n_act : (d + 1) * n_act] for d in range(len(dirs))]
    xw, bias, rb = _input_part(
        op.name, op["hidden_size"], x.astype(acc, copy=False), w.astype(acc, copy=False), b.astype(acc, copy=False)
    )
    # [dirs, h, G*h], a view: row-major where the evaluator's plan relaid a constant R
    # (compiler/ref_fold.py RelaidR; a row-major R^T makes h R^T ~1.3x faster per step, and a
    # copy made here would be a fresh 300 KB a forward that page-faults)
    rt = np.swapaxes(r.astype(acc, copy=False), 1, 2)
    h0 = h0.astype(acc, copy=False)
    lens = np.minimum(lens.astype(np.int64).reshape(-1), seq)
    # Every sequence full length and one set of activations: the directions step together, each
    # reading its inputs in its own time order. Otherwise one direction at a time.
    together = bool((lens == seq).all()) and all(a == acts[0] for a in acts)
    # [seq, dirs, batch, h]: zeros where a shorter sequence ends; stepping together writes it all
    ys = (np.empty if together else np.zeros)(out.sub_shapes[0].lens, dtype=acc)
    h_out, c_out = np.empty(h0.shape, acc), np.empty(h0.shape, acc)
    # direction groups as slices: views of R, the biases and the states, not copies
    for ds in [slice(None)] if together else [slice(d, d + 1) for d in range(len(dirs))]:
        first = ds.start or 0
        cell = _Cell(op, rt[ds], rb[ds], p[ds] if lstm and p[ds].any() else None, acts[first])
        if together:  # time-major, so that each step reads and writes one contiguous block
            if cell.plain_lstm:  # [seq, 4, dirs, batch, h]: each gate a block (run_plain)
                order = np.empty((seq, 4, len(dirs), batch, op["hidden_size"]), acc)
                gate_major = xw.reshape(xw.shape[:3] + (4, -1))
                for d, back in enumerate(dirs):
                    gm = np.moveaxis(gate_major[d, ::-1] if back else gate_major[d], -2, 1)
                    np.add(gm, bias[d].reshape(4, 1, -1), out=order[:, :, d])
                run = cell.run_plain
            else:  # [seq, dirs, batch, G*h]
                order = np.empty((seq, len(dirs)) + xw.shape[2:], acc)
                for d, back in enumerate(dirs):
                    np.add(xw[d, ::-1] if back else xw[d], bias[d], out=order[:, d])
                run = cell.run
            h_out[ds], c_out[ds] = run(order, h0, c0, ys)  # ys: each direction in its own time order
            for d, back in enumerate(dirs):
                if back:  # (after h_out is read: the last h is a view of ys)
                    ys[:, d] = ys[::-1, d].copy()
        else:
            xw_d = xw[first] + bias[first]
            h_out[ds], c_out[ds] = _direction(cell, xw_d, h0[ds], c0[ds], lens, dirs[first], ys[:, first])
    res = [ys.astype(x.dtype, copy=False), h_out.astype(x.dtype, copy=False)] + (
        [c_out.astype(x.dtype, copy=False)] if lstm else []
    )
    return tuple(res)


def _direction(cell: _Cell, xw, h, c, lens, backwards: bool, ys):
    """One direction with per-entry sequence lengths: steps at or past an entry's length leave its
    state unchanged and write zeros to Y; reverse runs each entry from its own last valid step
    down to 0. Writes Y into `ys` [seq, batch, h]; returns the last (h, c) ([1, batch, h])."""
    seq, batch = xw.shape[:2]
    rows = np.arange(batch)
    for step in range(seq):
        t = np.clip(lens - 1 - step if backwards else np.full(batch, step), 0, seq - 1)
        valid = (step < lens)[:, None]
        h2, c2 = cell.step(xw[t, rows][None], h, c)
        h, c = np.where(valid, h2, h), np.where(valid, c2, c)
        ys[t[valid[:, 0]], rows[valid[:, 0]]] = h[0][valid[:, 0]]
    return h, c


_COMMON = [
    A("hidden_size", "int", 1, show=True),
    A("direction", "str", "forward", choices=("forward", "reverse", "bidirectional"), show=True),
    A("actv_funcs", "any", (), doc="activation names per direction (empty: the ONNX defaults)"),
    A("actv_alpha", "floats", ()),
    A("actv_beta", "floats", ()),
    A("clip", "float", 0.0, doc="clip gate pre-activations to [-clip, clip]; 0 means no clip"),
]

_DOC = "unrolled by rewrite_rnn; inputs X, W, R, B, sequence lengths, initial_h"
_UNROLLED = GpuCode.host(
    "rewrite_rnn unrolls it into dot and pointwise ops before lowering; it stays (and runs on "
    "the host) only for uneven sequence lengths in a reverse direction"
)
defop(
    "rnn",
    _shape,
    _compute,
    attrs=_COMMON,
    nargs=6,
    gpu=_UNROLLED,
    doc=f"Simple recurrent layer (ONNX RNN), {_DOC}; returns (Y, Y_h).",
)
defop(
    "gru",
    _shape,
    _compute,
    attrs=_COMMON + [A("linear_before_reset", "int", 0)],
    nargs=6,
    gpu=_UNROLLED,
    doc=f"Gated recurrent unit (ONNX GRU, gates z, r, h), {_DOC}; returns (Y, Y_h).",
)
defop(
    "lstm",
    _shape,
    _compute,
    attrs=_COMMON + [A("input_forget", "int", 0)],
    nargs=8,
    gpu=_UNROLLED,
    doc=f"Long short-term memory (ONNX LSTM, gates i, o, f, c), {_DOC}, initial_c, peepholes P; returns (Y, Y_h, Y_c).",
)


# --- lstm_recurrence ------------------------------------------------------------------------------
# One direction of a plain LSTM (sigmoid / tanh / tanh, no clip, peepholes or coupled gates, every
# sequence full length) as one op, for a kernel that runs every step: rewrite_rnn emits it after
# the whole-sequence input projection, so only h R^T and the cell stay inside the recurrence.
def _recurrence_shape(op, s, m):
    """lstm_recurrence's shapes, and lstm_recurrences' (each operand with a leading direction axis
    but x W^T, whose directions sit side by side in its last axis)."""
    xw, rt, bias, h0, c0 = s
    stacked = op.name == "lstm_recurrences"
    d = "directions, " if stacked else ""
    if xw.ndim != 3 or rt.ndim != 2 + stacked or h0.ndim != 2 + stacked:
        raise ShapeError(
            f"{op.name}: expected xw [seq, batch, {'directions*' if stacked else ''}4h], R^T [{d}h, 4h], "
            f"h0 [{d}batch, h]; got {list(xw.lens)}, {list(rt.lens)}, {list(h0.lens)}"
        )
    seq, batch, width = xw.lens
    dirs = [rt.lens[0]] if stacked else []
    hidden, g = rt.lens[-2:]
    if (
        (stacked and dirs[0] not in (1, 2))
        or g != 4 * hidden
        or width != (dirs[0] if stacked else 1) * g
        or list(bias.lens) != dirs + [g]
        or list(h0.lens) != dirs + [batch, hidden]
        or list(c0.lens) != dirs + [batch, hidden]
    ):
        raise ShapeError(
            f"{op.name}: xw {list(xw.lens)} / R^T {list(rt.lens)} / bias {list(bias.lens)} / h0 {list(h0.lens)} / "
            f"c0 {list(c0.lens)} do not fit {'1 or 2 directions of ' if stacked else ''}hidden {hidden}"
        )
    # the state's type: x W^T may come wider (a float32 input's projection, at fp16)
    state = Shape.of(h0.type, dirs + [batch, hidden])
    y = Shape.of(h0.type, [seq] + dirs + [batch, hidden])
    return Shape.tuple_of([y, state, state] if stacked else [y, state])


def _lstm_direction(xw, rt, bias, h, c, reverse: bool):
    """One direction's steps in float32: (Y [seq, batch, h], last h, last c)."""
    hs = h.shape[1]
    ys = np.zeros((xw.shape[0],) + h.shape, np.float32)
    for t in range(xw.shape[0] - 1, -1, -1) if reverse else range(xw.shape[0]):
        g = xw[t] + h @ rt + bias
        i, o, f = (1 / (1 + np.exp(-g[:, k * hs : (k + 1) * hs])) for k in range(3))
        c = f * c + i * np.tanh(g[:, 3 * hs :])
        h = o * np.tanh(c)
        ys[t] = h
    return ys, h, c


def _recurrence_compute(op, args, out, run):
    xw, rt, bias, h, c = (np.asarray(a).astype(np.float32, copy=False) for a in args)
    ys, _, c = _lstm_direction(xw, rt, bias, h, c, bool(op["reverse"]))
    dt = np.asarray(args[3]).dtype
    return ys.astype(dt, copy=False), c.astype(dt, copy=False)


defop(
    "lstm_recurrence",
    _recurrence_shape,
    _recurrence_compute,
    attrs=[A("reverse", "int", 0, show=True)],
    nargs=5,
    gpu=GpuCode.kernel("lstm_recurrence"),
    made_by="rewrite_rnn",
    doc="Every step of one plain LSTM direction: inputs x W^T per step [seq, batch, 4h] (gates i, o, f, c), "
    "R^T [h, 4h], the summed biases [4h], h0, c0; returns (Y [seq, batch, h], the last c). One kernel "
    "runs the whole recurrence (rewrite_rnn emits it).",
)


# --- lstm_recurrences -----------------------------------------------------------------------------
# Every direction of a plain LSTM layer as one op (a bidirectional layer's two recurrences in one
# kernel launch, one block each, side by side on the GPU instead of one after the other), in
# ONNX's own layouts: Y [seq, directions, batch, h], Y_h and Y_c [directions, batch, h].
def _recurrences_compute(op, args, out, run):
    xw, rt, bias, h0, c0 = (np.asarray(a).astype(np.float32, copy=False) for a in args)
    g = rt.shape[2]
    parts = [
        _lstm_direction(xw[..., d * g : (d + 1) * g], rt[d], bias[d], h0[d], c0[d], d == 1) for d in range(len(rt))
    ]
    dt = np.asarray(args[3]).dtype
    y, h, c = (np.stack([p[k] for p in parts], axis=1 if k == 0 else 0) for k in range(3))
    return y.astype(dt, copy=False), h.astype(dt, copy=False), c.astype(dt, copy=False)


defop(
    "lstm_recurrences",
    _recurrence_shape,
    _recurrences_compute,
    nargs=5,
    gpu=GpuCode.kernel("lstm_recurrences"),
    made_by="rewrite_rnn",
    doc="Every step of every direction (1 or 2; the second runs in reverse) of a plain LSTM layer: x W^T "
    "[seq, batch, directions*4h] (each direction's gates i, o, f, c), R^T [directions, h, 4h], the summed "
    "biases [directions, 4h], h0, c0 [directions, batch, h]; returns (Y [seq, directions, batch, h], the last "
    "h, the last c). One kernel launch runs every direction (rewrite_rnn emits it for a bidirectional layer).",
)
