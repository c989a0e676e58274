"""Reduction kernels: a fused_reduce submodule, single reduce ops, softmax/logsoftmax (as a
synthesized max/exp/sum submodule), argmax/argmin.

Every reduction becomes a fused_reduce-style submodule and one kernel (reduce_gen.py): rows short
enough to sit in registers get the register kernel (reduce_rows.py: a group of lanes per row,
vector loads, shuffle reductions), others one block per row looping over memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.ir import Module, Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.common import norm_axes, norm_axis
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelRequest,
    KernelSource,
    RequestGenerator,
    compute_type,
    kernel_params,
    literal,
    source,
)
from .gather_load import gather_views
from .reduce_gen import ARG_OPS, REDUCE_OPS, ReduceGen, block_size
from .reduce_rows import row_generator


def synthesize(inner: Op, in_shapes: Sequence[Shape]) -> tuple[Module, tuple[int, ...]]:
    """A fused_reduce-style submodule (and its axes) for a single reduce op or softmax."""
    prog = Program()
    m = prog.main
    x = m.add_parameter("x0", Shape.of(in_shapes[0].type, in_shapes[0].lens))
    lens = x.shape.lens
    if inner.name in REDUCE_OPS:
        axes = norm_axes(inner["axes"], len(lens), inner.name)
        m.add_return([m.add_instruction(inner, [x])])
        return m, axes
    if inner.name in ("softmax", "logsoftmax"):
        axes = (norm_axis(inner["axis"], len(lens), inner.name),)
        xf = (
            m.add_instruction(Op("convert", target_type="float32"), [x])
            if x.shape.type in ("float16", "bfloat16")
            else x
        )
        mx = m.add_instruction(Op("reduce_max", axes=axes), [xf])
        sh = m.add_instruction(Op("sub"), [xf, m.add_instruction(Op("multibroadcast", out_lens=lens), [mx])])
        ex = m.add_instruction(Op("exp"), [sh])
        sm = m.add_instruction(Op("reduce_sum", axes=axes), [ex])
        bs = m.add_instruction(Op("multibroadcast", out_lens=lens), [sm])
        if inner.name == "softmax":
            out = m.add_instruction(Op("div"), [ex, bs])
        else:
            out = m.add_instruction(Op("sub"), [sh, m.add_instruction(Op("log"), [bs])])
        if out.shape.type != x.shape.type:
            out = m.add_instruction(Op("convert", target_type=x.shape.type), [out])
        m.add_return([out])
        return m, axes
    if inner.name in ("layernorm", "add_layernorm"):
        axis = norm_axis(inner["axis"], len(lens), inner.name)
        axes = (axis,)
        xs = x
        if inner.name == "add_layernorm":
            y = m.add_parameter("x1", Shape.of(in_shapes[1].type, in_shapes[1].lens))
            xs = m.add_instruction(Op("add"), [x, y])
        t = xs.shape.type
        acc = m.add_instruction(Op("convert", target_type="float32"), [xs]) if t in ("float16", "bfloat16") else xs
        mean = m.add_instruction(Op("reduce_mean", axes=axes), [acc])
        d = m.add_instruction(Op("sub"), [acc, m.add_instruction(Op("multibroadcast", out_lens=lens), [mean])])
        var = m.add_instruction(Op("reduce_mean", axes=axes), [m.add_instruction(Op("mul"), [d, d])])
        eps = m.add_literal(
            np.asarray(inner["epsilon"], dtype=dtypes.np_dtype(acc.shape.type)).reshape(1), Shape.scalar(acc.shape.type)
        )
        den = m.add_instruction(
            Op("sqrt"),
            [
                m.add_instruction(
                    Op("add"), [var, m.add_instruction(Op("multibroadcast", out_lens=var.shape.lens), [eps])]
                )
            ],
        )
        out = m.add_instruction(Op("div"), [d, m.add_instruction(Op("multibroadcast", out_lens=lens), [den])])
        if out.shape.type != t:
            out = m.add_instruction(Op("convert", target_type=t), [out])
        m.add_return([out])
        return m, axes
    raise CodegenUnsupported(f"no reduction kernel for {inner.name}")


def with_epilogue(module: Module, epilogue: Module, extra_shapes: Sequence[Shape]) -> Module:
    """`module` whose result then runs through a pointwise `epilogue` (x0 = the result, x1.. =
    the extra inputs, appended as params): layernorm's scale and shift in the same kernel."""
    n = len(module.params())
    extras = [module.add_parameter(f"x{n + k}", Shape.of(s.type, s.lens)) for k, s in enumerate(extra_shapes)]
    out = module.output_instructions()[0]
    module.replace_return([module.add_instruction(Op("pointwise"), [out, *extras], [epilogue])])
    return module


