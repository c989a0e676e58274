"""Kernel generation: one C++ source per kernel-wrapping instruction (see `generate`).

Each op declares its GPU code in its spec (compiler/op.py `GpuCode`); this layer implements the
declarations: a `{family: generator}` table for `GpuCode.kernel(family)`, and the pointwise
generator, which writes `GpuCode.pointwise` ops from their expression or from expr.ROWS.
`gpu_code_problems` says what an op's declaration asks for that this layer does not provide.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...compiler.ir import Instruction, Module
from ...compiler.op import Op, OpSpec, contract_problems, function_fingerprint, get_spec, parse_expression
from ...compiler.shape import Shape
from ..ops import MODULE_OPS, inner_op, split_inputs
from .attention import attention_kernel
from .common import CodegenUnsupported, KernelSource
from .expr import ROWS
from .gemm import gemm_kernel
from .indexing import GENERATORS as _INDEXING_GENERATORS
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
from .recurrent import lstm_recurrence_kernel
from .reduce import reduce_kernel

__all__ = ["EPILOGUE_REDUCTIONS", "GENERATORS", "LIBRARY_FAMILIES", "CodegenUnsupported", "KernelRequest",
           "KernelSource", "epilogue_kernel", "gemm_kernel", "generate", "gpu_code_problems", "kernel_family",
           "op_contract_problems", "register_generator"]


@dataclass(frozen=True)
class KernelRequest:
    """What a generator gets: the wrapped op, every param's shape (inputs, then outputs), the
    number of outputs, the op's own submodule (pointwise, fused_reduce) or a GEMM/conv epilogue."""

    inner: Op
    shapes: list[Shape]
    nout: int
    module: Module | None
    epilogue: Module | None
    modules: list[Module]


Generator = Callable[[KernelRequest], KernelSource]
# Reductions whose kernel takes a pointwise epilogue (fuse_ops' find_layernorm_pointwise).
EPILOGUE_REDUCTIONS = ("layernorm", "add_layernorm")


def _reduce(r: KernelRequest) -> KernelSource:
    # With an epilogue, the inputs are the op's own, then the epilogue's extras (its params x1..).
    extras = len(r.epilogue.params()) - 1 if r.epilogue is not None else 0
    return reduce_kernel(r.inner, r.shapes, r.nout, r.module, r.epilogue, len(r.shapes) - r.nout - extras)


def _attention(r: KernelRequest) -> KernelSource:
    if r.inner["tag"] != "attention" or r.module is None:
        raise CodegenUnsupported(f"no kernel for group[tag={r.inner['tag']}]")
    return attention_kernel(r.module, r.shapes)


GENERATORS: dict[str, Generator] = {
    "pointwise": lambda r: pointwise_kernel(r.inner, r.shapes, r.nout, r.module),
    "reduce": _reduce,
    "attention": _attention,  # group[tag=attention] from fuse_attention
    "convolution": lambda r: conv_kernel(r.inner, r.shapes, r.epilogue),
    "im2col": lambda r: im2col_kernel(r.inner, r.shapes),
    "pooling": lambda r: pooling_kernel(r.inner, r.shapes),
    "resize": lambda r: resize_kernel(r.inner, r.shapes),
    "concat": lambda r: concat_kernel(r.inner, r.shapes),
    "gather": lambda r: gather_kernel(r.inner, r.shapes),
    "pad": lambda r: pad_kernel(r.inner, r.shapes),
    "reverse": lambda r: reverse_kernel(r.inner, r.shapes),
    "fused_concat": lambda r: fused_concat_kernel(r.inner, r.shapes, r.modules, r.nout),
    "concat_past_present": lambda r: append_kernel(r.inner, r.shapes),
    "lstm_recurrence": lambda r: lstm_recurrence_kernel(r.inner, r.shapes),  # rewrite_rnn's fused LSTM direction
    # quant_dot where 8-bit BLAS cannot take it (MIGX_WIDEN_8BIT=0): tiled, int32 / fp32 accumulation
    "quant_gemm": lambda r: gemm_kernel(r.shapes),
}
# gpu/codegen/indexing.py's families (topk, gathernd, scatter, scans, nonzero, ...) take (op, shapes).
GENERATORS.update({family: (lambda r, g=gen: g(r.inner, r.shapes)) for family, gen in _INDEXING_GENERATORS.items()})
# `gemm` is vendor BLAS for float types (lowering sends float dots there first); an integer dot
# that reaches code generation gets the generated integer kernel.
GENERATORS["gemm"] = GENERATORS["int_dot"]
# Families that lowering maps to a library call instead of a generated kernel.
LIBRARY_FAMILIES: dict[str, str] = {"gemm": "vendor BLAS (cuBLAS / hipBLAS) through gpu::gemm"}


