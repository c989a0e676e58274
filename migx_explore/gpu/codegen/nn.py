"""Neural-network kernels: direct convolution (depthwise and small convs, epilogue fused in),
im2col (the gather half of im2col + BLAS GEMM), pooling, resize.

All are one thread per output element with compile-time shapes. Convolution taps are constant
loop bounds, so the compiler unrolls them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.nn import conv_params, pool_params
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelSource,
    RequestGenerator,
    compute_type,
    decompose,
    grid_stride_kernel,
    index_type,
    is_float,
    literal,
    offset_expr,
    output_grid_kernel,
)
from .expr import BodyEmitter


def _acc_type(t: str) -> str:
    if t in ("int8", "uint8"):  # quant_convolution: int32 accumulation, as its output
        return "int"
    if not is_float(t):
        raise CodegenUnsupported(f"convolution/pooling of {t} on the GPU")
    return "double" if t == "float64" else "float"


def convolution_kernel(op: Op, shapes: Sequence[Shape], epilogue: Module | None) -> KernelSource:
    """The implicit-GEMM kernel where lowering laid the convolution out for it (channels-last
    half input, [co][r][s][c] weight, enough output channels), else the direct kernel."""
    from .conv_igemm import MIN_CHANNELS, conv_igemm_kernel, fits_implicit_gemm

    if fits_implicit_gemm(op, shapes[0], shapes[1], shapes[-1]) and shapes[1].lens[0] >= MIN_CHANNELS:
        return conv_igemm_kernel(op, shapes, epilogue)
    return conv_kernel(op, shapes, epilogue)


def conv_kernel(op: Op, shapes: Sequence[Shape], epilogue: Module | None) -> KernelSource:
    """Direct convolution; params (x, w, epilogue extras..., out)."""
    x, w, out = shapes[0], shapes[1], shapes[-1]
    extras = shapes[2:-1]
    nd = x.ndim - 2
    pb, _, st, dl = conv_params(op, nd)
    g = op["group"]
    cg, kg = w.lens[1], w.lens[0] // g
    # quant_convolution: int8 accumulates in int32 (exact), fp8 in float (MIGraphX's output types)
    acc = "int" if x.type in ("int8", "uint8") else _acc_type(x.type)
    ksz = w.lens[2:]

    def lines_fn(o, it):
        lines = [f"{acc} acc = 0;", f"const {it} ci0 = ({o[1]} / {kg}) * {cg};", f"for ({it} c = 0; c < {cg}; ++c) {{"]
        depth = 1
        xi = [o[0], "(ci0 + c)"]
        wi = [o[1], "c"]
        for d in range(nd):
            pad = "    " * depth
            lines.append(f"{pad}#pragma unroll")
            lines.append(f"{pad}for (int k{d} = 0; k{d} < {ksz[d]}; ++k{d}) {{")
            lines.append(f"{pad}    const {it} s{d} = {o[2 + d]} * {st[d]} - {pb[d]} + k{d} * {dl[d]};")
            lines.append(f"{pad}    if (s{d} < 0 || s{d} >= {x.lens[2 + d]}) continue;")
            xi.append(f"s{d}")
            wi.append(f"k{d}")
            depth += 1
        pad = "    " * depth
        lines.append(
            f"{pad}acc += ({acc})migx::load(p0, {offset_expr(xi, x.strides)}) * "
            f"({acc})migx::load(p1, {offset_expr(wi, w.strides)});"
        )
        for d in range(depth - 1, -1, -1):
            lines.append("    " * d + "}")
        result = "acc"
        if epilogue is not None:
            loaded = []
            for k, s in enumerate(extras):
                var = f"e{k}"
                lines.append(f"const {compute_type(s.type)} {var} = migx::load(p{2 + k}, {offset_expr(o, s.strides)});")
                loaded.append(var)
            em = BodyEmitter("ep")
            conv_t = {"int8": "int32", "uint8": "int32", "float8e4m3fn": "float32"}.get(x.type, x.type)
            outs = em.run(epilogue, [f"({compute_type(conv_t)})acc"] + loaded, [conv_t] + [s.type for s in extras])
            lines += em.lines
            result = outs[0][0]
        lines.append(f"migx::store(p{len(shapes) - 1}, {offset_expr(o, out.strides)}, {result});")
        return lines

    kdesc = "x".join(map(str, ksz))
    name = f"conv_{'depthwise' if cg == 1 and g > 1 else 'direct'}_{kdesc}"
    return output_grid_kernel(name, shapes, lines_fn)


def im2col_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """Params (x, out): out[n, c*prod(k) + taps, spatial] = x at the window position, or 0."""
    x = shapes[0]
    nd = x.ndim - 2
    pb, pe, st, dl = conv_params(op, nd)
    ksz = list(op["kernel"])
    osz = [(x.lens[2 + d] + pb[d] + pe[d] - (dl[d] * (ksz[d] - 1) + 1)) // st[d] + 1 for d in range(nd)]
    out = shapes[-1]

    def lines_fn(o, it):
        lines = decompose(o[1], [x.lens[1]] + ksz, it, "k")  # k0 = channel, k1.. = taps
        lines += decompose(o[2], osz, it, "q")
        inside, src = [], [o[0], "k0"]
        for d in range(nd):
            lines.append(f"const {it} s{d} = q{d} * {st[d]} - {pb[d]} + k{d + 1} * {dl[d]};")
            inside.append(f"s{d} >= 0 && s{d} < {x.lens[2 + d]}")
            src.append(f"s{d}")
        zero = literal(0, x.type)
        lines.append(
            f"const {compute_type(x.type)} v = ({' && '.join(inside)}) ? "
            f"migx::load(p0, {offset_expr(src, x.strides)}) : {zero};"
        )
        lines.append(f"migx::store(p1, {offset_expr(o, out.strides)}, v);")
        return lines

    vec = _im2col_vector(x, out, osz)
    if vec > 1:
        return _im2col_runs(x, out, ksz, osz, (pb, st, dl), vec)
    return output_grid_kernel("im2col_" + "x".join(map(str, ksz)), shapes, lines_fn)


# One thread per column element made the GEMM's im2col half latency-bound where it is small
# (ResNet-18's 19 im2cols 78 us of a 200 us fp16 graph on an H200, ~230 GB/s): a thread writing
# a run of output positions along the last spatial axis computes its window indices once and
# stores 16 bytes at a time.
_VECTOR_BYTES = 16
_ITEM = {"float16": 2, "bfloat16": 2, "float32": 4}


def _im2col_vector(x: Shape, out: Shape, osz: Sequence[int]) -> int:
    """Elements per thread for im2col's run form (1: the per-element kernel): the widest
    power of two up to 16 bytes that divides the output's last spatial extent."""
    item = _ITEM.get(x.type)
    if item is None or not out.standard() or not osz:
        return 1
    v = _VECTOR_BYTES // item
    while v > 1 and osz[-1] % v:
        v //= 2
    return v


