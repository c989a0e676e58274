"""fuse_ops: GEMM / convolution + pointwise epilogues; layernorm with its neighbours
(layernorm_fusion.py); gathers into the kernels that read them (gather_fusion.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass
from migx_explore.compiler.shape import Shape

from ...blas_plan import plan_gemm
from ...codegen import EPILOGUE_REDUCTIONS
from ...ops import inner_op, split_inputs
from .gather_fusion import drop_index_convert, fuse_gather
from .layernorm_fusion import fuse_layernorm_neighbours
from .widening_epilogue import fuse_widening_epilogue


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
    if p.name == "gpu::gemm" and (len(p.inputs) == 3 or p.module_inputs):
        return "gemm"  # an existing epilogue is composed with the new one
    if p.name == "gpu::precompile_op" and p.op["outputs"] == 1:
        inner = inner_op(p.op["op"]).name
        if inner == "convolution":
            return "conv"  # an existing epilogue (a narrowing convert, entry_convert) is composed
        if inner in EPILOGUE_REDUCTIONS and not p.module_inputs:
            return "layernorm"
    return None


def _copy_body(src: Module, dst: Module, env: dict[int, Instruction]) -> list[Instruction]:
    """Copy a pointwise body into `dst` with its params bound through `env`; returns its outputs."""
    for s in src:
        if s.is_param():
            continue
        if s.is_return():
            return [env[i.id] for i in s.inputs]
        if s.is_literal():
            env[s.id] = dst.add_literal(s.literal)
        else:
            env[s.id] = dst.add_instruction(s.op, [env[i.id] for i in s.inputs])
    raise ValueError(f"{src.name} has no @return")


def build_epilogue(
    ctx,
    src: Module | None,
    inner: Op,
    inputs: list[Instruction],
    x: Instruction,
    first: tuple[Module, list[Instruction]] | None = None,
) -> tuple[Module, list[Instruction]]:
    """A bypass module computing the consumer's body with x0 = the producer's result; returns it
    and the remaining (extra) inputs in the order of its params x1, x2, .... `first` is an
    epilogue the producer already has (its module and extra inputs): it runs first, and the
    consumer's body reads its result in place of x."""
    pre_extras = list(first[1]) if first else []
    extras = pre_extras + [i for i in dict.fromkeys(inputs) if i is not x]
    mod = ctx.create_module(ctx.unique_module_name("main:epilogue"))
    mod.bypass = True
    # the producer's raw result: what an existing epilogue reads (a convolution reading a float32
    # input computes in float32 before its narrowing epilogue), else x's type
    x0 = mod.add_parameter("x0", first[0].params()[0].shape if first else _scalar(x))
    params = [mod.add_parameter(f"x{k + 1}", _scalar(e)) for k, e in enumerate(extras)]
    value = x0
    if first:
        fp = first[0].params()
        value = _copy_body(first[0], mod, {fp[0].id: x0, **{q.id: params[k] for k, q in enumerate(fp[1:])}})[0]
    own = params[len(pre_extras) :]
    slot = {x.id: value, **{e.id: own[k] for k, e in enumerate(extras[len(pre_extras) :])}}
    if src is None:
        mod.add_return([mod.add_instruction(inner, [slot[i.id] for i in inputs])])
        return mod, extras
    mod.add_return(_copy_body(src, mod, {p.id: slot[i.id] for p, i in zip(src.params(), inputs)}))
    return mod, extras


def _as_lens(m: Module, before: Instruction, e: Instruction, lens) -> Instruction | None:
    """`e` viewed with `lens` (an earlier epilogue's input seen through the consumer's reshape):
    a broadcast is redone from its source, a standard value reshaped; None when neither fits."""
    if tuple(e.shape.lens) == tuple(lens):
        return e
    if e.name in ("multibroadcast", "broadcast") and e.inputs[0].shape.ndim <= len(lens):
        src = e.inputs[0].shape.lens
        if all(a in (1, b) for a, b in zip(reversed(src), reversed(lens))):
            return m.insert_instruction(before, Op("multibroadcast", out_lens=list(lens)), [e.inputs[0]])
    if e.shape.standard() and e.shape.elements() == math.prod(lens):
        return m.insert_instruction(before, Op("reshape", dims=list(lens)), [e])
    return None


