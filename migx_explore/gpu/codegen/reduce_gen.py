"""The reduction kernel generator: a fused_reduce-style submodule (every value either *full*,
varying over the reduced axes, or *row*, one per output row) turned into one kernel.

`ReduceGen` is the general form: one block per row, each reduce op a loop over the reduced axes
that recomputes the full values feeding it from memory (cheaper than keeping them: the re-reads
hit cache) followed by a block reduction whose result every thread holds; full outputs
(layernorm, softmax) are written by a final loop. reduce_rows.py keeps short rows in registers.
"""

from __future__ import annotations

from collections.abc import Sequence

from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.ops.common import norm_axes, norm_axis
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelSource,
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
from .gather_load import GatherLoad, real_shapes

REDUCE_OPS = {
    "reduce_sum": "op_sum",
    "reduce_mean": "op_sum",
    "reduce_max": "op_max",
    "reduce_min": "op_min",
    "reduce_prod": "op_prod",
    "reduce_any": "op_or",
    "reduce_all": "op_and",
}
ARG_OPS = ("argmin", "argmax")  # index-carrying reductions (fuse_reduce wraps them too, as MIGraphX)


class ReduceGen:
    """One block per row; each reduction loops over the row from memory (any row length, layout
    and op). The hooks (`loop_head`, `param_line`, `wrap_loop`, `combine`, `store_full`,
    `store_row`, `finish`) are what reduce_rows.RegisterRowGen replaces to keep rows in registers.
    `gathers`: inputs read through fused gathers (gather_load.gather_views made the views; their
    indices are the params between the inputs and the outputs, one per row)."""

    def __init__(
        self,
        module: Module,
        axes: tuple[int, ...],
        shapes: Sequence[Shape],
        nout: int,
        gathers: dict[int, GatherLoad] | None = None,
    ):
        self.m = module
        self.axes = axes
        self.shapes = list(shapes)
        self.gathers = gathers or {}
        self.out0 = len(shapes) - nout  # the first output param
        self.nin = self.out0 - len(self.gathers)
        params = module.params()
        if len(params) != self.nin:
            raise CodegenUnsupported(f"{module.name}: {len(params)} params for {self.nin} inputs")
        # The reduced tensor's shape, not the first param's: a squeeze-excite gate puts row-shaped
        # params ([N, C, 1, 1]) before the full one ([N, C, H, W]) the reduction walks.
        reduced = next((i.inputs[0] for i in module if i.name in REDUCE_OPS or i.name in ARG_OPS), params[0])
        self.full_lens = reduced.shape.lens
        self.row_lens = tuple(1 if d in axes else n for d, n in enumerate(self.full_lens))
        self.param_index = {p.id: k for k, p in enumerate(params)}
        self.kind: dict[int, str] = {}
        self.lines: list[str] = []
        self.row_env: dict[int, str] = {}
        self.it = index_type(list(shapes) + real_shapes(self.gathers))
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
            if k not in self.gathers:
                self.lines.append(f"const {self.it} base{k} = {offset_expr(oc, os_[k])};")
        for k, g in self.gathers.items():  # the row's index moves the table's base (after base<index>)
            self.lines += g.index_lines(f"base{g.index}", f"g{k}")
            self.lines.append(f"const {self.it} base{k} = {g.offset(offset_expr(oc, os_[k]), f'g{k}', self.it)};")
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
            lines.append(self.param_line(k, compute_type(ins.shape.type), e))
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
        self.loop_head(loop)
        val = self.full_expr(ins.inputs[0], loop, {})
        loop.append(f"acc{r} = migx::{fn}()(acc{r}, ({acc_t}){val});")
        self.lines.append(f"{acc_t} acc{r} = {init_s};")
        self.lines += self.wrap_loop(loop)
        self.lines += self.combine(f"acc{r}", acc_t, fn, f"smem{r}")
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
        if len(outs) != len(self.shapes) - self.out0:
            raise CodegenUnsupported("output count differs from the output buffers")
        full_loop: list[str] = []
        memo: dict[int, str] = {}
        for k, o in enumerate(outs):
            p = self.out0 + k
            if self.kind[o.id] == "full":
                if not full_loop:
                    self.loop_head(full_loop)
                e = self.full_expr(o, full_loop, memo)
                full_loop.append(self.store_full(p, o.shape.type, e))
            else:
                e = self.row_env.get(o.id) or scalar_literal(o)
                self.lines.append(self.store_row(p, e))
        if full_loop:
            self.lines += self.wrap_loop(full_loop)
        self.lines += self.finish()

    # hooks: the one-block-per-row loop kernel ---------------------------------------------------
    def loop_head(self, lines: list[str]) -> None:
        """Lines at the top of a loop over the row (which reads element j): the offsets."""
        self.inner_offsets(lines)

    def param_line(self, k: int, ct: str, var: str) -> str:
        return f"const {ct} {var} = migx::load(p{k}, off{k});"

    def wrap_loop(self, body: list[str]) -> list[str]:
        head = f"for ({self.it} j = threadIdx.x; j < {self.rsize}; j += blockDim.x) {{"
        # A long row: unrolled, each thread has several loads in flight before it adds the first.
        unroll = ["#pragma unroll 4"] if self.rsize >= LONG_ROW else []
        return unroll + [head] + ["    " + x for x in body] + ["}"]

    def combine(self, acc: str, acc_t: str, fn: str, smem: str) -> list[str]:
        """Lines that leave the row's reduction of every thread's `acc` in `acc` of every thread."""
        self.shared.append(f"__shared__ {acc_t} {smem}[32];")
        return [f"{acc} = migx::block_reduce({acc}, migx::{fn}(), {smem});"]

    def store_full(self, p: int, t: str, e: str) -> str:
        return f"migx::store(p{p}, off{p}, {e});"

    def store_row(self, p: int, e: str) -> str:
        return f"if (threadIdx.x == 0) migx::store(p{p}, base{p}, {e});"

    def finish(self) -> list[str]:
        """Lines after the output loop (a kernel that buffers its outputs writes them here)."""
        return []

    def row_index(self) -> list[str]:
        return [f"const {self.it} row = blockIdx.x;"]

    def launch(self) -> tuple[int, int]:
        block = block_size(self.rsize, self.nrows)
        return self.nrows * block, block

    def build(self, name: str) -> KernelSource:
        self.classify()
        self.lines += self.row_index()
        self.setup_indexing()
        self.prepare()
        for ins in self.m:
            if ins.is_return():
                break
            if self.kind.get(ins.id) == "row" or (self.kind.get(ins.id) == "const" and not ins.is_literal()):
                self.row_value(ins)
        self.outputs()
        nout = len(self.shapes) - self.out0
        writes = [False] * self.out0 + [True] * nout
        body = "\n    ".join(self.shared + self.lines)
        src = f"""
MIGX_GLOBAL void {name}_kernel({kernel_params(self.shapes, writes)}) {{
    migx::kernel_entry();
    {body}
}}"""
        global_size, local_size = self.launch()
        return KernelSource(name + "_kernel", source(src), global_size, local_size)

    def prepare(self) -> None:
        """Lines after the row's base offsets, before the row values (the register kernel's loads)."""


# Few long rows (a GroupNorm's 32 groups of 2 x 256 x 256 in a VAE decoder: 32 blocks on a GPU of
# 132 SMs) leave the GPU idle and each block waiting on its loads: 256 threads per row made a
# VAE's group norms 74 us each on an H200. Such rows get the widest block, 4x the loads in flight.
LONG_ROW = 16384
FEW_ROWS = 1024


def block_size(rsize: int, nrows: int | None = None) -> int:
    """Threads per row: a power of two, a multiple of 64 (full waves on AMD, two warps on NVIDIA);
    1024 for few long rows."""
    if nrows is not None and nrows <= FEW_ROWS and rsize >= LONG_ROW:
        return 1024
    b = 64
    while b < min(rsize, 256):
        b *= 2
    return b
