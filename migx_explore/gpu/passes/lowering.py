"""lowering: target-independent ops -> GPU ops, each with an explicit output `allocate`.

- ops with a generated kernel (pointwise bodies, elementwise ops, reductions, softmax, pooling,
  concat, gather, pad, resize, copies) -> `gpu::precompile_op[op=...](inputs..., allocate)`;
- `dot` -> `gpu::gemm` (vendor BLAS); an operand whose layout BLAS cannot step through is copied
  to a standard layout first;
- `convolution` -> 1x1/stride-1 as one GEMM on the NCHW buffer; depthwise and small convs
  (C/group x kernel taps <= 32) as a generated direct kernel; the rest as a generated im2col
  kernel + BLAS GEMM (grouped: a batched GEMM per group);
- `quant_dot` / `quant_convolution` (int8 -> int32, fp8 -> float32) -> `gpu::gemm` on 8-bit BLAS
  in the "TN" layout it needs (weights re-laid out at compile time, activations by a copy; convs
  through an im2col written k-contiguous); products 8-bit BLAS cannot take (sizes not multiples of
  4 / 16, no fp8 GEMM on the target) widen exactly to a float16 GEMM with a float32 result; small
  and depthwise quantized convs are the direct kernel with int32 / float accumulation;
- views (reshape, transpose, broadcast, slice, ...) stay: kernels read through their strides;
- in-place ops (trait `in_place`, e.g. concat_past_present appending to a KV cache) write into
  their last input, which becomes the kernel's output buffer (no allocation);
- any other op with a reference compute -> `gpu::host_op` (numpy on the host; eager mode only).
With offload_copy, params are copied in (`hip::copy_to_gpu`) and results out (`hip::copy_from_gpu`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.nn import conv_params
from migx_explore.compiler.pass_infra import Pass
from migx_explore.compiler.ref import eval_instruction
from migx_explore.compiler.shape import Shape

from ..blas_plan import plan_gemm, quant_blas_refusal
from ..codegen import kernel_family
from ..codegen.topk import topk_workspace
from ..ops import op_text
from .conv_layout import (
    channels_last_shape,
    feeds_implicit_gemm,
    followed_layout,
    is_channels_last,
    wants_implicit_gemm,
)
from .entry_convert import converted_source, narrowing_epilogue, widened_constant

SMALL_CONV_TAPS = 32  # C/group x kernel taps at or under which a direct kernel beats im2col + GEMM
_KEEP = ("get_tuple_elem", "identity")


def alloc_shape(s: Shape) -> Shape:
    """The buffer an op writes: its own layout if that is packed (keeps NHWC), else standard."""
    return s if s.packed() and not s.broadcasted() else s.as_standard()


def allocate(module: Module, before: Instruction, shape: Shape) -> Instruction:
    return module.insert_instruction(before, Op("allocate", shape=alloc_shape(shape)))


def precompile(
    module: Module,
    before: Instruction,
    inner: Op,
    inputs,
    out: Shape,
    mods=(),
    ninputs: int = -1,
    workspace: int = 0,
) -> Instruction:
    """`workspace`: how many of `inputs` (the last ones) are scratch the kernel needs, not operands."""
    outs = list(out.sub_shapes) if out.is_tuple else [out]
    bufs = [allocate(module, before, s) for s in outs]
    extra = {"workspace": workspace} if workspace else {}
    op = Op("gpu::precompile_op", op=op_text(inner), ninputs=ninputs, outputs=len(bufs), **extra)
    return module.insert_instruction(before, op, list(inputs) + bufs, mods)


def host_op(module: Module, before: Instruction, inner: Op, inputs, out: Shape, mods=()) -> Instruction:
    outs = list(out.sub_shapes) if out.is_tuple else [out]
    bufs = [allocate(module, before, s) for s in outs]
    code = inner.spec.gpu
    why = code.detail if code is not None and code.kind in ("host", "none") else "no GPU code declared"
    op = Op("gpu::host_op", op=op_text(inner), outputs=len(bufs), why=why)
    return module.insert_instruction(before, op, list(inputs) + bufs, mods)


def make_standard(module: Module, before: Instruction, x: Instruction) -> Instruction:
    if x.shape.standard():
        return x
    return precompile(module, before, Op("contiguous"), [x], x.shape.as_standard())


def view(module: Module, before: Instruction, name: str, x: Instruction, **attrs) -> Instruction:
    return module.insert_instruction(before, Op(name, **attrs), [x])


def _is_float(s: Shape) -> bool:
    return s.dtype.is_float


@dataclass(frozen=True)
class Lowering(Pass):
    """MIGraphX gpu::lowering: each op becomes a GPU op writing into an explicit allocation."""

    name: ClassVar[str] = "lowering"
    offload_copy: bool = False
    # compile mode eager turns it off: each implicit-GEMM convolution is a tensor-core kernel of
    # its own sizes to compile, where im2col + BLAS compiles a gather kernel or none
    implicit_gemm: bool = True

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        changed = False
        for ins in list(module):
            if not ins.alive or ins.is_return():
                continue
            with module.program.provenance([ins]):
                changed |= self._lower(module, ins)
        with module.program.provenance([]):
            changed |= self._outputs(module)
        return changed

    def _lower(self, m: Module, ins: Instruction) -> bool:
        if ins.is_param():
            if self.offload_copy and ins.outputs:
                users = list(ins.outputs)
                first = min(users, key=lambda u: m.index_of()[u.id])
                buf = allocate(m, first, ins.shape)
                dev = m.insert_instruction(first, Op("hip::copy_to_gpu"), [ins, buf])
                for u in users:
                    m.replace_instruction(u, inputs=[dev if i is ins else i for i in u.inputs])
                return True
            return False
        if ins.is_builtin() or ins.name in _KEEP or ins.name in ("allocate", "load") or "::" in ins.name:
            return False
        op = ins.op
        if op.has("view"):
            if op.has("require_std_shape") and not ins.inputs[0].shape.standard():
                m.replace_instruction(ins, inputs=[make_standard(m, ins, ins.inputs[0])])
                return True
            return False
        if ins.name == "dot" and _is_float(ins.shape):
            new = self._dot(m, ins)
        elif ins.name == "convolution" and _is_float(ins.shape):
            new = self._conv(m, ins)
        elif ins.name == "quant_dot":
            new = quant_dot(m, ins, ins.inputs[0], ins.inputs[1], ins.shape)
        elif ins.name == "quant_convolution":
            new = self._quant_conv(m, ins)
        elif ins.name == "group":
            new = self._group(m, ins)
        elif op.has("in_place"):  # e.g. concat_past_present: its last input is its output buffer
            *own, buf = ins.inputs
            new = m.insert_instruction(
                ins, Op("gpu::precompile_op", op=op_text(op), ninputs=len(own), outputs=1), [*own, buf]
            )
        elif ins.name == "topk" and topk_workspace(op, ins.inputs[0].shape) is not None:
            new = self._topk(m, ins)
        elif kernel_family(ins.name) is not None:
            new = precompile(m, ins, op, ins.inputs, followed_layout(ins), ins.module_inputs)
        elif op.spec.compute is not None:
            new = host_op(m, ins, op, ins.inputs, ins.shape, ins.module_inputs)
        else:
            raise MigxError(f"lowering: {ins.name} has neither a GPU kernel nor a reference compute")
        m.replace_all_uses(ins, new)
        m.remove_instruction(ins)
        return True

    def _topk(self, m: Module, ins: Instruction) -> Instruction:
        """A topk spread over several blocks per slice (gpu/codegen/topk.py) takes two scratch
        inputs: the per-slice ticket, a zero literal (its own memory, set once; the kernel
        leaves it at 0 again), and the candidates, an allocation that memory_coloring places in
        the arena like any buffer (the kernel writes it before reading it)."""
        ticket, cand = topk_workspace(ins.op, ins.inputs[0].shape)
        zero = m.add_literal(np.zeros(ticket.lens, np.uint32))
        ws = m.insert_instruction(ins, Op("allocate", shape=cand))
        return precompile(m, ins, ins.op, [ins.inputs[0], zero, ws], ins.shape, ninputs=1, workspace=2)

    def _dot(self, m: Module, ins: Instruction) -> Instruction:
        a, b = ins.inputs
        out = alloc_shape(ins.shape)
        if plan_gemm(a.shape, b.shape, out) is None:
            a = make_standard(m, ins, a)
            if plan_gemm(a.shape, b.shape, out) is None:
                b = make_standard(m, ins, b)
        return gemm(m, ins, a, b, out)

    def _conv(self, m: Module, ins: Instruction) -> Instruction:
        x, w = ins.inputs
        op = ins.op
        nd = x.shape.ndim - 2
        pb, pe, st, dl = conv_params(op, nd)
        g = op["group"]
        k_out, cg = w.shape.lens[0], w.shape.lens[1]
        ksz = list(w.shape.lens[2:])
        taps = math.prod(ksz)
        if all(v == 1 for v in ksz) and all(v == 1 for v in st) and not any(pb + pe) and g == 1:
            return self._conv_1x1(m, ins, x, w)
        src = converted_source(x, ins)  # at fp16, the model's float32 input: read it directly
        igemm = self.implicit_gemm and wants_implicit_gemm(ins)
        if (cg * taps <= SMALL_CONV_TAPS or (cg == 1 and g > 1)) and not (igemm and is_channels_last(x.shape)):
            wide = widened_constant(m, ins, w, src.shape.type) if src is not None else None
            if wide is not None:
                epi = narrowing_epilogue(m, src.shape.type, ins.shape.type)
                return precompile(m, ins, op, [src, wide], ins.shape, [epi], ninputs=2)
            # a channels-last input keeps its layout (the kernel walks the output in memory
            # order), and an output an implicit-GEMM convolution reads is written so; else
            # standard (the shape follows a channels-last input: convolution's shape rule)
            out = ins.shape.as_standard()
            if is_channels_last(x.shape) or (out.lens[1] % 8 == 0 and self._feeds_implicit_gemm(ins)):
                out = channels_last_shape(out)
            return precompile(m, ins, op, [x, w], out)
        if igemm:
            # written channels-last too where another one reads it (through elementwise kernels,
            # conv_layout.followed_layout), so that one needs no copy; else standard
            out = ins.shape.as_standard()
            if out.lens[1] % 8 == 0 and self._feeds_implicit_gemm(ins):
                out = channels_last_shape(out)
            return precompile(m, ins, op, [channels_last(m, ins, x), channels_last(m, ins, w)], out)
        n = x.shape.lens[0]
        col_op = Op(
            "gpu::im2col",
            kernel=ksz,
            padding=op["padding"],
            stride=st,
            dilation=dl,
            out_type=x.shape.type if src is not None else "",
        )
        from migx_explore.compiler.op import compute_shape

        col = precompile(m, ins, col_op, [src or x], compute_shape(col_op, [(src or x).shape]))
        p = col.shape.lens[2]
        w_std = make_standard(m, ins, w)
        if g == 1:
            a = view(
                m,
                ins,
                "multibroadcast",
                view(m, ins, "reshape", w_std, dims=[k_out, cg * taps]),
                out_lens=[n, k_out, cg * taps],
            )
            out = ins.shape.as_standard()
            if out.ndim == 4 and k_out % 8 == 0 and self._feeds_implicit_gemm(ins):  # a stem convolution
                out = channels_last_shape(out)
            return gemm(m, ins, a, col, out)
        kg = k_out // g
        a = view(
            m,
            ins,
            "multibroadcast",
            view(m, ins, "reshape", w_std, dims=[g, kg, cg * taps]),
            out_lens=[n, g, kg, cg * taps],
        )
        b = view(m, ins, "reshape", col, dims=[n, g, cg * taps, p])
        return gemm(m, ins, a, b, ins.shape.as_standard())

    def _feeds_implicit_gemm(self, ins: Instruction) -> bool:
        """conv_layout.feeds_implicit_gemm, where implicit-GEMM convolutions are on."""
        return self.implicit_gemm and feeds_implicit_gemm(ins)

    def _quant_conv(self, m: Module, ins: Instruction) -> Instruction:
        """int8 / fp8 convolution: small and depthwise as the direct kernel (int32 / float
        accumulation), the rest as im2col written k-contiguous ([n, p, K] in memory) so the
        quantized GEMM gets the TN layout 8-bit BLAS wants."""
        x, w = ins.inputs
        op = ins.op
        nd = x.shape.ndim - 2
        _, _, st, dl = conv_params(op, nd)
        g = op["group"]
        k_out, cg = w.shape.lens[0], w.shape.lens[1]
        ksz = list(w.shape.lens[2:])
        taps = math.prod(ksz)
        if g > 1 or cg * taps <= SMALL_CONV_TAPS:
            return precompile(m, ins, op, [x, w], ins.shape)
        from migx_explore.compiler.op import compute_shape

        col_op = Op("gpu::im2col", kernel=ksz, padding=op["padding"], stride=st, dilation=dl)
        n, kk, p = compute_shape(col_op, [x.shape]).lens
        col_t = Shape(x.shape.type, [n, kk, p], [kk * p, 1, kk])  # element (n, K, p) at n*K*p + p*K + K
        a_t = Shape(w.shape.type, [n, k_out, kk], [0, kk, 1])
        out = ins.shape.as_standard()
        plan = plan_gemm(a_t, col_t, out)
        if plan is None or quant_blas_refusal(plan, quant_blas_types()) is not None:
            # widen the (smaller) input before im2col, not the column matrix after it
            x, w = widened(m, ins, x), widened(m, ins, w)
            col = precompile(m, ins, col_op, [x], compute_shape(col_op, [x.shape]))
        else:
            col = precompile(m, ins, col_op, [x], col_t)
        a = view(
            m,
            ins,
            "multibroadcast",
            view(m, ins, "reshape", make_standard(m, ins, w), dims=[k_out, kk]),
            out_lens=[n, k_out, kk],
        )
        return quant_dot(m, ins, a, col, out)

    def _group(self, m: Module, ins: Instruction) -> Instruction:
        """A fused group writes through its output strides, so when its one user is a transpose
        (attention's [B, H, S, D] -> [B, S, H, D] before the output projection) the buffer gets
        the layout that makes the transposed view standard, and the copy after it disappears."""
        shape = ins.shape
        users = list(ins.outputs)
        if len(users) == 1 and users[0].name == "transpose" and not shape.is_tuple:
            perm = users[0].op["permutation"]
            std = users[0].shape.as_standard().strides
            strides = [0] * len(perm)
            for i, p in enumerate(perm):
                strides[p] = std[i]
            shape = Shape.of(shape.type, shape.lens, strides)
        if ins.op["tag"] == "kv_attention":
            return self._kv_attention(m, ins)
        return precompile(m, ins, ins.op, ins.inputs, shape, ins.module_inputs)

    def _kv_attention(self, m: Module, ins: Instruction) -> Instruction:
        """group[tag=kv_attention] (fuse_kv_append) returns (attention, cache_k', cache_v'): the
        caches are updated in place, so their output buffers are the cache inputs themselves (as
        concat_past_present's is), and only the attention output is allocated."""
        sub = ins.module_inputs[0]
        params = {p.id: k for k, p in enumerate(sub.params())}
        caches = [ins.inputs[params[c.inputs[2].id]] for c in sub if c.name == "concat_past_present"]
        attn = allocate(m, ins, ins.shape.sub_shapes[0])
        op = Op("gpu::precompile_op", op=op_text(ins.op), ninputs=len(ins.inputs), outputs=3)
        return m.insert_instruction(ins, op, [*ins.inputs, attn, *caches], ins.module_inputs)

    def _conv_1x1(self, m: Module, ins: Instruction, x: Instruction, w: Instruction) -> Instruction:
        n, c = x.shape.lens[:2]
        k_out = w.shape.lens[0]
        hw = math.prod(x.shape.lens[2:])
        out = ins.shape.as_standard()
        if is_channels_last(x.shape):
            # a channels-last input is the k-contiguous [n, c, hw] operand as it is (no copy back
            # to NCHW), and the output stays channels-last for the kernels after it
            rows = view(m, ins, "reshape", view(m, ins, "transpose", x, permutation=[0, 2, 3, 1]), dims=[n, hw, c])
            b = view(m, ins, "transpose", rows, permutation=[0, 2, 1])
        else:
            b = view(m, ins, "reshape", make_standard(m, ins, x), dims=[n, c, hw])
        a = view(
            m,
            ins,
            "multibroadcast",
            view(m, ins, "reshape", make_standard(m, ins, w), dims=[k_out, c]),
            out_lens=[n, k_out, c],
        )
        if k_out % 8 == 0 and (is_channels_last(x.shape) or self._feeds_implicit_gemm(ins)):
            out = channels_last_shape(out)
        return gemm(m, ins, a, b, out)

    def _outputs(self, m: Module) -> bool:
        """Results leave as standard buffers (offload_copy: through hip::copy_from_gpu)."""
        ret = m.return_instruction()
        if ret is None:
            return False
        new_inputs = []
        changed = False
        for v in ret.inputs:
            nv = v if v.shape.standard() or v.shape.is_tuple else make_standard(m, ret, v)
            if self.offload_copy and not nv.is_literal():
                nv = m.insert_instruction(ret, Op("hip::copy_from_gpu"), [nv])
            changed |= nv is not v
            new_inputs.append(nv)
        if changed:
            m.replace_instruction(ret, inputs=new_inputs)
        return changed


def gemm(m: Module, before: Instruction, a: Instruction, b: Instruction, out: Shape) -> Instruction:
    buf = allocate(m, before, out)
    return m.insert_instruction(before, Op("gpu::gemm"), [a, b, buf])


# Where 8-bit BLAS cannot take a product (sizes not aligned, or no fp8 GEMM on the target), its
# operands are widened to float16, which holds every int8 and every fp8 e4m3 value exactly, and
# the product runs as a float16 GEMM with float32 accumulation and result (exact products; sums
# exact up to 2^24). MIGX_WIDEN_8BIT=0 sends those products to the generated tiled kernel instead.
WIDEN_8BIT = os.environ.get("MIGX_WIDEN_8BIT", "1") != "0"


def widening_is_exact(a: Instruction, b: Instruction) -> bool:
    """An int8 product keeps int32 semantics in a float32 accumulator while every partial sum
    stays below 2^24: K * 128 * 128 <= 2^24, K <= 1024. Longer int8 reductions take the tiled
    int32 kernel. fp8 products accumulate in float32 either way."""
    if "int8" not in (a.shape.type, b.shape.type):
        return True
    return a.shape.lens[-1] * 128 * 128 <= 2**24


def widened(m: Module, before: Instruction, x: Instruction) -> Instruction:
    """An int8 / fp8 value as float16 (exact): a literal folded now, else one convert kernel.
    Values already in a float type are returned as they are."""
    if x.shape.type not in ("int8", "uint8", "float8e4m3fn"):
        return x
    if x.can_eval():
        return m.add_literal(np.asarray(eval_instruction(x)).astype(np.float16))
    return precompile(m, before, Op("convert", target_type="float16"), [x], Shape("float16", list(x.shape.lens)))


def widened_gemm(m: Module, before: Instruction, a: Instruction, b: Instruction, out: Shape) -> Instruction:
    """float16 GEMM with a float32 result; int32 for int8 quant_dot through one convert kernel."""
    out32 = Shape("float32", list(out.lens), list(out.strides))
    if plan_gemm(a.shape, b.shape, out32) is None:
        a = make_standard(m, before, a)
        if plan_gemm(a.shape, b.shape, out32) is None:
            b = make_standard(m, before, b)
    g = gemm(m, before, a, b, out32)
    if out.type == "float32":
        return g
    return precompile(m, before, Op("convert", target_type=out.type), [g], out)


def quant_blas_types() -> tuple[str, ...]:
    """8-bit operand types the bound target's BLAS multiplies (both when no target is bound)."""
    from .. import kernel_cache

    target = kernel_cache.current_target()
    return tuple(getattr(target, "quant_gemm_types", ("int8", "float8e4m3fn")))


def _transposed_copy(m: Module, before: Instruction, b: Instruction) -> Instruction:
    """b[..., k, n] re-stored k-contiguous (as the standard [..., n, k] seen through a transpose):
    folded into a new literal when b is constant (weights), else one copy kernel."""
    perm = list(range(b.shape.ndim - 2)) + [b.shape.ndim - 1, b.shape.ndim - 2]
    if b.can_eval():
        lit = m.add_literal(np.ascontiguousarray(np.transpose(np.asarray(eval_instruction(b)), perm)))
        return view(m, before, "transpose", lit, permutation=perm)
    t = make_standard(m, before, view(m, before, "transpose", b, permutation=perm))
    return view(m, before, "transpose", t, permutation=perm)


def channels_last(m: Module, before: Instruction, x: Instruction) -> Instruction:
    """A 4-D x stored [n][h][w][c], seen as [n, c, h, w]: x itself when it already is (a channel
    stride of 1), a new literal when x is constant (a weight: [co][r][s][c]), else one copy kernel."""
    if is_channels_last(x.shape):
        return x
    to_last, back = [0, 2, 3, 1], [0, 3, 1, 2]
    if x.can_eval():
        lit = m.add_literal(np.ascontiguousarray(np.transpose(np.asarray(eval_instruction(x)), to_last)))
        return view(m, before, "transpose", lit, permutation=back)
    t = make_standard(m, before, view(m, before, "transpose", x, permutation=to_last))
    return view(m, before, "transpose", t, permutation=back)


def _k_contiguous(s: Shape) -> Shape:
    """s[..., k, n] stored as the standard [..., n, k] seen through a transpose."""
    lens = list(s.lens)
    std = Shape(s.type, lens[:-2] + [lens[-1], lens[-2]]).strides
    return Shape(s.type, lens, list(std[:-2]) + [std[-1], std[-2]])


def quant_dot(m: Module, before: Instruction, a: Instruction, b: Instruction, out: Shape) -> Instruction:
    """int8 / fp8 product: a BLAS GEMM when the target's library takes the layout (made TN: a
    row-major, b k-contiguous), else the generated tiled kernel (int32 / float accumulation)."""
    out = alloc_shape(out)
    types = quant_blas_types()
    plan = plan_gemm(a.shape, b.shape, out)
    if plan is not None and quant_blas_refusal(plan, types) is None:
        return gemm(m, before, a, b, out)
    a_row = a.shape.strides[-1] == 1 or a.shape.lens[-1] == 1
    b_kc = b.shape.strides[-2] == 1 and b.shape.lens[-2] > 1
    want_a = a.shape if a_row else a.shape.as_standard()
    want_b = b.shape if b_kc else _k_contiguous(b.shape)
    plan = plan_gemm(want_a, want_b, out)
    if a.shape.type in types and plan is not None and quant_blas_refusal(plan, types) is None:
        a2 = a if a_row else make_standard(m, before, a)
        b2 = b if b_kc else _transposed_copy(m, before, b)
        return gemm(m, before, a2, b2, out)
    if WIDEN_8BIT and widening_is_exact(a, b):
        return widened_gemm(m, before, widened(m, before, a), widened(m, before, b), out)
    prod = list(a.shape.lens[:-2]) + [a.shape.lens[-2], b.shape.lens[-1]]
    if list(out.lens) == prod:
        return precompile(m, before, Op("quant_dot"), [a, b], out)
    res = precompile(m, before, Op("quant_dot"), [a, b], Shape(out.type, prod))  # e.g. conv: [n, k, h*w]
    return view(m, before, "reshape", res, dims=list(out.lens))
