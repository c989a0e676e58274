"""Reduction kernels: a fused_reduce submodule, single reduce ops, softmax/logsoftmax (as a
synthesized max/exp/sum submodule), argmax/argmin.

One block per output row (a position in the non-reduced axes). Every value of the body is
either *full* (varies over the reduced axes) or *row* (one per block). Each reduce op becomes a
loop over the reduced axes that recomputes the full values feeding it from memory (cheaper than
keeping them: the re-reads hit cache) followed by a block reduction whose result every thread
holds; full outputs (layernorm, softmax) are written by a final loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.ir import Instruction, Module, Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.common import norm_axes, norm_axis
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelRequest,
    KernelSource,
    RequestGenerator,
    collapse,
    compute_type,
    decompose,
    index_type,
    kernel_params,
    literal,
    offset_expr,
    source,
)
from .expr import BodyEmitter, op_expr, scalar_literal

REDUCE_OPS = {
    "reduce_sum": "op_sum",
    "reduce_mean": "op_sum",
    "reduce_max": "op_max",
    "reduce_min": "op_min",
    "reduce_prod": "op_prod",
    "reduce_any": "op_or",
    "reduce_all": "op_and",
}
_PASS_THROUGH = ("multibroadcast", "broadcast", "contiguous", "identity", "reshape")
ARG_OPS = ("argmin", "argmax")  # index-carrying reductions (fuse_reduce wraps them too, as MIGraphX)


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


class _Gen:
    def __init__(self, module: Module, axes: tuple[int, ...], shapes: Sequence[Shape], nout: int):
        self.m = module
        self.axes = axes
        self.shapes = list(shapes)
        self.nin = len(shapes) - nout
        params = module.params()
        if len(params) != self.nin:
            raise CodegenUnsupported(f"{module.name}: {len(params)} params for {self.nin} inputs")
        self.full_lens = params[0].shape.lens
        self.row_lens = tuple(1 if d in axes else n for d, n in enumerate(self.full_lens))
        self.param_index = {p.id: k for k, p in enumerate(params)}
        self.kind: dict[int, str] = {}
        self.lines: list[str] = []
        self.row_env: dict[int, str] = {}
        self.it = index_type(shapes)
        self.nred = 0
        self.shared: list[str] = []

    # classification ---------------------------------------------------------------------------
    def classify(self) -> None:
        for ins in self.m:
            if ins.is_return():
                continue
            if ins.is_param():
                lens = ins.shape.lens
                self.kind[ins.id] = "full" if lens == self.full_lens else ("row" if lens == self.row_lens else "?")
            elif ins.is_literal():
                self.kind[ins.id] = "const"
            elif ins.name in ARG_OPS:
                if (norm_axis(ins.op["axis"], ins.inputs[0].shape.ndim, ins.name),) != self.axes:
                    raise CodegenUnsupported(f"{ins.name} over an axis other than the fused reduction's {self.axes}")
                self.kind[ins.id] = "row"
            elif ins.name in REDUCE_OPS:
                if tuple(norm_axes(ins.op["axes"], ins.inputs[0].shape.ndim, ins.name)) != self.axes:
                    raise CodegenUnsupported(f"{ins.name} over axes other than the fused reduction's {self.axes}")
                self.kind[ins.id] = "row"
            else:
                kinds = {self.kind[i.id] for i in ins.inputs}
                if "?" in kinds:
                    self.kind[ins.id] = "?"
                elif ins.name in ("multibroadcast", "broadcast"):
                    if ins.shape.lens == self.full_lens:
                        self.kind[ins.id] = "full"
                    else:  # a broadcast that stays row-shaped (a constant broadcast to a row)
                        self.kind[ins.id] = kinds.pop() if ins.shape.lens == self.row_lens and len(kinds) == 1 else "?"
                elif "full" in kinds:
                    self.kind[ins.id] = "full" if ins.shape.lens == self.full_lens else "?"
                else:
                    self.kind[ins.id] = "row" if "row" in kinds else "const"
            if self.kind[ins.id] == "?":
                raise CodegenUnsupported(f"{ins.name} with lens {list(ins.shape.lens)} inside a fused reduction")

    # offsets ----------------------------------------------------------------------------------
    def setup_indexing(self) -> None:
        outer = [d for d in range(len(self.full_lens)) if d not in self.axes]
        inner = list(self.axes)
        self.nrows = 1
        for d in outer:
            self.nrows *= self.full_lens[d]
        self.rsize = 1
        for d in inner:
            self.rsize *= self.full_lens[d]
        ol, os_ = collapse([self.full_lens[d] for d in outer], [[s.strides[d] for d in outer] for s in self.shapes])
        # Only full-shaped tensors are walked over the reduced axes; a row-shaped one (a reduced
        # output, a row input) has no inner offset, and its strides must not block axis merging.
        full = [k for k, s in enumerate(self.shapes) if s.lens == self.full_lens]
        il, fs = collapse(
            [self.full_lens[d] for d in inner], [[self.shapes[k].strides[d] for d in inner] for k in full]
        )
        by_k = dict(zip(full, fs))
        is_ = [by_k.get(k, [0] * len(il)) for k in range(len(self.shapes))]
        self.lines += decompose("row", ol, self.it, "o")
        oc = [f"o{d}" for d in range(len(ol))]
        for k in range(len(self.shapes)):
            self.lines.append(f"const {self.it} base{k} = {offset_expr(oc, os_[k])};")
        self.inner_lens, self.inner_strides = il, is_

    def inner_offsets(self, lines: list[str]) -> None:
        lines += decompose("j", self.inner_lens, self.it, "r")
        rc = [f"r{d}" for d in range(len(self.inner_lens))]
        for k in range(len(self.shapes)):
            lines.append(f"const {self.it} off{k} = base{k} + {offset_expr(rc, self.inner_strides[k])};")

    # expressions ------------------------------------------------------------------------------
    def full_expr(self, ins: Instruction, lines: list[str], memo: dict[int, str]) -> str:
        if ins.id in self.row_env:
            return self.row_env[ins.id]
        if ins.id in memo:
            return memo[ins.id]
        if ins.is_literal():
            e = scalar_literal(ins)
        elif ins.is_param():
            k = self.param_index[ins.id]
            e = f"v_in{k}"
            lines.append(f"const {compute_type(ins.shape.type)} {e} = migx::load(p{k}, off{k});")
        else:
            args = [self.full_expr(i, lines, memo) for i in ins.inputs]
            e = self.compute(ins, args, lines, f"f{ins.id}")
        memo[ins.id] = e
        return e

    def row_value(self, ins: Instruction) -> None:
        if ins.is_param():
            k = self.param_index[ins.id]
            var = f"row_in{k}"
            self.lines.append(f"const {compute_type(ins.shape.type)} {var} = migx::load(p{k}, base{k});")
        elif ins.name in REDUCE_OPS:
            var = self.reduction(ins)
        elif ins.name in ARG_OPS:
            var = self.arg_reduction(ins)
        else:
            args = [self.row_env[i.id] if i.id in self.row_env else scalar_literal(i) for i in ins.inputs]
            var = self.compute(ins, args, self.lines, f"w{ins.id}")
        self.row_env[ins.id] = var

    def compute(self, ins: Instruction, args: list[str], lines: list[str], var: str) -> str:
        """One elementwise instruction (a nested `pointwise` inlines its body) as local `var`."""
        types = [i.shape.type for i in ins.inputs]
        if ins.name == "pointwise":
            em = BodyEmitter(f"{var}_")
            outs = em.run(ins.module_inputs[0], args, types)
            lines.extend(em.lines)
            if len(outs) != 1:
                raise CodegenUnsupported("multi-output pointwise inside a fused reduction")
            return outs[0][0]
        lines.append(f"const {compute_type(ins.shape.type)} {var} = {op_expr(ins.op, args, types, ins.shape.type)};")
        return var

    def reduction(self, ins: Instruction) -> str:
        r = self.nred
        self.nred += 1
        t = ins.shape.type
        acc_t = compute_type(t)
        acc_t = "int" if acc_t == "bool" else acc_t
        fn = REDUCE_OPS[ins.name]
        init = {"op_sum": 0, "op_prod": 1, "op_or": 0, "op_and": 1}.get(fn)
        if init is not None:
            init_s = f"(({acc_t}){init})"
        elif acc_t in ("float", "double"):
            s = literal(float("inf"), "float32" if acc_t == "float" else "float64")
            init_s = f"(-{s})" if fn == "op_max" else s
        else:
            bits = {"int": 31, "long long": 63, "short": 15, "signed char": 7}.get(acc_t)
            if bits is None:
                raise CodegenUnsupported(f"{ins.name} of {t}")
            init_s = f"(({acc_t}){'-' if fn == 'op_max' else ''}{(1 << bits) - (0 if fn == 'op_max' else 1)}ll)"
        loop: list[str] = []
        self.inner_offsets(loop)
        val = self.full_expr(ins.inputs[0], loop, {})
        loop.append(f"acc{r} = migx::{fn}()(acc{r}, ({acc_t}){val});")
        self.shared.append(f"__shared__ {acc_t} smem{r}[32];")
        self.lines.append(f"{acc_t} acc{r} = {init_s};")
        self.lines.append(f"for ({self.it} j = threadIdx.x; j < {self.rsize}; j += blockDim.x) {{")
        self.lines += ["    " + x for x in loop]
        self.lines.append("}")
        self.lines.append(f"acc{r} = migx::block_reduce(acc{r}, migx::{fn}(), smem{r});")
        var = f"red{r}"
        if ins.name == "reduce_mean":
            self.lines.append(f"const {compute_type(t)} {var} = ({compute_type(t)})(acc{r} / ({acc_t}){self.rsize});")
        else:
            self.lines.append(f"const {compute_type(t)} {var} = ({compute_type(t)})acc{r};")
        return var

    def arg_reduction(self, ins: Instruction) -> str:
        """argmin / argmax over the (single) reduced axis: a (value, index) pair per thread, then a
        block arg-reduction every thread gets (the same steps as arg_kernel)."""
        r = self.nred
        self.nred += 1
        ct = compute_type(ins.inputs[0].shape.type)
        largest = "true" if ins.name == "argmax" else "false"
        last = "true" if ins.op["select_last_index"] else "false"
        if ct in ("float", "double"):
            worst = literal(float("inf"), "float32" if ct == "float" else "float64")
            init = f"(-{worst})" if ins.name == "argmax" else worst
        else:
            init = f"(({ct})0)"
        loop: list[str] = []
        self.inner_offsets(loop)
        val = self.full_expr(ins.inputs[0], loop, {})
        loop.append(f"const {ct} av{r} = ({ct}){val};")
        loop.append(
            f"if (bi{r} < 0 || migx::arg_better(av{r}, (migx::i64)j, best{r}, bi{r}, {largest}, {last})) "
            f"{{ best{r} = av{r}; bi{r} = j; }}"
        )
        self.shared += [f"__shared__ {ct} asv{r}[32];", f"__shared__ migx::i64 asi{r}[32];"]
        self.lines += [
            f"{ct} best{r} = {init};",
            f"migx::i64 bi{r} = -1;",
            f"for ({self.it} j = threadIdx.x; j < {self.rsize}; j += blockDim.x) {{",
        ]
        self.lines += ["    " + x for x in loop] + ["}"]
        self.lines.append(f"migx::block_argreduce(best{r}, bi{r}, {largest}, {last}, asv{r}, asi{r});")
        var = f"red{r}"
        self.lines.append(f"const {compute_type(ins.shape.type)} {var} = ({compute_type(ins.shape.type)})bi{r};")
        return var

    def outputs(self) -> None:
        outs = self.m.output_instructions()
        if len(outs) != len(self.shapes) - self.nin:
            raise CodegenUnsupported("output count differs from the output buffers")
        full_loop: list[str] = []
        memo: dict[int, str] = {}
        for k, o in enumerate(outs):
            p = self.nin + k
            if self.kind[o.id] == "full":
                if not full_loop:
                    self.inner_offsets(full_loop)
                e = self.full_expr(o, full_loop, memo)
                full_loop.append(f"migx::store(p{p}, off{p}, {e});")
            else:
                e = self.row_env.get(o.id) or scalar_literal(o)
                self.lines.append(f"if (threadIdx.x == 0) migx::store(p{p}, base{p}, {e});")
        if full_loop:
            self.lines.append(f"for ({self.it} j = threadIdx.x; j < {self.rsize}; j += blockDim.x) {{")
            self.lines += ["    " + x for x in full_loop]
            self.lines.append("}")

    def build(self, name: str) -> KernelSource:
        self.classify()
        self.setup_indexing()
        for ins in self.m:
            if ins.is_return():
                break
            if self.kind.get(ins.id) == "row" or (self.kind.get(ins.id) == "const" and not ins.is_literal()):
                self.row_value(ins)
        self.outputs()
        block = block_size(self.rsize)
        nout = len(self.shapes) - self.nin
        writes = [False] * self.nin + [True] * nout
        body = "\n    ".join(self.shared + [f"const {self.it} row = blockIdx.x;"] + self.lines)
        src = f"""
