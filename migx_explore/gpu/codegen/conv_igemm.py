"""Implicit-GEMM convolution: a half / bfloat16 2-D convolution as gemm_mma's tensor-core GEMM,
out[n, co, p] = sum_k w[co, k] . col[n, k, p], whose column matrix is never written: each chunk of
it is gathered from the input as it is staged into shared memory.

Why, beside im2col + BLAS: the column matrix is kernel-taps times the input (9x for a 3x3), written
once and read once; on the VAE decoder's 64-channel 256x256 convolutions that traffic was the
largest kernel kind of the fp16 graph (24 im2cols, 232 us of 846 us on an H200, session 48), and
the GEMM after it left its epilogue (bias, SiLU) to yet another kernel.

The gather needs the input channels-last (NHWC: channel stride 1, C a multiple of 8), so that a
16-byte vector of 8 consecutive k (= 8 channels of one tap) is one aligned load, with k ordered
(tap row, tap col, channel) and the weight stored the same way ([co][r][s][c]). Padding taps are
cp.async's zero fill (a source size of 0), so the border needs no branch in the mma loop. The GEMM
is M = output channels (A: the weight), N = output pixels (B: the gathered columns, staged n-major
like a transposed weight), batch = images; the epilogue (a fused pointwise) reads its extras and
writes the output through their 4-D strides, so any output layout works.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.nn import conv_params
from migx_explore.compiler.shape import Shape

from . import gemm_mma
from .common import (
    CodegenUnsupported,
    KernelSource,
    decompose,
    index_type,
    is_float,
    offset_expr,
    source,
)
from .gemm_mma import (
    MMA_TYPES,
    THREADS,
    TILES,
    MmaGemmPlan,
    Stage,
    choose_tile,
    epilogue_lines,
    k_loop_parts,
    main_loop,
    per_thread,
    pipelined_loop,
    render_kernel,
    with_epilogue_name,
)

# K chunk: 64 as gemm_mma's; MIGX_IGEMM_BK=32 for measuring (a 64 x 64 tile then fits 4 stages
# in 48 KB of shared memory instead of 2)
BK_DEFAULT = 64


@dataclass(frozen=True)
class ConvGemm:
    """A convolution's implicit-GEMM geometry: input (N, C, H, W), taps (R, S), output (OH, OW)."""

    n: int
    c: int
    h: int
    w: int
    r: int
    s: int
    oh: int
    ow: int
    stride: tuple[int, int]
    pad: tuple[int, int]
    dilation: tuple[int, int]

    @property
    def k(self) -> int:
        return self.r * self.s * self.c

    @property
    def pixels(self) -> int:
        return self.oh * self.ow


def krsc_strides(w_lens: Sequence[int]) -> list[int]:
    """Strides of a [co, c, r, s] weight stored [co][r][s][c]."""
    co, c, r, s = w_lens
    return [r * s * c, 1, s * c, c]


def _channels_last(x: Shape) -> bool:
    """Channel stride 1 and every other stride a multiple of 8 (16-byte vectors along c)."""
    return x.strides[1] == 1 and x.lens[1] % 8 == 0 and all(st % 8 == 0 for st in (x.strides[0], *x.strides[2:]))


def conv_gemm(op: Op, x: Shape, w: Shape, out: Shape) -> ConvGemm:
    """The geometry, or CodegenUnsupported saying why this convolution is no implicit GEMM here."""
    if x.type not in MMA_TYPES or w.type != x.type:
        raise CodegenUnsupported(f"implicit-GEMM convolution of {x.type} x {w.type}")
    if x.ndim != 4 or op["group"] != 1:
        raise CodegenUnsupported("implicit-GEMM convolution: 2-D and ungrouped only")
    if not _channels_last(x):
        raise CodegenUnsupported(f"implicit-GEMM convolution reads channels-last input, not {x}")
    if list(w.strides) != krsc_strides(w.lens):
        raise CodegenUnsupported(f"implicit-GEMM convolution reads a [co][r][s][c] weight, not {w}")
    if not is_float(out.type):
        raise CodegenUnsupported(f"implicit-GEMM convolution writing {out.type}")
    pb, _, st, dl = conv_params(op, 2)
    return ConvGemm(
        x.lens[0], x.lens[1], x.lens[2], x.lens[3], w.lens[2], w.lens[3], out.lens[2], out.lens[3],
        tuple(st), tuple(pb), tuple(dl),
    )  # fmt: skip


