"""eliminate_data_type, eliminate_data_type_for_gpu and propagate_precision (MIGraphX
src/eliminate_data_type.cpp, src/targets/gpu/eliminate_data_type_for_gpu.cpp,
src/propagate_precision.cpp)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import dtypes
from ..ir import Instruction, Module
from ..op import Op
from .base import Pass, make_pass, pass_registry
from .cleanup import DeadCodeElimination

# Ops eliminate_data_type leaves alone unless named explicitly (MIGraphX's skip_op_names).
SKIP_OPS = frozenset({"convert", "get_tuple_elem", "if", "loop", "roialign", "nonmaxsuppression", "scatternd_add",
                      "scatternd_mul", "scatternd_none", "select_module"})


def convert_to_supported(module: Module, ins: Instruction, unsupported: frozenset[str], target: str) -> bool:
    """Compute `ins` in `target`: convert its unsupported-typed inputs, convert the result back."""
    if ins.module_inputs or ins.shape.is_tuple:
        return False
    if not any(i.shape.type in unsupported for i in ins.inputs):
        return False
    with module.program.provenance([ins]):
        args = [module.insert_instruction(ins, Op("convert", target_type=target), [i])
                if i.shape.type in unsupported else i for i in ins.inputs]
        out = module.insert_instruction(ins, ins.op, args)
        if out.shape.type != ins.shape.type:
            out = module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [out])
    module.replace_all_uses(ins, out)
    module.remove_instruction(ins)
    return True


@dataclass(frozen=True)
class EliminateDataType(Pass):
    """Wrap the listed ops (or all) that read an unsupported type in converts so they compute in
    target_type; the result is converted back to the type users expect."""

    name: ClassVar[str] = "eliminate_data_type"
    unsupported_types: tuple[str, ...] = ()
    target_type: str = "float32"
    unsupported_ops: tuple[str, ...] = ("all",)

    def apply_module(self, module: Module, ctx) -> bool:
        if not self.unsupported_types:
            return False
        bad = frozenset(dtypes.dtype(t).name for t in self.unsupported_types)
        target = dtypes.dtype(self.target_type).name
        every = "all" in self.unsupported_ops
        changed = False
        for ins in list(module):
            if ins.is_builtin() or (ins.name in SKIP_OPS and ins.name not in self.unsupported_ops):
                continue
            if every or ins.name in self.unsupported_ops:
                changed = convert_to_supported(module, ins, bad, target) or changed
        return changed


# Ops whose 64-bit integer inputs are indices into memory, so they always fit in 32 bits. Other ops
# keep 64-bit integers: a sum or a product may need them, and converting would change results.
INDEX_OPS = ("gather", "gathernd", "onehot", "scatter_none", "scatter_add", "scatter_mul", "scatter_min",
             "scatter_max", "scatternd_none", "scatternd_add", "scatternd_mul", "scatternd_min", "scatternd_max")
GEMM_CONV = ("dot", "convolution")
# Integer and bool dot / convolution have no device kernel (BLAS and the generated convolutions
# compute in floating point); int8 goes through quant_dot / quant_convolution instead.
NON_FLOAT_GEMM = ("bool", "uint8", "uint16", "int16", "int32", "uint32", "int64", "uint64")


@dataclass(frozen=True)
class EliminateDataTypeForGpu(Pass):
    """MIGraphX's gpu::eliminate_data_type_for_gpu: several eliminate_data_type runs (children in
    the trace). With disable_64bit (fast_math): double -> float everywhere, and int64 -> int32 /
    uint64 -> uint32 where the values are indices (MIGraphX converts more widely; we keep
    arithmetic in 64 bit so example models stay exact). Always: integer/bool dot and convolution
    compute in float. bf16 stays (the devices we target have bf16), and there are no fp8 types."""

    name: ClassVar[str] = "eliminate_data_type_for_gpu"
    status: ClassVar[str] = "mapped"
    note: ClassVar[str] = ("double -> float everywhere but int64 -> int32 only for index inputs; bf16 is kept "
                           "and there are no fp8 steps")
    disable_64bit: bool = False

    def steps(self) -> list[EliminateDataType]:
        out = []
        if self.disable_64bit:
            out += [EliminateDataType(("float64",), "float32"),
                    EliminateDataType(("int64",), "int32", INDEX_OPS),
                    EliminateDataType(("uint64",), "uint32", INDEX_OPS)]
        out.append(EliminateDataType(NON_FLOAT_GEMM, "float32", GEMM_CONV))
        return out

    def apply_module(self, module: Module, ctx) -> bool:
        return ctx.run_passes(self.steps())


# ---- propagate_precision -----------------------------------------------------------------------
def _rank(t: str) -> tuple[bool, int]:
    d = dtypes.dtype(t)
    return (d.is_float, d.size)


def _higher(a: str, b: str) -> bool:
    """a is a higher precision of the same kind (float vs integral) than b."""
    da, db = dtypes.dtype(a), dtypes.dtype(b)
    return da.is_float == db.is_float and da.size > db.size


def _upgradable(ins: Instruction) -> bool:
    return (ins.name.startswith("reduce_") or ins.op.has("pointwise")) and not ins.module_inputs \
        and ins.name != "convert"


def _non_scalar_const(x: Instruction) -> bool:
    return not (x.shape.elements() == 1 and x.can_eval())


def _next_input(ins: Instruction) -> Instruction | None:
    """The one input that carries the data (scalar constants aside)."""
    if len(ins.inputs) == 1:
        return ins.inputs[0]
    data = list(dict.fromkeys(i for i in ins.inputs if _non_scalar_const(i)))
    return data[0] if len(data) == 1 else None


def _adjacent_inputs(convert: Instruction) -> list[Instruction]:
    out, x = [], convert.inputs[0]
    while _upgradable(x) and x not in out:
        nxt = _next_input(x)
        if nxt is None:
            break
        out.append(x)
        x = nxt
    return out


def _adjacent_outputs(convert: Instruction) -> list[Instruction]:
    out: list[Instruction] = []
    stack = [convert]
    while stack:
        x = stack.pop()
        for u in x.outputs:
            if _upgradable(u) and u not in out and _next_input(u) is x:
                out.append(u)
                stack.append(u)
    return out


def find_upgrades(module: Module) -> dict[int, tuple[Instruction, str]]:
    result: dict[int, tuple[Instruction, str]] = {}
    for c in module:
        if c.name != "convert":
            continue
        src, dst = c.inputs[0].shape.type, c.shape.type
        if src == "bool" or dst == "bool" or dtypes.dtype(src).is_float != dtypes.dtype(dst).is_float:
            continue  # MIGraphX stops where a convert crosses between integral and floating types
        if _higher(dst, src):
            group, t = _adjacent_inputs(c), dst
        elif _higher(src, dst):
            group, t = _adjacent_outputs(c), src
        else:
            continue
        for ins in group:
            prev = result.get(ins.id)
            if prev is None or _rank(t) > _rank(prev[1]):
                result[ins.id] = (ins, t)
    return result


@dataclass(frozen=True)
class PropagatePrecision(Pass):
    """Compute the elementwise/reduce neighbours of an up- or down-cast in the higher precision
    (fp16 -> exp -> reduce_sum -> convert(float) computes exp and reduce_sum in float), then let
    eliminate_convert fold the convert pairs this leaves."""

    name: ClassVar[str] = "propagate_precision"

    def apply_module(self, module: Module, ctx) -> bool:
        downs: dict[int, Instruction] = {}  # convert(high -> low) made here, by id

        def arg(i: Instruction, t: str) -> Instruction:
            if i.name == "convert" and i.inputs[0].shape.type == t:
                return i.inputs[0]  # skip the high -> low -> high round trip (eliminate_convert's job in MIGraphX)
            if i.shape.type == t:
                return i
            return module.insert_instruction(ins, Op("convert", target_type=t), [i])

        for ins, t in find_upgrades(module).values():
            if not ins.alive or ins.shape.type == t or ins.shape.is_tuple:
                continue
            with module.program.provenance([ins]):
                up = module.insert_instruction(ins, ins.op, [arg(i, t) for i in ins.inputs])
                down = module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [up])
            downs[down.id] = down
            module.replace_all_uses(ins, down)
            module.remove_instruction(ins)
        if not downs:
            return False
        # convert(convert(high -> low) -> high): the original upcast now reads our downcast.
        for d in downs.values():
            for u in list(d.outputs):
                if u.name == "convert" and u.shape.type == d.inputs[0].shape.type:
                    module.replace_all_uses(u, d.inputs[0])
        if "eliminate_convert" in pass_registry():
            ctx.run_pass(make_pass("eliminate_convert"))
        ctx.run_pass(DeadCodeElimination())
        return True