MIGX_GLOBAL void {name}_kernel({kernel_params(self.shapes, writes)}) {{
    {body}
}}"""
        return KernelSource(name + "_kernel", source(src), self.nrows * block, block)


def block_size(rsize: int) -> int:
    """Threads per row: a power of two, a multiple of 64 (full waves on AMD, two warps on NVIDIA)."""
    b = 64
    while b < min(rsize, 256):
        b *= 2
    return b


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
) -> KernelSource:
    if inner.name in ("argmax", "argmin"):
        return arg_kernel(inner, shapes)
    if inner.name in ("fused_reduce", "split_fused_reduce"):  # split: one kernel does the whole reduction
        params = module.params()
        body = [i for i in module if not i.is_param() and not i.is_return()]
        if len(body) == 1 and body[0].name in ARG_OPS and body[0].inputs[0] is params[0] and len(params) == 1:
            return arg_kernel(body[0].op, shapes)  # a lone argmin / argmax: its own kernel
        axes = norm_axes(inner["axes"], params[0].shape.ndim, "fused_reduce")
        name = "fused_reduce_" + "_".join(
            dict.fromkeys(i.name for i in module if i.name in REDUCE_OPS or i.name in ARG_OPS)
        )
        return _Gen(module, tuple(sorted(axes)), shapes, nout).build(name)
    nin = len(shapes) - nout if ninputs < 0 else ninputs
    mod, axes = synthesize(inner, shapes[:nin])
    name = inner.name
    if epilogue is not None:
        mod = with_epilogue(mod, epilogue, shapes[nin : len(shapes) - nout])
        name += "_" + "_".join(dict.fromkeys(i.name for i in epilogue if not i.is_builtin()))[:32]
    return _Gen(mod, tuple(sorted(axes)), shapes, nout).build(name)


def arg_kernel(inner: Op, shapes: Sequence[Shape]) -> KernelSource:
    x = shapes[0]
    axis = norm_axis(inner["axis"], x.ndim, inner.name)
    fake = Program().main
    fake.add_parameter("x0", Shape.of(x.type, x.lens))
    fake.add_return(fake.params())
    g = _Gen(fake, (axis,), shapes, 1)
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
    {body}
}}"""
    return KernelSource(inner.name + "_kernel", source(src), g.nrows * block, block)


# Reductions whose kernel takes a pointwise epilogue (fuse_ops' find_layernorm_pointwise).
EPILOGUE_REDUCTIONS = ("layernorm", "add_layernorm")


def _reduce_request(r: KernelRequest) -> KernelSource:
    # With an epilogue, the inputs are the op's own, then the epilogue's extras (its params x1..).
    extras = len(r.epilogue.params()) - 1 if r.epilogue is not None else 0
    return reduce_kernel(r.inner, r.shapes, r.nout, r.module, r.epilogue, len(r.shapes) - r.nout - extras)


GENERATORS: dict[str, RequestGenerator] = {"reduce": _reduce_request}
