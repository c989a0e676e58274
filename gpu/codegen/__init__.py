"""Kernel generation: one C++ source per kernel-wrapping instruction (see `generate`)."""

from __future__ import annotations

from ...compiler.ir import Instruction
from ..ops import MODULE_OPS, inner_op, split_inputs
from .attention import attention_kernel
from .common import CodegenUnsupported, KernelSource, sanitize
from .nn import conv_kernel, im2col_kernel, pooling_kernel, resize_kernel
from .pointwise import (
    append_kernel,
    concat_kernel,
    epilogue_kernel,
    fused_concat_kernel,
    gather_kernel,
    pad_kernel,
    pointwise_kernel,
    reverse_kernel,
)
from .reduce import REDUCE_OPS, reduce_kernel

__all__ = ["EPILOGUE_REDUCTIONS", "CodegenUnsupported", "KernelSource", "epilogue_kernel", "generate", "kernel_family"]

_REDUCTIONS = set(REDUCE_OPS) | {"softmax", "logsoftmax", "argmax", "argmin", "fused_reduce", "split_fused_reduce",
                                  "layernorm", "add_layernorm"}
# Reductions whose kernel takes a pointwise epilogue (fuse_ops' find_layernorm_pointwise).
EPILOGUE_REDUCTIONS = ("layernorm", "add_layernorm")
_OWN_FAMILY = ("convolution", "gpu::im2col", "pooling", "resize", "concat", "gather", "pad", "reverse", "fused_concat",
               "concat_past_present")


def kernel_family(name: str) -> str | None:
    """Which generator handles an op name (None: no generated kernel, the op runs on the host)."""
    if name == "group":  # fuse_attention's groups; generate() checks the tag
        return "attention"
    if name == "pointwise" or name in ("contiguous", "layout"):
        return "pointwise"
    if name in _REDUCTIONS:
        return "reduce"
    if name in _OWN_FAMILY:
        return name
    if elementwise_supported_name(name):
        return "pointwise"
    return None


def elementwise_supported_name(name: str) -> bool:
    from .expr import ROWS

    return name in ROWS


def generate(ins: Instruction) -> KernelSource:
    """The kernel for a `gpu::precompile_op` (params: every input of the instruction, in order)."""
    op = ins.op
    inner = inner_op(op["op"])
    shapes = [i.shape for i in ins.inputs]
    nout = op["outputs"]
    ins_in, extras, outs = split_inputs(op, shapes)
    mods = ins.module_inputs
    own = inner.name in MODULE_OPS
    module = mods[0] if own and mods else None
    epilogue = mods[0] if not own and mods else None
    family = kernel_family(inner.name)
    if epilogue is not None and family != "convolution" and inner.name not in EPILOGUE_REDUCTIONS:
        raise CodegenUnsupported(f"epilogue on {inner.name}")
    if family == "pointwise":
        ks = pointwise_kernel(inner, shapes, nout, module)
    elif family == "reduce":
        ks = reduce_kernel(inner, shapes, nout, module, epilogue, op["ninputs"])
    elif family == "convolution":
        ks = conv_kernel(inner, shapes, epilogue)
    elif family == "gpu::im2col":
        ks = im2col_kernel(inner, shapes)
    elif family == "pooling":
        ks = pooling_kernel(inner, shapes)
    elif family == "resize":
        ks = resize_kernel(inner, shapes)
    elif family == "concat":
        ks = concat_kernel(inner, shapes)
    elif family == "gather":
        ks = gather_kernel(inner, shapes)
    elif family == "concat_past_present":
        ks = append_kernel(inner, shapes)
    elif family == "pad":
        ks = pad_kernel(inner, shapes)
    elif family == "reverse":
        ks = reverse_kernel(inner, shapes)
    elif family == "attention":
        if inner["tag"] != "attention" or module is None:
            raise CodegenUnsupported(f"no kernel for group[tag={inner['tag']}]")
        ks = attention_kernel(module, shapes)
    elif family == "fused_concat":
        ks = fused_concat_kernel(inner, shapes, list(mods))
    else:
        raise CodegenUnsupported(f"no kernel generator for {inner.name}")
    del ins_in, extras, outs
    if sanitize(ks.name) != ks.name:  # pragma: no cover - generators build identifier names
        raise CodegenUnsupported(f"kernel name {ks.name!r} is not an identifier")
    return ks
