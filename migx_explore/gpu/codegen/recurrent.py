"""lstm_recurrence: every step of one LSTM direction in one kernel (issue 28: the unrolled biLSTM
launched a GEMM and a cell kernel per step, 1,025 µs against cuDNN's 213 µs).

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

REGISTER_FLOATS = 128  # R^T values a thread keeps in registers; more are read from memory each step
BLOCK_REGISTERS = 65536
OTHER_REGISTERS = 40
MAX_THREADS = 1024
SHARED_FLOATS = 12 * 1024  # h, c and the gates of every batch entry: 48 KiB


def lstm_recurrence_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    xw, rt, bias, h0, c0, y, c_last = shapes
    seq, batch, g = xw.lens
    hidden = h0.lens[1]
    if batch * (2 * hidden + g) > SHARED_FLOATS:
        raise CodegenUnsupported(f"lstm_recurrence: batch {batch} x hidden {hidden} does not fit one block")
    threads = min(MAX_THREADS, -(-g // 64) * 64)
    cols = -(-g // threads)  # gate columns per thread
    # R^T in registers only while the block's registers hold it beside the rest (64K a block,
    # ~40 a thread for everything else); __launch_bounds__ makes the compiler keep to that.
    in_regs = hidden * cols <= min(REGISTER_FLOATS, BLOCK_REGISTERS // threads - OTHER_REGISTERS)

    def at(s: Shape, *idx: str) -> str:
        return offset_expr(list(idx), s.strides)

    r_at = f"(float)migx::load(p1, {at(rt, 'k', 'col')})"
    lines = [
        f"__shared__ float h_s[{batch * hidden}], c_s[{batch * hidden}], g_s[{batch * g}];",
        "const int t = threadIdx.x;",
        f"for (int e = t; e < {batch * hidden}; e += {threads}) {{",
        f"    const int b = e / {hidden}, j = e % {hidden};",
        f"    h_s[e] = (float)migx::load(p3, {at(h0, 'b', 'j')});",
        f"    c_s[e] = (float)migx::load(p4, {at(c0, 'b', 'j')});",
        "}",
        f"float bias_r[{cols}];",
    ]
    if in_regs:
        lines.append(f"float r[{cols}][{hidden}];")
    lines += [
        "#pragma unroll",
        f"for (int q = 0; q < {cols}; ++q) {{",
        f"    const int col = t + q * {threads};",
        f"    bias_r[q] = col < {g} ? (float)migx::load(p2, {at(bias, 'col')}) : 0.0f;",
    ]
    if in_regs:
        lines += ["#pragma unroll", f"    for (int k = 0; k < {hidden}; ++k) r[q][k] = col < {g} ? {r_at} : 0.0f;"]
    lines += [
        "}",
        "__syncthreads();",
        f"for (int step = 0; step < {seq}; ++step) {{",
        f"    const int ts = {f'{seq - 1} - step' if op['reverse'] else 'step'};",
        "#pragma unroll",
        f"    for (int q = 0; q < {cols}; ++q) {{",
        f"        const int col = t + q * {threads};",
        f"        if (col >= {g}) continue;",
        f"        for (int b = 0; b < {batch}; ++b) {{",
        f"            float acc = (float)migx::load(p0, {at(xw, 'ts', 'b', 'col')}) + bias_r[q];",
        f"            const float* hb = h_s + b * {hidden};",
        "#pragma unroll" if in_regs else "#pragma unroll 8",  # register indices must be constants
        f"            for (int k = 0; k < {hidden}; ++k) acc += hb[k] * {'r[q][k]' if in_regs else r_at};",
        f"            g_s[b * {g} + col] = acc;",
        "        }",
        "    }",
        "    __syncthreads();",
        f"    for (int e = t; e < {batch * hidden}; e += {threads}) {{",
        f"        const int b = e / {hidden}, j = e % {hidden};",
        f"        const float* gb = g_s + b * {g};",
        "        const float i = 1.0f / (1.0f + expf(-gb[j]));",
        f"        const float o = 1.0f / (1.0f + expf(-gb[{hidden} + j]));",
        f"        const float f = 1.0f / (1.0f + expf(-gb[{2 * hidden} + j]));",
        f"        const float c = f * c_s[e] + i * tanhf(gb[{3 * hidden} + j]);",
        "        const float h = o * tanhf(c);",
        "        c_s[e] = c;",
        "        h_s[e] = h;",
        f"        migx::store(p5, {at(y, 'ts', 'b', 'j')}, h);",
        "    }",
        "    __syncthreads();",
        "}",
        f"for (int e = t; e < {batch * hidden}; e += {threads}) {{",
        f"    const int b = e / {hidden}, j = e % {hidden};",
        f"    migx::store(p6, {at(c_last, 'b', 'j')}, c_s[e]);",
        "}",
    ]
    body = "\n    ".join(lines)
    name = f"lstm_recurrence_{'reverse' if op['reverse'] else 'forward'}_kernel"
    src = f"""
MIGX_GLOBAL __launch_bounds__({threads}) void {name}({kernel_params(shapes, [False] * 5 + [True, True])}) {{
    migx::kernel_entry();
    {body}
}}"""
    return KernelSource(name, source(src), threads, threads)


GENERATORS: dict[str, RequestGenerator] = {
    "lstm_recurrence": lambda r: lstm_recurrence_kernel(r.inner, r.shapes),  # rewrite_rnn's fused LSTM direction
}
