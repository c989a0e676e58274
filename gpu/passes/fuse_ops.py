"""fuse_ops: GEMM / convolution + pointwise epilogues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...compiler.ir import Instruction, Module
from ...compiler.op import Op
from ...compiler.passes import Pass
from ...compiler.shape import Shape
from ..blas_plan import plan_gemm
from ..ops import inner_op, split_inputs


def _pointwise_consumer(ins: Instruction) -> tuple[Op, Module | None] | None:
    """(inner op, body module) when `ins` is a lowered single-output elementwise kernel."""
    if ins.name != "gpu::precompile_op" or ins.op["outputs"] != 1 or ins.op["ninputs"] != -1:
        return None
    inner = inner_op(ins.op["op"])
    if inner.name == "pointwise" and ins.module_inputs:
        return inner, ins.module_inputs[0]
    if inner.has("pointwise") and not ins.module_inputs:
        return inner, None
    return None


def _producer_kind(p: Instruction) -> str | None:
    if p.name == "gpu::gemm" and not p.module_inputs and len(p.inputs) == 3:
        return "gemm"
    if (p.name == "gpu::precompile_op" and not p.module_inputs and p.op["outputs"] == 1
            and inner_op(p.op["op"]).name == "convolution"):
        return "conv"
    return None


def build_epilogue(ctx, src: Module | None, inner: Op, inputs: list[Instruction], x: Instruction) -> tuple[
        Module, list[Instruction]]:
    """A bypass module computing the consumer's body with x0 = the producer's result; returns it
    and the remaining (extra) inputs in the order of its params x1, x2, ..."""
    extras = [i for i in dict.fromkeys(inputs) if i is not x]
    mod = ctx.create_module(ctx.unique_module_name("main:epilogue"))
    mod.bypass = True
    params = [mod.add_parameter("x0", _scalar(x))]
    params += [mod.add_parameter(f"x{k + 1}", _scalar(e)) for k, e in enumerate(extras)]
    slot = {x.id: params[0], **{e.id: params[k + 1] for k, e in enumerate(extras)}}
    if src is None:
        out = mod.add_instruction(inner, [slot[i.id] for i in inputs])
        mod.add_return([out])
        return mod, extras
    env = {}
    src_params = src.params()
    for p, i in zip(src_params, inputs):
        env[p.id] = slot[i.id]
    for s in src:
        if s.is_param():
            continue
        if s.is_return():
            mod.add_return([env[i.id] for i in s.inputs])
            break
        if s.is_literal():
            env[s.id] = mod.add_literal(s.literal)
        else:
            env[s.id] = mod.add_instruction(s.op, [env[i.id] for i in s.inputs])
    return mod, extras


def _scalar(ins: Instruction) -> Shape:
    return Shape.scalar(ins.shape.type)


@dataclass(frozen=True)
class FuseOps(Pass):
    """Fold a pointwise consumer (bias, activation, residual add, ...) into the GEMM or direct
    convolution that produces its input: the producer writes into the consumer's buffer and the
    body runs as its epilogue (inline in a direct-conv kernel; an in-place kernel right after the
    BLAS call for GEMMs). MIGraphX gpu::fuse_ops's find_*_gemm_pointwise / find_conv_pointwise."""

    name: ClassVar[str] = "fuse_ops"
    fast_math: bool = True

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        changed = False
        for ins in list(module):
            if ins.alive:
                with module.program.provenance([ins]):
                    changed |= self._fuse(module, ins, ctx)
        return changed

    def _fuse(self, m: Module, ins: Instruction, ctx) -> bool:
        consumer = _pointwise_consumer(ins)
        if consumer is None:
            return False
        inner, body = consumer
        ins_in, _, outs = split_inputs(ins.op, list(ins.inputs))
        buf = outs[0]
        for x in dict.fromkeys(ins_in):
            kind = _producer_kind(x)
            if kind is None or list(x.outputs) != [ins] or x.shape.lens != ins.shape.lens:
                continue
            if x.shape.type != ins.shape.type:
                continue
            if kind == "gemm" and plan_gemm(x.inputs[0].shape, x.inputs[1].shape, buf.shape) is None:
                continue
            with m.program.provenance([ins, x]):
                epi, extras = build_epilogue(ctx, body, inner, ins_in, x)
                if kind == "gemm":
                    new = m.insert_instruction(ins, Op("gpu::gemm"), [x.inputs[0], x.inputs[1], *extras, buf], [epi])
                else:
                    op = x.op.with_(ninputs=2)
                    new = m.insert_instruction(ins, op, [x.inputs[0], x.inputs[1], *extras, buf], [epi])
            m.replace_all_uses(ins, new)
            m.remove_instruction(ins)
            m.remove_instruction(x)
            return True
        return False