def fits_implicit_gemm(op: Op, x: Shape, w: Shape, out: Shape) -> bool:
    """Whether the kernel can compute this convolution with these layouts (conv_gemm's checks)."""
    try:
        conv_gemm(op, x, w, out)
    except CodegenUnsupported:
        return False
    return True


def plan_conv_gemm(g: ConvGemm, cout: int) -> MmaGemmPlan:
    """gemm_mma's plan for the product: A [cout, K] row-major, B [K, pixels] k-contiguous. Tiles
    no taller than the channels (YOLOv10n's 32-channel convolutions got 64-row tiles, half idle),
    and K chunks of BK_DEFAULT (shorter chunks fit more pipeline stages in 48 KB)."""
    tiles = [t for t in TILES if t[0] <= max(16, cout)] or [TILES[-1]]
    bm, bn, wm, wn = choose_tile(g.n, cout, g.pixels, tiles)
    bk = min(int(os.environ.get("MIGX_IGEMM_BK", BK_DEFAULT)), -(-g.k // 16) * 16)
    batch = (g.n,) if g.n > 1 else ()
    return MmaGemmPlan(cout, g.pixels, g.k, batch, bm, bn, wm, wn, bk, False, True, True)


def _gather(g: ConvGemm, x: Shape, it: str) -> list[str]:
    """C++ computing `ok` and `off`: whether column element (k0 + col, col0 + row) is inside the
    input, and its offset from the image's corner pointer. Vectors start at a multiple of 8
    in k, so (C % 8 == 0) all 8 lie in one tap."""
    sh, sw = x.strides[2], x.strides[3]
    return [
        "    const int pix = col0 + row, kk = k0 + col;",
        f"    const int tap = kk / {g.c}, ci = kk % {g.c};",
        f"    const int ih = (pix / {g.ow}) * {g.stride[0]} - {g.pad[0]} + (tap / {g.s}) * {g.dilation[0]};",
        f"    const int iw = (pix % {g.ow}) * {g.stride[1]} - {g.pad[1]} + (tap % {g.s}) * {g.dilation[1]};",
        f"    const bool ok = pix < {g.pixels} && kk < {g.k} && ih >= 0 && ih < {g.h} && iw >= 0 && iw < {g.w};",
        f"    const {it} off = ok ? ({it})ih * {sh} + ({it})iw * {sw} + ci : 0;",
    ]


def _element_stage(g: ConvGemm, x: Shape, bn: int, bk: int, it: str) -> Stage:
    """B moved element by element (the input pointer is not 16-byte aligned at run time). Its
    chunk is held in registers across the mma (main_loop's double buffering), which puts every
    implicit-GEMM kernel at ~255 registers; a variant that moved each element straight to shared
    memory took them to 30-90, and yet made ResNet-18 fp16 10% and YOLOv10n 7% slower (H200,
    session 51, docs/results/igemm_registers_session51_h200.md), so it stays."""
    ne = bn * bk
    where = f"const int e = threadIdx.x + r * {THREADS}, row = e / {bk}, col = e % {bk};"
    load = [*_gather(g, x, it), f"    br[r] = (e < {ne} && ok) ? pb[off].bits : (unsigned short)0;"]
    store = [f"    if (e < {ne}) bs[buf][row][col] = br[r];"]
    return Stage(f"unsigned short br[{-(-ne // THREADS)}];", per_thread(ne, where, load), per_thread(ne, where, store))


def conv_igemm_kernel(op: Op, shapes: Sequence[Shape], epilogue: Module | None = None) -> KernelSource:
    """Params (x, w, epilogue extras..., out): out = epilogue(convolution(x, w), extras...)."""
    x, w, out = shapes[0], shapes[1], shapes[-1]
    extras = list(shapes[2:-1])
    if extras and epilogue is None:
        raise CodegenUnsupported("convolution extras without an epilogue")
    g = conv_gemm(op, x, w, out)
    cout = w.lens[0]
    plan = plan_conv_gemm(g, cout)
    bm, bn, bk = plan.bm, plan.bn, plan.bk
    it = index_type(shapes)
    a_virtual = Shape(w.type, [cout, g.k], [g.k, 1])
    b_virtual = Shape(x.type, [g.k, g.pixels], [1, g.k])
    # A is the weight (param 1, row-major [cout, K]); B's corner is the image's (xb): the gather
    # adds each element's offset
    lp = dataclasses.replace(
        k_loop_parts(plan, a_virtual, b_virtual, it), a_ptr=f"p1 + (({it})row0 * {g.k} + k0)", b_ptr="xb"
    )
    # the output and extras at (image, channel i, pixel j) through their own 4-D strides
    ii, jj = (c if it == "int" else f"(({it}){c})" for c in ("i", "j"))
    pixel = [ii, f"({jj} / {g.ow})", f"({jj} % {g.ow})"]
    copy = [*_gather(g, x, it), f"    if (v < {bn * bk // 8}) migx::copy16_async(&bs[st][row][col], p + off, ok);"]
    loop = [
        "const auto* xb = p0 + ox;",
        f"if ({gemm_mma.aligned(['p0', 'p1'])})",
        *pipelined_loop(lp, False, copy),
        "else",
        *main_loop(lp, False, False, _element_stage(g, x, bn, bk, it)),
    ]
    head = [
        "int blk = blockIdx.x;",
        f"const int tn = blk % {-(-g.pixels // bn)}; blk /= {-(-g.pixels // bn)};",
        f"const int tm = blk % {-(-cout // bm)}; blk /= {-(-cout // bm)};",
        *(decompose("blk", [g.n], it, "g") if g.n > 1 else [f"const {it} g0 = 0;"]),
        f"const {it} ox = {offset_expr(['g0'], x.strides[:1])};",
        *(f"const {it} oc{j} = {offset_expr(['g0'], s.strides[:1])};" for j, s in enumerate([out, *extras])),
        f"const int row0 = tm * {bm}, col0 = tn * {bn};",
    ]
    ep_lines, result = epilogue_lines(epilogue, extras, [offset_expr(pixel, s.strides[1:]) for s in extras])
    taps = f"{g.r}x{g.s}" + (f"s{g.stride[0]}" if g.stride != (1, 1) else "")
    name = f"conv_igemm_{taps}_{bm}x{bn}x{bk}_{cout}x{g.pixels}x{g.k}" + (f"_b{g.n}" if g.n > 1 else "")
    name = with_epilogue_name(name, epilogue)
    src = render_kernel(
        name,
        lp,
        shapes,
        entry="migx::kernel_entry();",
        head=head,
        loop=loop,
        scale=[],
        epilogue=ep_lines,
        out_offset=offset_expr(pixel, out.strides[1:]),
        result=result,
    )
    return KernelSource(name + "_kernel", source(src), plan.blocks * THREADS, THREADS)


# Fewer output channels than an mma tile's 16 rows leave most of each tile idle (the VAE's
# 64 -> 3 output convolution): the im2col + BLAS path stays for those.
MIN_CHANNELS = 16
# The K loop is serial in each block (no split-K): a long K over few pixels is a handful of blocks
# on a 132-SM GPU (ResNet-18's last 3x3 stage: 256 channels over 7x7 pixels, K = 2304, 4 blocks).
MIN_BLOCKS = 64
# Above this many multiply-adds cuBLASLt's GEMM outruns this kernel by more than the im2col costs
# (H200 fp16, kernels timed without dependent launch): YOLOv10n's 64 x 6400 x 576 took 13.9 us
# here against ~10 us of im2col + GEMM, the VAE decoder's 128 x 1024 x 1152 9.3 against ~8; the
# products of ResNet-18 and YOLOv10n up to 6e7 are faster here (ResNet-18 fp16 171 -> 136 us).
MAX_MACS = 1 << 27


def igemm_mode() -> str:
    """$MIGX_CONV_IGEMM: "0", "auto" (the default) or "all"."""
    return os.environ.get("MIGX_CONV_IGEMM", "auto")


def implicit_gemm_wanted(
    op: Op, x: Shape, w: Shape, out: Shape, arch: str | None, mode: str | None = None, min_blocks: int = MIN_BLOCKS
) -> bool:
    """Whether lowering should give this convolution the implicit-GEMM kernel (x and w as they
    will be once laid out: the caller passes channels-last / [co][r][s][c] shapes). `mode`
    (default $MIGX_CONV_IGEMM): "0" never, "all" wherever the kernel applies, "auto" where it
    has enough output channels and blocks (`min_blocks`: 0 where the input is channels-last
    already, so that the alternative, an im2col, would read it across channels), and is not so
    large that cuBLASLt wins."""
    from .gemm_mma import has_mma

    mode = mode if mode is not None else igemm_mode()
    if mode == "0" or (arch and arch != "fake" and not has_mma(arch)):
        return False
    try:
        g = conv_gemm(op, x, w, out)
    except CodegenUnsupported:
        return False
    if mode == "all":
        return True
    plan = plan_conv_gemm(g, w.lens[0])
    return w.lens[0] >= MIN_CHANNELS and plan.blocks >= min_blocks and plan.macs <= MAX_MACS
