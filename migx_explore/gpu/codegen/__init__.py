"""Kernel generation: one C++ source per kernel-wrapping instruction (see `generate`).

Each op declares its GPU code in its spec (compiler/op.py `GpuCode`); this layer implements the
declarations: a `{family: generator}` table for `GpuCode.kernel(family)`, and the pointwise
generator, which writes `GpuCode.pointwise` ops from their expression or from expr.ROWS.
`gpu_code_problems` says what an op's declaration asks for that this layer does not provide.
"""

from __future__ import annotations

from migx_explore.compiler.ir import Instruction
from migx_explore.compiler.op import OpSpec, contract_problems, function_fingerprint, get_spec, parse_expression

from ..ops import MODULE_OPS, gather_pairs, inner_op, split_inputs
from .attention import GENERATORS as ATTENTION_GENERATORS
from .common import CodegenUnsupported, KernelRequest, KernelSource
from .common import RequestGenerator as Generator
from .expr import ROWS
from .gemm import GENERATORS as GEMM_GENERATORS
from .gemm import gemm_kernel
from .indexing import GENERATORS as INDEXING_GENERATORS
from .nn import GENERATORS as NN_GENERATORS
from .pointwise import GENERATORS as POINTWISE_GENERATORS
from .pointwise import epilogue_kernel
from .recurrent import GENERATORS as RECURRENT_GENERATORS
from .reduce import EPILOGUE_REDUCTIONS
from .reduce import GENERATORS as REDUCE_GENERATORS

__all__ = [
    "EPILOGUE_REDUCTIONS",
    "GATHER_FAMILIES",
    "GENERATORS",
    "LIBRARY_FAMILIES",
    "CodegenUnsupported",
    "KernelRequest",
    "KernelSource",
    "epilogue_kernel",
    "gemm_kernel",
    "generate",
    "gpu_code_problems",
    "kernel_family",
    "op_contract_problems",
    "register_generator",
]


def _merge(*tables: dict[str, Generator]) -> dict[str, Generator]:
    """One {family: generator} table from the modules' own tables (a family named twice is an error)."""
    out: dict[str, Generator] = {}
    for table in tables:
        for family, gen in table.items():
            if family in out:
                raise ValueError(f"kernel family {family!r} has two generators")
            out[family] = gen
    return out


# Each codegen module keeps the table of its kernel families beside their code; a new family is
# a generator and a row in its module (or register_generator from anywhere, e.g. a notebook).
GENERATORS: dict[str, Generator] = _merge(
    POINTWISE_GENERATORS,
    REDUCE_GENERATORS,
    RECURRENT_GENERATORS,
    ATTENTION_GENERATORS,
    NN_GENERATORS,
    GEMM_GENERATORS,
    INDEXING_GENERATORS,
)
# `gemm` is vendor BLAS for float types (lowering sends float dots there first); an integer dot
# that reaches code generation gets the generated integer kernel.
GENERATORS["gemm"] = GENERATORS["int_dot"]
# Families whose generators read an input through a fused gather (KernelRequest.gathers).
GATHER_FAMILIES = ("pointwise", "reduce")
# Families that lowering maps to a library call instead of a generated kernel.
LIBRARY_FAMILIES: dict[str, str] = {"gemm": "vendor BLAS (cuBLAS / hipBLAS) through gpu::gemm"}


def register_generator(family: str, generator: Generator) -> None:
    """Add a kernel family. Registering the same generator again is a no-op (a re-run cell)."""
    old = GENERATORS.get(family)
    if old is not None and function_fingerprint(old) != function_fingerprint(generator):
        raise ValueError(
            f"kernel family {family!r} already has a different generator ({old.__qualname__} in "
            f"{old.__module__}); pick another family name"
        )
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
            return [
                f"GpuCode.kernel({code.detail!r}) names no generator; register one with "
                f"gpu.codegen.register_generator({code.detail!r}, fn) or use a family of: "
                f"{', '.join(sorted(GENERATORS))}"
            ]
        if code.detail == "pointwise" and spec.name not in ROWS and spec.name not in MODULE_OPS:
            return [f"GpuCode.kernel('pointwise') but gpu/codegen/expr.py ROWS has no row for {spec.name}"]
        return []
    if not code.detail:
        if spec.name not in ROWS:
            return [
                f"GpuCode.pointwise() without an expression needs a row for {spec.name} in gpu/codegen/expr.py "
                f"ROWS; or write it over existing ops, e.g. GpuCode.pointwise('mul(x, sigmoid(x))')"
            ]
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
    return (
        [f"pointwise expression {code.detail!r} uses ops without elementwise code: {', '.join(missing)}"]
        if missing
        else []
    )


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
    gathers = tuple(gather_pairs(op))
    if gathers and family not in GATHER_FAMILIES:
        raise CodegenUnsupported(f"a fused gather in a {family} kernel")
    module = mods[0] if own and mods else None
    ks = generator(KernelRequest(inner, shapes, op["outputs"], module, epilogue, mods, gathers))
    if not ks.name.isidentifier():  # pragma: no cover - generators build identifier names
        raise CodegenUnsupported(f"kernel name {ks.name!r} is not an identifier")
    return ks
