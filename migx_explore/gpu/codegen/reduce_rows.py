"""Row reductions held in registers: the kernel for rows short enough to fit (layernorm, RMSNorm,
softmax over a hidden size or a sequence).

ReduceGen's loop kernel gives each row a block of 64-256 threads and reads the row from memory
once per reduce op and once more for the outputs, with two barriers per block reduction; for a
row of a few hundred elements that is mostly latency. Here a group of `group` lanes owns a row:
each lane loads its `elems` elements once into register arrays (unrolled loops with constant
trip counts, so the arrays stay in registers), every reduce op and output is computed from those
registers, and a reduction is an xor-shuffle within the group (groups of up to 32 lanes share a
warp; rows too long for one warp take a whole block, reduced through shared memory as before).
Several rows share a block, so a block has at least MIN_THREADS threads.

Lane l reads vectors of `vec` consecutive elements: element u of the lane is
j = ((u / vec) * group + l) * vec + u % vec, so one vector access of a group covers
group * vec consecutive elements. A tensor is read or written as vectors (up to 16 bytes an
access) where its reduced axes are one contiguous run and its row starts are multiples of `vec`;
the pointers' alignment is checked at run time, and an unaligned view takes the element-wise
path (same element mapping, same arithmetic). Accumulation stays in the compute type (float for
16-bit data), as in the loop kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from migx_explore.compiler.ir import Module
from migx_explore.compiler.shape import Shape

from .common import collapse, compute_type
from .gather_load import GatherLoad
from .reduce_gen import ARG_OPS, ReduceGen

REGISTER_ROWS = True  # False: every reduction takes ReduceGen's loop kernel (tests compare the two)
_VEC_SIZES = {"float16": 2, "bfloat16": 2, "float32": 4}  # types read as vectors, by element size
MAX_ELEMS = 32  # elements of one tensor a lane keeps in registers
MAX_REGS = 128  # elements a lane keeps over all its buffered tensors (inputs and full outputs)
MAX_GROUP = 1024
# Threads a block of short rows starts from: two warps measured faster than one on an H200 (bert's
# 128 x 256 add + layernorm 1.73 us against 1.89, a 512 x 128 softmax 1.63 against 1.70; four
# warps were within 0.03 us of two).
MIN_THREADS = 64
WARP_GROUP = 32  # most lanes a row gets before lanes take several vectors (a power of two, <= 32)
WIDE_BLOCKS = 512  # past this many such blocks, blocks take more rows (up to 256 threads)


@dataclass(frozen=True)
class RowPlan:
    """How a row maps onto lanes: `group` lanes a row (a power of two; over 32 the group is the
    block), `nvec` vectors of `vec` elements a lane, `rows` rows a block."""

    group: int
    vec: int
    nvec: int
    rows: int

    @property
    def elems(self) -> int:
        return self.vec * self.nvec

    @property
    def threads(self) -> int:
        return self.group * self.rows


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def plan_rows(rsize: int, nrows: int, nbuf: int, vec: int) -> RowPlan | None:
    """The lanes for rows of `rsize` elements, `nbuf` tensors buffered a lane, reading `vec`
    elements at a time; None where a row does not fit in registers (the loop kernel takes it)."""
    if rsize <= 0 or nrows <= 0:
        return None
    nbuf = max(nbuf, 1)
    nvecs = -(-rsize // vec)
    budget = min(MAX_ELEMS, MAX_REGS // nbuf)
    if nvecs <= WARP_GROUP:
        group, nvec = _pow2_at_least(nvecs), 1
    else:
        group, nvec = WARP_GROUP, -(-nvecs // WARP_GROUP)
    if nvec * vec > budget:  # several warps a row: as few vectors a lane as the budget allows
        per_lane = max(1, budget // vec)
        group = max(64, _pow2_at_least(-(-nvecs // per_lane)))
        nvec = -(-nvecs // group)
        if group > MAX_GROUP or nvec * vec > MAX_ELEMS:
            return None
    rows = 1
    if group <= 32:
        rows = max(1, MIN_THREADS // group)
        while -(-nrows // rows) > WIDE_BLOCKS and rows * group < 256:
            rows *= 2
    return RowPlan(group, vec, nvec, rows)


def row_generator(
    module: Module,
    axes: tuple[int, ...],
    shapes: Sequence[Shape],
    nout: int,
    gathers: dict[int, GatherLoad] | None = None,
) -> ReduceGen:
    """The register kernel's generator where the rows fit, else the loop kernel's."""
    if REGISTER_ROWS and not any(i.name in ARG_OPS for i in module):
        gen = RegisterRowGen(module, axes, shapes, nout, gathers)
        if gen.plan is not None:
            return gen
    return ReduceGen(module, axes, shapes, nout, gathers)


class RegisterRowGen(ReduceGen):
    def __init__(
        self,
        module: Module,
        axes: tuple[int, ...],
        shapes: Sequence[Shape],
        nout: int,
        gathers: dict[int, GatherLoad] | None = None,
    ):
        super().__init__(module, axes, shapes, nout, gathers)
        lens = self.full_lens
        outer = [d for d in range(len(lens)) if d not in axes]
        self.nrows = nrows = math.prod(lens[d] for d in outer)  # setup_indexing sets the same, later
        self.rsize = rsize = math.prod(lens[d] for d in axes)
        self.full_ks = [k for k, s in enumerate(self.shapes) if s.lens == lens]
        il, fs = collapse([lens[d] for d in axes], [[self.shapes[k].strides[d] for d in axes] for k in self.full_ks])
        runs = {k: len(il) == 1 and s[0] == 1 for k, s in zip(self.full_ks, fs)}
        sizes = [_VEC_SIZES[self.shapes[k].type] for k in self.full_ks if runs[k] and self.shapes[k].type in _VEC_SIZES]
        vec = 1
        if sizes:
            vec = 16 // min(sizes)
            while rsize % vec:
                vec //= 2
        # vector access: one contiguous run a row, row starts (every outer stride, and a fused
        # gather's table stride) multiples of vec
        self.vec_ks = [
            k
            for k in self.full_ks
            if vec > 1
            and runs[k]
            and self.shapes[k].type in _VEC_SIZES
            and all(self.shapes[k].strides[d] % vec == 0 for d in outer if lens[d] > 1)
            and (k not in self.gathers or self.gathers[k].stride % vec == 0)
        ]
        if not self.vec_ks:
            vec = 1
        self.plan = plan_rows(rsize, nrows, len(self.full_ks), vec)
        self.out_types: dict[int, str] = {}

    # indexing ----------------------------------------------------------------------------------
    def _j(self, u: str) -> str:
        """Element index of a lane's element u (an unrolled constant)."""
        g, v = self.plan.group, self.plan.vec
        lane = "lane" if g > 1 else "0"
        if v == 1:
            return f"({self.it})({u} * {g} + {lane})"
        return f"({self.it})((({u} / {v}) * {g} + {lane}) * {v} + {u} % {v})"

    def _padded(self) -> bool:
        return self.plan.elems * self.plan.group != self.rsize

    def _each(self, body: list[str], need_j: bool = True) -> list[str]:
        """`body` for each of a lane's elements u (those inside the row), j its element index."""
        out = ["#pragma unroll", f"for (int u = 0; u < {self.plan.elems}; ++u) {{"]
        if need_j or self._padded():
            out.append(f"    const {self.it} j = {self._j('u')};")
        if self._padded():
            return out + [f"    if (j < {self.rsize}) {{"] + ["        " + x for x in body] + ["    }", "}"]
        return out + ["    " + x for x in body] + ["}"]

    def _each_vector(self, body: list[str]) -> list[str]:
        """`body` for each of a lane's vectors c (those inside the row), j its first element."""
        g, v = self.plan.group, self.plan.vec
        lane = "lane" if g > 1 else "0"
        out = ["#pragma unroll", f"for (int c = 0; c < {self.plan.nvec}; ++c) {{"]
        out.append(f"    const {self.it} j = ({self.it})((c * {g} + {lane}) * {v});")
        if self._padded():
            return out + [f"    if (j < {self.rsize}) {{"] + ["        " + x for x in body] + ["    }", "}"]
        return out + ["    " + x for x in body] + ["}"]

    def _vec_check(self) -> str:
        terms = []
        for k in self.vec_ks:
            size = _VEC_SIZES[self.shapes[k].type]
            terms.append(f"((unsigned long long)p{k} & {min(16, size * self.plan.vec) - 1}ull)")
        return f"const bool vec_ok = ({' | '.join(terms)}) == 0;"

    def _split(self, ks: list[int], vector: list[str], scalar: list[str]) -> list[str]:
        """The vector form where the pointers allow, else the element-wise one."""
        return ["if (vec_ok) {"] + ["    " + x for x in vector] + ["} else {"] + ["    " + x for x in scalar] + ["}"]

    # hooks -------------------------------------------------------------------------------------
    def row_index(self) -> list[str]:
        p, it = self.plan, self.it
        if p.group > 32:
            return ["const int lane = threadIdx.x;", f"const {it} row = blockIdx.x;", "const bool row_ok = true;"]
        return [
            f"const int lane = threadIdx.x % {p.group};",
            f"const {it} row_raw = ({it})blockIdx.x * {p.rows} + threadIdx.x / {p.group};",
            # rows past the end (the last block) compute on the last row and store nothing: every
            # lane of a warp must reach the shuffles
            f"const bool row_ok = row_raw < {self.nrows};",
            f"const {it} row = row_ok ? row_raw : ({it}){self.nrows - 1};",
        ]

    def launch(self) -> tuple[int, int]:
        p = self.plan
        return -(-self.nrows // p.rows) * p.threads, p.threads

    def prepare(self) -> None:
        e = self.plan.elems
        nin = self.nin
        ins_full = [k for k in self.full_ks if k < nin]
        outs = self.m.output_instructions()
        for k, o in enumerate(outs):
            if self.kind.get(o.id) == "full":
                self.out_types[self.out0 + k] = o.shape.type
        if self.vec_ks:
            self.lines.append(self._vec_check())
        for k in ins_full:
            self.lines.append(f"{compute_type(self.shapes[k].type)} xin{k}[{e}];")
        for p, t in self.out_types.items():
            self.lines.append(f"{compute_type(t)} ro{p}[{e}];")
        vec_in = [k for k in ins_full if k in self.vec_ks]
        v = self.plan.vec
        vector = [f"migx::load_vec<{v}>(p{k} + base{k} + j, xin{k} + c * {v});" for k in vec_in]
        scalar: list[str] = []
        self.inner_offsets(scalar)
        if vec_in:
            loads = [f"xin{k}[u] = migx::load(p{k}, off{k});" for k in vec_in]
            self.lines += self._split(vec_in, self._each_vector(vector), self._each(scalar + loads))
        rest: list[str] = []
        self.inner_offsets(rest)
        others = [k for k in ins_full if k not in vec_in]
        if others:
            self.lines += self._each(rest + [f"xin{k}[u] = migx::load(p{k}, off{k});" for k in others])

    def loop_head(self, lines: list[str]) -> None:
        pass  # the values are in registers: no offsets

    def param_line(self, k: int, ct: str, var: str) -> str:
        return f"const {ct} {var} = xin{k}[u];"

    def wrap_loop(self, body: list[str]) -> list[str]:
        return self._each(body, need_j=False)

    def combine(self, acc: str, acc_t: str, fn: str, smem: str) -> list[str]:
        if self.plan.group > 32:
            return super().combine(acc, acc_t, fn, smem)
        return [f"{acc} = migx::group_reduce<{self.plan.group}>({acc}, migx::{fn}());"]

    def store_full(self, p: int, t: str, e: str) -> str:
        return f"ro{p}[u] = {e};"

    def store_row(self, p: int, e: str) -> str:
        return f"if (lane == 0 && row_ok) migx::store(p{p}, base{p}, {e});"

    def finish(self) -> list[str]:
        if not self.out_types:
            return []
        v = self.plan.vec
        vec_out = [p for p in self.out_types if p in self.vec_ks]
        vector = [f"migx::store_vec<{v}>(p{p} + base{p} + j, ro{p} + c * {v});" for p in vec_out]
        lines: list[str] = []
        if vec_out:
            scalar: list[str] = []
            self.inner_offsets(scalar)
            stores = [f"migx::store(p{p}, off{p}, ro{p}[u]);" for p in vec_out]
            lines += self._split(vec_out, self._each_vector(vector), self._each(scalar + stores))
        others = [p for p in self.out_types if p not in vec_out]
        if others:
            rest: list[str] = []
            self.inner_offsets(rest)
            lines += self._each(rest + [f"migx::store(p{p}, off{p}, ro{p}[u]);" for p in others])
        return ["if (row_ok) {"] + ["    " + x for x in lines] + ["}"]