def reduce_kernel(
    inner: Op,
    shapes: Sequence[Shape],
    nout: int,
    module: Module | None,
    epilogue: Module | None = None,
    ninputs: int = -1,
    gathers: Sequence[tuple[int, int]] = (),
) -> KernelSource:
    """`gathers`: (input, axis) of inputs read through fused gathers, whose indices are the
    params before the outputs (gather_load.py)."""
    if gathers and inner.name in ("argmax", "argmin"):
        raise CodegenUnsupported("a fused gather in an arg reduction")
    if inner.name in ("argmax", "argmin"):
        return arg_kernel(inner, shapes)
    if inner.name in ("fused_reduce", "split_fused_reduce"):  # split: one kernel does the whole reduction
        params = module.params()
        body = [i for i in module if not i.is_param() and not i.is_return()]
        if len(body) == 1 and body[0].name in ARG_OPS and body[0].inputs[0] is params[0] and len(params) == 1:
            if gathers:
                raise CodegenUnsupported("a fused gather in an arg reduction")
            return arg_kernel(body[0].op, shapes)  # a lone argmin / argmax: its own kernel
        axes = tuple(sorted(norm_axes(inner["axes"], params[0].shape.ndim, "fused_reduce")))
        name = "fused_reduce_" + "_".join(
            dict.fromkeys(i.name for i in module if i.name in REDUCE_OPS or i.name in ARG_OPS)
        )
        views, loads = gather_views(shapes, gathers, nout, axes, params[0].shape.ndim)
        return row_generator(module, axes, views, nout, loads).build(name)
    nin = len(shapes) - nout - len(gathers) if ninputs < 0 else ninputs
    mod, axes = synthesize(inner, gather_views(shapes, gathers, nout)[0][:nin])
    axes = tuple(sorted(axes))
    name = inner.name
    if epilogue is not None:
        mod = with_epilogue(mod, epilogue, shapes[nin : len(shapes) - nout - len(gathers)])
        name += "_" + "_".join(dict.fromkeys(i.name for i in epilogue if not i.is_builtin()))[:32]
    views, loads = gather_views(shapes, gathers, nout, axes, mod.params()[0].shape.ndim)
    return row_generator(mod, axes, views, nout, loads).build(name)


def arg_kernel(inner: Op, shapes: Sequence[Shape]) -> KernelSource:
    x = shapes[0]
    axis = norm_axis(inner["axis"], x.ndim, inner.name)
    fake = Program().main
    fake.add_parameter("x0", Shape.of(x.type, x.lens))
    fake.add_return(fake.params())
    g = ReduceGen(fake, (axis,), shapes, 1)
    g.classify()
    g.setup_indexing()
    ct = compute_type(x.type)
    largest = "true" if inner.name == "argmax" else "false"
    last = "true" if inner["select_last_index"] else "false"
    if ct in ("float", "double"):
        worst = literal(float("inf"), "float32" if ct == "float" else "float64")
        init = f"(-{worst})" if inner.name == "argmax" else worst
    else:
        init = f"(({ct})0)"
    lines = g.lines + [
        f"{ct} best = {init};",
        "migx::i64 bi = -1;",
        f"for ({g.it} j = threadIdx.x; j < {g.rsize}; j += blockDim.x) {{",
    ]
    loop: list[str] = []
    g.inner_offsets(loop)
    loop.append(f"const {ct} v = migx::load(p0, off0);")
    loop.append(
        f"if (bi < 0 || migx::arg_better(v, (migx::i64)j, best, bi, {largest}, {last})) {{ best = v; bi = j; }}"
    )
    lines += ["    " + x for x in loop] + ["}"]
    lines.append(f"__shared__ {ct} sv[32];")
    lines.append("__shared__ migx::i64 si[32];")
    lines.append(f"migx::block_argreduce(best, bi, {largest}, {last}, sv, si);")
    lines.append("if (threadIdx.x == 0) migx::store(p1, base1, bi);")
    block = block_size(g.rsize)
    body = "\n    ".join([f"const {g.it} row = blockIdx.x;"] + lines)
    src = f"""
MIGX_GLOBAL void {inner.name}_kernel({kernel_params(shapes, [False, True])}) {{
    migx::kernel_entry();
    {body}
}}"""
    return KernelSource(inner.name + "_kernel", source(src), g.nrows * block, block)


# Reductions whose kernel takes a pointwise epilogue (fuse_ops' find_layernorm_pointwise).
EPILOGUE_REDUCTIONS = ("layernorm", "add_layernorm")


def _reduce_request(r: KernelRequest) -> KernelSource:
    # With an epilogue, the inputs are the op's own, then the epilogue's extras (its params x1..).
    extras = len(r.epilogue.params()) - 1 if r.epilogue is not None else 0
    nown = len(r.shapes) - r.nout - extras - len(r.gathers)
    return reduce_kernel(r.inner, r.shapes, r.nout, r.module, r.epilogue, nown, r.gathers)


GENERATORS: dict[str, RequestGenerator] = {"reduce": _reduce_request}