def _im2col_runs(x: Shape, out: Shape, ksz: list[int], osz: list[int], params: tuple, vec: int) -> KernelSource:
    """im2col with `vec` consecutive output positions of one window row per thread; the store is
    one vector where the output is aligned to it (else element by element)."""
    pb, st, dl = params
    nd = x.ndim - 2
    it = index_type([x, out])
    last = nd - 1
    lines = [f"const {it} e = i * {vec};"]
    lines += decompose("e", out.lens, it, "o")
    lines += decompose("o1", [x.lens[1]] + ksz, it, "k")  # k0 = channel, k1.. = taps
    lines += decompose("o2", osz, it, "q")
    inside, src = [], ["o0", "k0"]
    for d in range(last):
        lines.append(f"const {it} s{d} = q{d} * {st[d]} - {pb[d]} + k{d + 1} * {dl[d]};")
        inside.append(f"s{d} >= 0 && s{d} < {x.lens[2 + d]}")
        src.append(f"s{d}")
    src.append(f"s{last}")
    row_ok = " && ".join(inside) or "true"
    lines += [
        f"const bool row_ok = {row_ok};",
        f"float v[{vec}];",
        "#pragma unroll",
        f"for (int j = 0; j < {vec}; ++j) {{",
        f"    const {it} s{last} = (q{last} + j) * {st[last]} - {pb[last]} + k{nd} * {dl[last]};",
        f"    v[j] = (row_ok && s{last} >= 0 && s{last} < {x.lens[2 + last]}) ? "
        f"(float)migx::load(p0, {offset_expr(src, x.strides)}) : 0.0f;",
        "}",
        f"if ((((unsigned long long)(p1 + e)) & {_VECTOR_BYTES - 1}ull) == 0) {{",
        f"    migx::store_vec<{vec}>(p1 + e, v);",
        "} else {",
        "    #pragma unroll",
        f"    for (int j = 0; j < {vec}; ++j) migx::store(p1, e + j, v[j]);",
        "}",
    ]
    name = "im2col_" + "x".join(map(str, ksz)) + f"_v{vec}"
    return grid_stride_kernel(name, [x, out], [False, True], it, out.elements() // vec, lines)


def pooling_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    x, out = shapes[0], shapes[-1]
    nd = x.ndim - 2
    k = list(op["lengths"])
    pb, pe, st, dl = pool_params(op, nd)
    mode = op["mode"]
    acc = _acc_type(x.type)
    inf = literal(float("inf"), "float32" if acc == "float" else "float64")

    def lines_fn(o, it):
        init = f"(-{inf})" if mode == "max" else "0"
        lines = [f"{acc} acc = {init};", "int cnt = 0;"]
        src = [o[0], o[1]]
        for d in range(nd):
            pad = "    " * d
            lines.append(f"{pad}#pragma unroll")
            lines.append(f"{pad}for (int k{d} = 0; k{d} < {k[d]}; ++k{d}) {{")
            lines.append(f"{pad}    const {it} s{d} = {o[2 + d]} * {st[d]} - {pb[d]} + k{d} * {dl[d]};")
            if mode == "average" and op["count_include_pad"]:
                # taps in the padded extent count even where they read padding (ONNX/PyTorch rule)
                lines.append(f"{pad}    if (s{d} < -{pb[d]} || s{d} >= {x.lens[2 + d] + pe[d]}) continue;")
            src.append(f"s{d}")
        pad = "    " * nd
        inside = " && ".join(f"s{d} >= 0 && s{d} < {x.lens[2 + d]}" for d in range(nd))
        load = f"({acc})migx::load(p0, {offset_expr(src, x.strides)})"
        if mode == "max":
            lines.append(f"{pad}if ({inside}) acc = migx::max_(acc, {load});")
        elif mode == "average":
            if op["count_include_pad"]:
                lines.append(f"{pad}++cnt; if ({inside}) acc += {load};")
            else:
                lines.append(f"{pad}if ({inside}) {{ acc += {load}; ++cnt; }}")
        else:
            p = float(op["lp_order"])
            fp = "powf" if acc == "float" else "pow"
            ab = "fabsf" if acc == "float" else "fabs"
            lines.append(f"{pad}if ({inside}) acc += {fp}({ab}({load}), ({acc}){p!r});")
        for d in range(nd - 1, -1, -1):
            lines.append("    " * d + "}")
        if mode == "average":
            lines.append(f"acc = acc / ({acc})(cnt > 0 ? cnt : 1);")
        elif mode == "lpnorm":
            fp = "powf" if acc == "float" else "pow"
            lines.append(f"acc = {fp}(acc, ({acc})(1.0 / {float(op['lp_order'])!r}));")
        lines.append(f"migx::store(p1, {offset_expr(o, out.strides)}, acc);")
        return lines

    return output_grid_kernel(f"pool_{mode}_" + "x".join(map(str, k)), shapes, lines_fn)


def _resize_tables(op: Op, n_in: int, n_out: int, scale: float, roi) -> tuple[np.ndarray, np.ndarray]:
    """(idx, weight) tables of shape (n_out, taps), exactly as the reference resamples one axis."""
    from migx_explore.compiler.ops.resize import axis_taps

    _, idx, c = axis_taps(op, scale, n_in, n_out, roi)
    idx = np.clip(idx, 0, n_in - 1)
    if op["mode"] == "nearest":  # 0/1 weights: keep the selected tap only
        sel = np.argmax(c, axis=1)
        return idx[np.arange(n_out), sel][:, None], np.ones((n_out, 1))
    return idx, c


def resize_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    x, out = shapes[0], shapes[-1]
    if op["coordinate_transformation_mode"] == "tf_crop_and_resize":
        raise CodegenUnsupported("resize tf_crop_and_resize (extrapolation) on the GPU")
    nd = x.ndim
    scales = list(op["scales"]) or [o / i if i else 1.0 for o, i in zip(out.lens, x.lens)]
    roi = list(op["roi"]) or [0.0] * nd + [1.0] * nd
    tables, prelude = {}, []
    for d in range(nd):
        r = (roi[d], roi[d + nd])
        if math.isclose(scales[d], 1.0) and out.lens[d] == x.lens[d] and r == (0.0, 1.0):
            continue
        idx, wt = _resize_tables(op, x.lens[d], out.lens[d], float(scales[d]), r)
        tables[d] = idx.shape[1]
        prelude.append(f"static __device__ const int ridx{d}[] = {{{', '.join(map(str, idx.reshape(-1)))}}};")
        if idx.shape[1] > 1:
            prelude.append(
                f"static __device__ const float rw{d}[] = {{"
                f"{', '.join(repr(float(v)) + 'f' for v in wt.reshape(-1))}}};"
            )
    acc = "double" if x.type == "float64" else "float"

    def lines_fn(o, it):
        lines = [f"{acc} acc = 0;"]
        src = []
        depth = 0
        for d in range(nd):
            if d not in tables:
                src.append(o[d])
                continue
            t = tables[d]
            pad = "    " * depth
            lines.append(f"{pad}for (int t{d} = 0; t{d} < {t}; ++t{d}) {{")
            lines.append(f"{pad}    const {it} s{d} = ridx{d}[{o[d]} * {t} + t{d}];")
            w = f"rw{d}[{o[d]} * {t} + t{d}]" if t > 1 else "1.0f"
            prev = _prev(tables, d)
            scale = f" * w{prev}" if prev is not None else ""
            lines.append(f"{pad}    const {acc} w{d} = {w}{scale};")
            src.append(f"s{d}")
            depth += 1
        last = max(tables) if tables else None
        weight = f"w{last}" if last is not None else "1"
        lines.append("    " * depth + f"acc += {weight} * ({acc})migx::load(p0, {offset_expr(src, x.strides)});")
        for d in range(depth - 1, -1, -1):
            lines.append("    " * d + "}")
        val = "acc"
        if not is_float(x.type):
            val = f"({compute_type(x.type)})rint(acc)"
        lines.append(f"migx::store(p1, {offset_expr(o, out.strides)}, {val});")
        return lines

    return output_grid_kernel(f"resize_{op['mode']}", shapes, lines_fn, "\n".join(prelude))


def _prev(tables: dict, d: int) -> int | None:
    earlier = [k for k in tables if k < d]
    return max(earlier) if earlier else None


GENERATORS: dict[str, RequestGenerator] = {
    "convolution": lambda r: convolution_kernel(r.inner, r.shapes, r.epilogue),
    "im2col": lambda r: im2col_kernel(r.inner, r.shapes),
    "pooling": lambda r: pooling_kernel(r.inner, r.shapes),
    "resize": lambda r: resize_kernel(r.inner, r.shapes),
}
