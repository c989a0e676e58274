"""lstm_recurrence: every step of one LSTM direction in one kernel (issue 28: the unrolled biLSTM
launched a GEMM and a cell kernel per step, 1,025 µs against cuDNN's 213 µs); lstm_recurrences:
every direction of a layer in one launch, a block per direction (the two directions ran one
after the other on the stream, then a concat: 30.6 + 60.6 + 30.9 µs of a layer on an H200).

One block runs the whole sequence. Each thread owns gate columns of R^T, held in registers when
they fit (hidden x columns <= REGISTER_FLOATS), and per step computes its columns of
x_t W^T + b + h R^T for every batch entry from h in shared memory; after a barrier the first
batch x hidden threads apply the cell (gates i, o, f, c: sigmoid, sigmoid, sigmoid, tanh), update
c and h in shared memory and write Y[t]; a second barrier closes the step. Arithmetic is float
whatever the storage type.
"""

from __future__ import annotations

from collections.abc import Sequence

from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape

from .common import CodegenUnsupported, KernelSource, RequestGenerator, kernel_params, offset_expr, source
from .templates import render

REGISTER_FLOATS = 128  # R^T values a thread keeps in registers; more are read from memory each step
BLOCK_REGISTERS = 65536
OTHER_REGISTERS = 40
MAX_THREADS = 1024
SHARED_FLOATS = 12 * 1024  # h, c and the gates of every batch entry: 48 KiB


def lstm_recurrence_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """One direction (lstm_recurrence) or every direction, a block each (lstm_recurrences)."""
    dirs = op.name == "lstm_recurrences"
    if dirs:
        xw, rt, bias, h0, c0, y, h_last, c_last = shapes
        ndir = rt.lens[0]
    else:
        xw, rt, bias, h0, c0, y, c_last = shapes
        ndir = 1
    seq, batch = xw.lens[:2]
    g = xw.lens[2] // ndir
    hidden = h0.lens[-1]
    if batch * (2 * hidden + g) > SHARED_FLOATS:
        raise CodegenUnsupported(f"lstm_recurrence: batch {batch} x hidden {hidden} does not fit one block")
    threads = min(MAX_THREADS, -(-g // 64) * 64)
    cols = -(-g // threads)  # gate columns per thread
    # R^T in registers only while the block's registers hold it beside the rest (64K a block,
    # ~40 a thread for everything else); __launch_bounds__ makes the compiler keep to that.
    in_regs = hidden * cols <= min(REGISTER_FLOATS, BLOCK_REGISTERS // threads - OTHER_REGISTERS)

    def at(s: Shape, *idx: str) -> str:
        return offset_expr(list(idx), s.strides)

    d = "(int)blockIdx.x"

    def per_dir(s: Shape, *idx: str) -> str:  # a direction-stacked operand: the direction first
        return at(s, d, *idx) if dirs else at(s, *idx)

    r_at = f"(float)migx::load(p1, {per_dir(rt, 'k', 'col')})"
    if dirs:
        name = f"lstm_recurrences_{ndir}dir_kernel"
        ts = f"({d} == 1 ? {seq - 1} - step : step)"  # the second direction runs in reverse
        xw_at = at(xw, "ts", "b", f"{d} * {g} + col")
        y_at = at(y, "ts", d, "b", "j")
        h_last = [f"migx::store(p{len(shapes) - 2}, {at(h_last, d, 'b', 'j')}, h_s[e]);"]
    else:
        name = f"lstm_recurrence_{'reverse' if op['reverse'] else 'forward'}_kernel"
        ts = f"{seq - 1} - step" if op["reverse"] else "step"
        xw_at, y_at, h_last = at(xw, "ts", "b", "col"), at(y, "ts", "b", "j"), []
    nout = len(shapes) - 5  # Y (p5), then the last h for every direction's op, then the last c
    src = render(
        "recurrent.hpp",
        "kernel",
        threads=threads,
        name=name,
        params=kernel_params(shapes, [False] * 5 + [True] * nout),
        state=batch * hidden,
        gates=batch * g,
        hidden=hidden,
        h0_at=per_dir(h0, "b", "j"),
        c0_at=per_dir(c0, "b", "j"),
        cols=cols,
        r_decl=[f"float r[{cols}][{hidden}];"] if in_regs else [],
        g=g,
        bias_at=per_dir(bias, "col"),
        r_load=["#pragma unroll", f"    for (int k = 0; k < {hidden}; ++k) r[q][k] = col < {g} ? {r_at} : 0.0f;"]
        if in_regs
        else [],
        seq=seq,
        ts=ts,
        batch=batch,
        xw_at=xw_at,
        unroll="#pragma unroll" if in_regs else "#pragma unroll 8",  # register indices must be constants
        r_value="r[q][k]" if in_regs else r_at,
        o_gate=hidden,
        f_gate=2 * hidden,
        c_gate=3 * hidden,
        y_at=y_at,
        c_last_at=per_dir(c_last, "b", "j"),
        h_last=h_last,
        c_last_param=len(shapes) - 1,
    )
    return KernelSource(name, source(src), threads * ndir, threads)


GENERATORS: dict[str, RequestGenerator] = {
    "lstm_recurrence": lambda r: lstm_recurrence_kernel(r.inner, r.shapes),  # rewrite_rnn's fused LSTM direction
    "lstm_recurrences": lambda r: lstm_recurrence_kernel(r.inner, r.shapes),  # every direction, a block each
}