def _scalar(ins: Instruction) -> Shape:
    return Shape.scalar(ins.shape.type)


@dataclass(frozen=True)
class FuseOps(Pass):
    """Fold a pointwise consumer (bias, activation, residual add, ...) into the GEMM, direct
    convolution or layernorm that produces its input: the producer writes into the consumer's
    buffer and the body runs as its epilogue (inline in a direct-conv or layernorm kernel; an
    in-place kernel right after the BLAS call for GEMMs). MIGraphX gpu::fuse_ops's
    find_*_gemm_pointwise / find_conv_pointwise / find_layernorm_pointwise."""

    name: ClassVar[str] = "fuse_ops"
    fast_math: bool = True

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        changed = False
        # Layernorms first: a pointwise producer used only by the layernorm is better inside
        # its kernel than as the producing GEMM's epilogue (one launch instead of two).
        for ins in list(module):
            if ins.alive:
                changed |= fuse_layernorm_neighbours(module, ins, ctx)
        for ins in list(module):
            if ins.alive:
                with module.program.provenance([ins]):
                    changed |= self._fuse(module, ins, ctx)
        # Gathers last: the kernels that read them are final now (an epilogue or layernorm
        # fusion above would otherwise have to carry a fused gather along).
        for ins in list(module):
            if ins.alive:
                changed |= drop_index_convert(module, ins)
        for ins in list(module):
            if ins.alive:
                changed |= fuse_gather(module, ins, ctx)
        return changed

    def _fuse(self, m: Module, ins: Instruction, ctx) -> bool:
        consumer = _pointwise_consumer(ins)
        if consumer is None:
            return False
        inner, body = consumer
        ins_in, _, outs = split_inputs(ins.op, list(ins.inputs))
        buf = outs[0]
        for x in dict.fromkeys(ins_in):
            # A GEMM's result may reach the consumer through a reshape (exporters flatten to 2-D
            # for the matmul and reshape back before the residual add): the GEMM then writes the
            # consumer's buffer directly, viewed with the product's lens.
            view = x if x.name == "reshape" and list(x.outputs) == [ins] else None
            p = x.inputs[0] if view is not None else x
            kind = _producer_kind(p)
            if kind is None or list(p.outputs) != [ins if view is None else view] or x.shape.lens != ins.shape.lens:
                continue
            # A generated kernel stores whatever its buffer holds, so a layernorm or convolution
            # takes a type-changing consumer too (at fp16, the convert of a model's float output);
            # a half GEMM only when the consumer widens a sum of constants (widening_epilogue).
            if kind == "gemm" and p.shape.type != ins.shape.type:
                if view is None and fuse_widening_epilogue(m, ins, p, body, ins_in, buf, ctx):
                    return True
                continue
            if view is not None and kind != "gemm":
                continue
            if kind == "gemm" and plan_gemm(p.inputs[0].shape, p.inputs[1].shape, buf.shape) is None:
                continue
            first = None
            n_own = 2 if kind == "gemm" else p.op["ninputs"]
            if p.module_inputs:
                pre = [_as_lens(m, ins, e, ins.shape.lens) for e in p.inputs[n_own:-1]]
                if any(e is None for e in pre):
                    continue
                first = (p.module_inputs[0], pre)
            with m.program.provenance([ins, p]):
                epi, extras = build_epilogue(ctx, body, inner, ins_in, x, first)
                if kind == "gemm":
                    new = m.insert_instruction(ins, Op("gpu::gemm"), [p.inputs[0], p.inputs[1], *extras, buf], [epi])
                else:  # the kernel's own inputs, the epilogue's, then the consumer's buffer
                    own = list(p.inputs[:n_own] if p.module_inputs else p.inputs[:-1])
                    op = p.op.with_(ninputs=len(own))
                    new = m.insert_instruction(ins, op, [*own, *extras, buf], [epi])
            m.replace_all_uses(ins, new)
            m.remove_instruction(ins)
            if view is not None:
                m.remove_instruction(view)
            m.remove_instruction(p)
            return True
        return False
