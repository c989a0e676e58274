"""Buffers and literals: replace_allocate, promote_literals, write_literals, sync_device,
preallocate_param, eliminate_allocation, check_context; compile_miopen (disabled)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...compiler.ir import Module
from ...compiler.op import Op
from ...compiler.passes import Pass
from ...compiler.shape import Shape
from .. import kernel_cache
from ..ops import buffer_root

ALIGN = 256  # byte alignment of every buffer in an arena (BLAS and vector loads like it)


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def output_param_name(k: int) -> str:
    return f"main:#output_{k}"


@dataclass(frozen=True)
class ReplaceAllocate(Pass):
    """`allocate` -> `hip::allocate`, except a buffer whose value main returns, which becomes an
    output parameter `main:#output_N` (the executor owns it; results never live in the arena)."""

    name: ClassVar[str] = "replace_allocate"
    offload_copy: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        returned = {}
        ret = module.return_instruction()
        if ret is not None and not self.offload_copy:
            for k, v in enumerate(ret.inputs):
                r = buffer_root(v)
                if r.name == "allocate":
                    returned.setdefault(r.id, k)
        changed = False
        for ins in list(module):
            if ins.name != "allocate":
                continue
            if ins.id in returned:
                new = module.add_parameter(output_param_name(returned[ins.id]), ins.shape)
            else:
                new = module.insert_instruction(ins, Op("hip::allocate", shape=ins.shape))
            module.replace_all_uses(ins, new)
            module.remove_instruction(ins)
            changed = True
        return changed


@dataclass(frozen=True)
class PromoteLiterals(Pass):
    """Literals inside fused bodies are compiled into their kernels as constants, and our IR
    does not let a submodule refer to main, so there is nothing to move up; what MIGraphX gets
    from sharing promoted literals we get by merging identical literals of main, so each is
    uploaded once."""

    name: ClassVar[str] = "promote_literals"
    status: ClassVar[str] = "mapped"
    note: ClassVar[str] = "merges identical literals in main (fused-body literals are kernel constants)"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        seen: dict[tuple, object] = {}
        changed = False
        for ins in list(module):
            if not ins.is_literal():
                continue
            key = (ins.shape, ins.literal.content_hash())
            first = seen.get(key)
            if first is not None and first.literal.same_as(ins.literal):
                module.replace_all_uses(ins, first)
                module.remove_instruction(ins)
                changed = True
            else:
                seen.setdefault(key, ins)
        return changed


@dataclass(frozen=True)
class WriteLiterals(Pass):
    """Each literal main's device code reads gets `hip::hip_copy_literal`: uploaded once when the
    program is finalized, never copied per run."""

    name: ClassVar[str] = "write_literals"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        changed = False
        for k, ins in enumerate(list(module)):
            if not ins.is_literal():
                continue
            users = [u for u in ins.outputs if u.name != "hip::hip_copy_literal"]
            if not users:
                continue
            copy = module.insert_after(ins, Op("hip::hip_copy_literal", id=f"main:@literal:{k}"), [ins])
            for u in users:
                module.replace_instruction(u, inputs=[copy if i is ins else i for i in u.inputs])
            changed = True
        return changed


@dataclass(frozen=True)
class SyncDevice(Pass):
    """Insert `hip::sync_stream` before @return when results come back through
    hip::copy_from_gpu (offload_copy), so the host reads finished data."""

    name: ClassVar[str] = "sync_device"

    def apply_module(self, module: Module, ctx) -> bool:
        ret = module.return_instruction() if module.name == "main" else None
        if ret is None or not any(v.name == "hip::copy_from_gpu" for v in ret.inputs):
            return False
        if any(v.name == "hip::sync_stream" for v in ret.inputs):
            return False
        sync = module.insert_instruction(ret, Op("hip::sync_stream"), list(ret.inputs))
        module.replace_instruction(ret, inputs=[sync] + list(ret.inputs[1:]))
        return True


@dataclass(frozen=True)
class PreallocateParam(Pass):
    """The `scratch` parameter becomes `hip::hip_allocate_memory[id=scratch]`: one arena the
    executor allocates once at finalize."""

    name: ClassVar[str] = "preallocate_param"
    param: str = "scratch"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        for p in module.params():
            if p.param_name == self.param:
                mem = module.insert_after(p, Op("hip::hip_allocate_memory", shape=p.shape, id=self.param))
                module.replace_all_uses(p, mem)
                module.remove_instruction(p)
                return True
        return False


@dataclass(frozen=True)
class EliminateAllocation(Pass):
    """Any `hip::allocate` left (memory_coloring switched off) becomes a `load` from one `memory`
    parameter, each buffer at its own offset: the naive layout, no reuse."""

    name: ClassVar[str] = "eliminate_allocation"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        allocs = [i for i in module if i.name == "hip::allocate"]
        if not allocs:
            return False
        total = sum(aligned(a.shape.bytes()) for a in allocs)
        mem = module.add_parameter("memory", Shape.of("int8", [max(total, 1)]))
        offset = 0
        for a in allocs:
            load = module.insert_instruction(a, Op("load", shape=a.shape, offset=offset), [mem])
            module.replace_all_uses(a, load)
            module.remove_instruction(a)
            offset += aligned(a.shape.bytes())
        return True


@dataclass(frozen=True)
class CheckContext(Pass):
    """Insert `gpu::check_context[target=...]`: the executor refuses to run a program compiled for
    another backend or architecture (target `any` when compiled with no GPU bound)."""

    name: ClassVar[str] = "check_context"
    status: ClassVar[str] = "mapped"
    note: ClassVar[str] = "records backend:arch in gpu::check_context; the executor checks it at finalize"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main" or any(i.name == "gpu::check_context" for i in module):
            return False
        t = kernel_cache.current_target()
        target = f"{t.name}:{t.arch}" if t is not None else "any"
        first = next((i for i in module if not i.is_param()), None)
        module.insert_instruction(first if first is not None else module.end(), Op("gpu::check_context",
                                                                                   target=target))
        return True


@dataclass(frozen=True)
class CompileMiopen(Pass):
    """Stands for MIGraphX's gpu::compile_miopen. migx-explore has no MIOpen: convolutions are
    lowered to generated kernels or im2col + BLAS GEMM instead."""

    name: ClassVar[str] = "compile_miopen"
    status: ClassVar[str] = "disabled"
    note: ClassVar[str] = "no MIOpen: convolutions become generated kernels or im2col + BLAS in compile_ops"

    def apply_module(self, module: Module, ctx) -> bool:
        return False
