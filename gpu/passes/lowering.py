"""lowering: target-independent ops -> GPU ops, each with an explicit output `allocate`.

- ops with a generated kernel (pointwise bodies, elementwise ops, reductions, softmax, pooling,
  concat, gather, pad, resize, copies) -> `gpu::precompile_op[op=...](inputs..., allocate)`;
- `dot` -> `gpu::gemm` (vendor BLAS); an operand whose layout BLAS cannot step through is copied
  to a standard layout first;
- `convolution` -> 1x1/stride-1 as one GEMM on the NCHW buffer; depthwise and small convs
  (C/group x kernel taps <= 32) as a generated direct kernel; the rest as a generated im2col
  kernel + BLAS GEMM (grouped: a batched GEMM per group);
- views (reshape, transpose, broadcast, slice, ...) stay: kernels read through their strides;
- in-place ops (trait `in_place`, e.g. concat_past_present appending to a KV cache) write into
  their last input, which becomes the kernel's output buffer (no allocation);
- any other op with a reference compute -> `gpu::host_op` (numpy on the host; eager mode only).
With offload_copy, params are copied in (`hip::copy_to_gpu`) and results out (`hip::copy_from_gpu`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ...compiler.errors import MigxError
from ...compiler.ir import Instruction, Module
from ...compiler.op import Op
from ...compiler.ops.nn import conv_params
from ...compiler.passes import Pass
from ...compiler.shape import Shape
from ..blas_plan import plan_gemm
from ..codegen import kernel_family
from ..ops import op_text

SMALL_CONV_TAPS = 32  # C/group x kernel taps at or under which a direct kernel beats im2col + GEMM
_KEEP = ("get_tuple_elem", "identity")


def alloc_shape(s: Shape) -> Shape:
    """The buffer an op writes: its own layout if that is packed (keeps NHWC), else standard."""
    return s if s.packed() and not s.broadcasted() else s.as_standard()


def allocate(module: Module, before: Instruction, shape: Shape) -> Instruction:
    return module.insert_instruction(before, Op("allocate", shape=alloc_shape(shape)))


def precompile(module: Module, before: Instruction, inner: Op, inputs, out: Shape, mods=(), ninputs: int = -1
               ) -> Instruction:
    outs = list(out.sub_shapes) if out.is_tuple else [out]
    bufs = [allocate(module, before, s) for s in outs]
    op = Op("gpu::precompile_op", op=op_text(inner), ninputs=ninputs, outputs=len(bufs))
    return module.insert_instruction(before, op, list(inputs) + bufs, mods)


def host_op(module: Module, before: Instruction, inner: Op, inputs, out: Shape, mods=()) -> Instruction:
    outs = list(out.sub_shapes) if out.is_tuple else [out]
    bufs = [allocate(module, before, s) for s in outs]
    op = Op("gpu::host_op", op=op_text(inner), outputs=len(bufs))
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
        elif ins.name == "group":
            new = self._group(m, ins)
        elif op.has("in_place"):  # e.g. concat_past_present: its last input is its output buffer
            *own, buf = ins.inputs
            new = m.insert_instruction(ins, Op("gpu::precompile_op", op=op_text(op), ninputs=len(own), outputs=1),
                                       [*own, buf])
        elif kernel_family(ins.name) is not None:
            new = precompile(m, ins, op, ins.inputs, ins.shape, ins.module_inputs)
        elif op.spec.compute is not None:
            new = host_op(m, ins, op, ins.inputs, ins.shape, ins.module_inputs)
        else:
            raise MigxError(f"lowering: {ins.name} has neither a GPU kernel nor a reference compute")
        m.replace_all_uses(ins, new)
        m.remove_instruction(ins)
        return True

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
        if cg * taps <= SMALL_CONV_TAPS or (cg == 1 and g > 1):
            return precompile(m, ins, op, [x, w], ins.shape)
        n = x.shape.lens[0]
        col_op = Op("gpu::im2col", kernel=ksz, padding=op["padding"], stride=st, dilation=dl)
        from ...compiler.op import compute_shape

        col = precompile(m, ins, col_op, [x], compute_shape(col_op, [x.shape]))
        p = col.shape.lens[2]
        w_std = make_standard(m, ins, w)
        if g == 1:
            a = view(m, ins, "multibroadcast", view(m, ins, "reshape", w_std, dims=[k_out, cg * taps]),
                     out_lens=[n, k_out, cg * taps])
            return gemm(m, ins, a, col, ins.shape.as_standard())
        kg = k_out // g
        a = view(m, ins, "multibroadcast", view(m, ins, "reshape", w_std, dims=[g, kg, cg * taps]),
                 out_lens=[n, g, kg, cg * taps])
        b = view(m, ins, "reshape", col, dims=[n, g, cg * taps, p])
        return gemm(m, ins, a, b, ins.shape.as_standard())

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
        return precompile(m, ins, ins.op, ins.inputs, shape, ins.module_inputs)

    def _conv_1x1(self, m: Module, ins: Instruction, x: Instruction, w: Instruction) -> Instruction:
        n, c = x.shape.lens[:2]
        k_out = w.shape.lens[0]
        hw = math.prod(x.shape.lens[2:])
        b = view(m, ins, "reshape", make_standard(m, ins, x), dims=[n, c, hw])
        a = view(m, ins, "multibroadcast", view(m, ins, "reshape", make_standard(m, ins, w), dims=[k_out, c]),
                 out_lens=[n, k_out, c])
        return gemm(m, ins, a, b, ins.shape.as_standard())

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