def register_generator(family: str, generator: Generator) -> None:
    """Add a kernel family. Registering the same generator again is a no-op (a re-run cell)."""
    old = GENERATORS.get(family)
    if old is not None and function_fingerprint(old) != function_fingerprint(generator):
        raise ValueError(f"kernel family {family!r} already has a different generator ({old.__qualname__} in "
                         f"{old.__module__}); pick another family name")
    GENERATORS[family] = generator


def kernel_family(name: str) -> str | None:
    """The generator family an op's declared GPU code names (None: no generated kernel)."""
    code = get_spec(name).gpu
    if code is None:
        return None
    if code.kind == "pointwise":
        return "pointwise"
    if code.kind == "kernel" and code.detail in GENERATORS:
        return code.detail
    return None


def _expression_ops(tree) -> list[str]:
    if not isinstance(tree, tuple):
        return []
    return [tree[0], *(n for a in tree[1:] for n in _expression_ops(a))]


def gpu_code_problems(spec: OpSpec) -> list[str]:
    """What `spec.gpu` declares that this layer does not implement."""
    code = spec.gpu
    if code is None or code.kind in ("host", "none"):
        return []
    if code.kind == "kernel":
        if code.detail in LIBRARY_FAMILIES:
            return []
        if code.detail not in GENERATORS:
            return [f"GpuCode.kernel({code.detail!r}) names no generator; register one with "
                    f"gpu.codegen.register_generator({code.detail!r}, fn) or use a family of: "
                    f"{', '.join(sorted(GENERATORS))}"]
        if code.detail == "pointwise" and spec.name not in ROWS and spec.name not in MODULE_OPS:
            return [f"GpuCode.kernel('pointwise') but gpu/codegen/expr.py ROWS has no row for {spec.name}"]
        return []
    if not code.detail:
        if spec.name not in ROWS:
            return [f"GpuCode.pointwise() without an expression needs a row for {spec.name} in gpu/codegen/expr.py "
                    f"ROWS; or write it over existing ops, e.g. GpuCode.pointwise('mul(x, sigmoid(x))')"]
        return []
    missing = []
    for name in _expression_ops(parse_expression(code.detail)):
        try:
            sub = get_spec(name)
        except Exception:  # noqa: BLE001 - an unknown op is the problem reported
            missing.append(f"{name} (not an op)")
            continue
        if name not in ROWS and not (sub.gpu and sub.gpu.kind == "pointwise" and sub.gpu.detail) or name == spec.name:
            missing.append(name)
    return [f"pointwise expression {code.detail!r} uses ops without elementwise code: {', '.join(missing)}"] \
        if missing else []


def op_contract_problems(name: str) -> list[str]:
    """Everything the op contract misses for `name`: the compiler's half and this layer's."""
    spec = get_spec(name)
    return contract_problems(spec) + gpu_code_problems(spec)


def generate(ins: Instruction) -> KernelSource:
    """The kernel for a `gpu::precompile_op` (params: every input of the instruction, in order)."""
    op = ins.op
    inner = inner_op(op["op"])
    shapes = [i.shape for i in ins.inputs]
    split_inputs(op, shapes)  # validates the input / output split
    mods = list(ins.module_inputs)
    own = inner.name in MODULE_OPS
    family = kernel_family(inner.name)
    generator = GENERATORS.get(family) if family else None
    if generator is None:
        code = inner.spec.gpu
        raise CodegenUnsupported(f"no kernel generator for {inner.name} (declared GPU code: {code})")
    epilogue = mods[0] if not own and mods else None
    if epilogue is not None and family != "convolution" and inner.name not in EPILOGUE_REDUCTIONS:
        raise CodegenUnsupported(f"epilogue on {inner.name}")
    ks = generator(KernelRequest(inner, shapes, op["outputs"], mods[0] if own and mods else None, epilogue, mods))
    if not ks.name.isidentifier():  # pragma: no cover - generators build identifier names
        raise CodegenUnsupported(f"kernel name {ks.name!r} is not an identifier")
    return ks

