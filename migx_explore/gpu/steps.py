"""From a compiled program to the executor's flat step list.

`plan_addresses` gives every value of main a device address (arena offsets, views, literal and
parameter buffers); `build_steps` turns each instruction into zero or more pre-bound steps:
a kernel launch with its argument block packed here, once; the BLAS calls of a GEMM (plus its
epilogue launch); a host op; a copy. Views, loads and the concat alias are free.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Instruction
from migx_explore.compiler.ops.common import norm_axes
from migx_explore.compiler.ops.views import slice_bounds
from migx_explore.compiler.ref import SubmoduleRunner
from migx_explore.compiler.shape import Shape

from .blas_plan import HEURISTIC_ALGO, plan_gemm
from .ops import WRAPPING_OPS, inner_op, output_buffers
from .runtime.base import Backend, GpuError, LaunchSite, Step

FREE_OPS = {
    "load",
    "gpu::concat_alias",
    "hip::sync_stream",
    "identity",
    "get_tuple_elem",
    "gpu::check_context",
    "hip::hip_allocate_memory",
    "hip::hip_copy_literal",
    "hip::allocate",
    "allocate",
}


@dataclass
class StepInfo:
    ins_id: int
    label: str  # e.g. "@12 gpu::code_object"
    kind: str  # kernel | blas | host | copy
    kernel: str  # symbol name, BLAS plan, or host op


@dataclass
class Built:
    steps: list[Step] = field(default_factory=list)
    info: list[StepInfo] = field(default_factory=list)
    host_ops: list[str] = field(default_factory=list)
    keep: list[Any] = field(default_factory=list)  # argument blocks etc., alive as long as the program

    def add(self, step: Step, info: StepInfo) -> None:
        self.steps.append(step)
        self.info.append(info)

    def overlap_next(self) -> bool:
        """Whether the next kernel may be a dependent launch (start while the last step ends).
        Not after a BLAS call that ran its epilogue (bias, residual, activation) in cuBLASLt:
        measured on an H200, those GEMM kernels do not let a successor start early, and the
        programmatic edge then made the gap after them longer (0.51 against 0.29 us per kernel;
        gpt2 fp16 102.5 -> 109.2 us), while after plain GEMMs and generated kernels the gap fell
        to 0.0-0.1 us (bert 108.7 -> 101.0)."""
        return not (self.steps and getattr(self.steps[-1], "fused_epilogue", False))


def nbytes(shape: Shape) -> int:
    return shape.bytes()


def view_offset(ins: Instruction) -> int:
    """Byte offset of a view into its input (only slices move the start)."""
    if ins.name != "slice":
        return 0
    src = ins.inputs[0].shape
    axes = norm_axes(ins.op["axes"], src.ndim, "slice")
    off = sum(
        start * src.strides[ax] for ax, start, _ in slice_bounds(src.lens, axes, ins.op["starts"], ins.op["ends"])
    )
    return off * src.dtype.size


def plan_addresses(main, owned: Callable[[Instruction], int]) -> dict[int, Any]:
    """Address of every value (a list of addresses for multi-output values). `owned(ins)` gives
    the address of an instruction that owns memory (params, arena, literal copies, buffers)."""
    addr: dict[int, Any] = {}
    for ins in main:
        name = ins.name
        if ins.is_return():
            continue
        if (
            ins.is_param()
            or ins.is_literal()
            or name
            in ("hip::hip_allocate_memory", "hip::hip_copy_literal", "hip::allocate", "allocate", "hip::copy_from_gpu")
        ):
            addr[ins.id] = owned(ins)
        elif name == "gpu::check_context":
            addr[ins.id] = 0
        elif name == "load":
            addr[ins.id] = addr[ins.inputs[0].id] + ins.op["offset"]
        elif name == "get_tuple_elem":
            whole = addr[ins.inputs[0].id]  # one address when the tuple has one element (a lowered select_module)
            addr[ins.id] = whole[ins.op["index"]] if isinstance(whole, list) else whole
        elif ins.op.has("view"):
            addr[ins.id] = addr[ins.inputs[0].id] + view_offset(ins)
        elif name in WRAPPING_OPS and ins.op["outputs"] > 1:
            addr[ins.id] = [addr[b.id] for b in output_buffers(ins)]
        else:
            alias = ins.op.spec.output_alias
            if alias is None:
                raise MigxError(
                    f"executor: {name} (#{ins.id}) is not a lowered GPU op; compile with the GPU "
                    "target's backend pipeline first"
                )
            addr[ins.id] = addr[ins.inputs[alias(ins.op, [i.shape for i in ins.inputs])].id]
    return addr


def argblock(addrs: list[int], keep: list) -> int:
    """A `void*[]` whose entries point at the kernel's pointer arguments (built once)."""
    vals = (ctypes.c_void_p * max(len(addrs), 1))(*addrs)
    ptrs = (ctypes.c_void_p * max(len(addrs), 1))(
        *[ctypes.addressof(vals) + k * ctypes.sizeof(ctypes.c_void_p) for k in range(len(addrs))]
    )
    keep.extend((vals, ptrs))
    return ctypes.addressof(ptrs)


QUANT_TYPES = ("int8", "uint8", "float8e4m3fn")


def _generated_gemm(backend: Backend, ins: Instruction, addrs: list[int], stream: Any, out: Built):
    """An 8-bit gpu::gemm the BLAS library refused at finalize: the generated tiled kernel
    instead (compiled here, through the kernel cache), never the host."""
    from . import kernel_cache
    from .codegen import gemm_kernel

    a, b, c = ins.inputs[0], ins.inputs[1], ins.inputs[-1]
    ks = gemm_kernel([a.shape, b.shape, c.shape], ins.op["alpha"])
    kernel_cache.register(ks)
    binary = kernel_cache.compile_many(backend.kernels, [ks])[ks.key]
    module = backend.kernels.load_module(binary)
    out.keep.append(module)  # lives as long as the step list
    step = backend.kernels.make_launch(
        backend.kernels.get_function(module, ks.name),
        ks.global_size // ks.local_size,
        ks.local_size,
        0,
        stream,
        argblock([addrs[0], addrs[1], addrs[-1]], out.keep),
        LaunchSite(ins, tuple(addrs)),
        overlap=out.overlap_next(),
    )
    return step, ks


class HostReader:
    """Moves values between device buffers and numpy for host ops (synchronous)."""

    def __init__(self, backend: Backend, stream: Any):
        self.b, self.s = backend, stream

    def read(self, addr: int, shape: Shape) -> np.ndarray:
        npd = dtypes.np_dtype(shape.type)
        n = shape.element_space()
        buf = np.empty(max(n, 1), npd)
        if n:
            self.b.memory.copy("d2h", buf.ctypes.data, addr, n * npd.itemsize, self.s)
            self.b.streams.sync(self.s)
        return np.array(np.lib.stride_tricks.as_strided(buf, shape.lens, [s * npd.itemsize for s in shape.strides]))

    def write(self, addr: int, shape: Shape, value: np.ndarray) -> None:
        npd = dtypes.np_dtype(shape.type)
        n = shape.element_space()
        if not n:
            return
        if shape.standard():
            data = np.ascontiguousarray(np.broadcast_to(value, shape.lens), dtype=npd)
        else:  # strided destination: read the region, scatter through the strides, write back
            data = np.empty(n, npd)
            self.b.memory.copy("d2h", data.ctypes.data, addr, n * npd.itemsize, self.s)
            self.b.streams.sync(self.s)
            view = np.lib.stride_tricks.as_strided(data, shape.lens, [s * npd.itemsize for s in shape.strides])
            view[...] = value
        self.b.memory.copy("h2d", addr, data.ctypes.data, n * npd.itemsize, self.s)
        self.b.streams.sync(self.s)


def _host_step(reader: HostReader, ins: Instruction, addrs: list[int]) -> Step:
    outs = output_buffers(ins)
    nout = len(outs)

    def step():
        reader.b.streams.sync(reader.s)
        args = [reader.read(a, i.shape) for a, i in zip(addrs[: len(addrs) - nout], ins.inputs)]
        args += [np.zeros(b.shape.lens, dtypes.np_dtype(b.shape.type)) for b in outs]  # buffers: written, not read
        res = ins.op.spec.compute(ins.op, args, ins.shape, SubmoduleRunner(ins))
        results = res if isinstance(res, tuple) else (res,)
        for a, b, r in zip(addrs[len(addrs) - nout :], outs, results):
            reader.write(a, b.shape, np.asarray(r))
        return (0,)

    return step


def build_steps(
    main,
    addr: dict[int, Any],
    backend: Backend,
    stream: Any,
    functions: dict[str, Any],
    blas: Callable[[], Any],
    host_ptr: Callable[[Instruction], int],
) -> Built:
    """Steps for every instruction of main, in order. `functions` maps kernel keys to loaded
    functions; `blas()` gives the BLAS handle (created on first GEMM); host_ptr gives the pinned
    buffer behind an offload_copy param or result."""
    sm = _StepMaker(backend, stream, functions, blas, Built())
    out = sm.out
    reader = HostReader(backend, stream)
    for k, ins in enumerate(main):
        name = ins.name
        label = f"@{k} {name}"
        if ins.is_builtin() or name in FREE_OPS or ins.op.has("view"):
            continue
        addrs = [addr[i.id] for i in ins.inputs]
        site = LaunchSite(ins, tuple(addrs))
        if name == "gpu::code_object":
            g, loc = ins.op["global"], ins.op["local"]
            if g == 0:
                continue
            out.add(
                sm.launch(ins.op["key"], g, loc, addrs, site), StepInfo(ins.id, label, "kernel", ins.op["symbol_name"])
            )
        elif name == "gpu::gemm" and ins.op["kernel_key"]:  # the generated kernel: product and epilogue
            step = sm.launch(ins.op["kernel_key"], ins.op["kernel_global"], ins.op["kernel_local"], addrs, site)
            out.add(step, StepInfo(ins.id, label, "kernel", ins.op["kernel_symbol"]))
        elif name == "gpu::gemm":
            sm.blas_gemm(ins, addrs, label)
        elif name == "gpu::host_op":
            out.add(_host_step(reader, ins, addrs), StepInfo(ins.id, label, "host", ins.op["op"]))
            why = ins.op["why"]
            out.host_ops.append(f"#{ins.id} {inner_op(ins.op['op']).name}" + (f" ({why})" if why else ""))
        elif name == "hip::copy_to_gpu":
            src = host_ptr(ins.inputs[0])
            out.add(
                backend.memory.make_copy("h2d", addrs[-1], src, nbytes(ins.shape), stream),
                StepInfo(ins.id, label, "copy", "h2d"),
            )
        elif name == "hip::copy_from_gpu":
            out.add(
                backend.memory.make_copy("d2h", host_ptr(ins), addrs[0], nbytes(ins.shape), stream),
                StepInfo(ins.id, label, "copy", "d2h"),
            )
        elif name == "gpu::precompile_op":
            raise GpuError(f"executor: #{ins.id} was never compiled (compile_ops is switched off)")
        else:
            raise GpuError(f"executor: no GPU implementation for {name} (#{ins.id})")
    return out


@dataclass
class _StepMaker:
    """What build_steps' launches and BLAS calls share: the backend, stream, loaded kernels, the
    BLAS handle's maker and the steps built so far."""

    backend: Backend
    stream: Any
    functions: dict[str, Any]
    blas: Callable[[], Any]
    out: Built

    def launch(self, key: str, global_size: int, local: int, addrs: list[int], site: LaunchSite) -> Step:
        """A generated kernel's launch (argument block packed once), dependent where allowed."""
        return self.backend.kernels.make_launch(
            self.functions[key],
            global_size // local,
            local,
            0,
            self.stream,
            argblock(addrs, self.out.keep),
            site,
            overlap=self.out.overlap_next(),
        )

    def blas_gemm(self, ins: Instruction, addrs: list[int], label: str) -> None:
        """The BLAS call (the generated kernel where the library refuses an 8-bit or fp8 one), then
        the epilogue kernel unless the call fused it."""
        out = self.out
        plan = plan_gemm(ins.inputs[0].shape, ins.inputs[1].shape, ins.inputs[-1].shape)
        if plan is None:
            raise GpuError(f"executor: gemm #{ins.id} has no BLAS plan (run compile_blas)")
        # Bias and residual inputs the BLAS call may add itself (compile_blas marked them).
        bias, c_in = (addrs[2 + ins.op[k]] if ins.op[k] >= 0 else None for k in ("blas_bias", "blas_c"))
        act = ins.op["blas_act"]
        extra = {"bias": bias, "c_in": c_in, "act": act} if bias is not None or c_in is not None or act else {}
        if ins.op["algo"] == HEURISTIC_ALGO:  # compile_blas under skip_benchmark: nothing timed
            extra["tune"] = False
        try:
            step, note = self.backend.blas.make_gemm(
                self.blas(), plan, addrs[0], addrs[1], addrs[-1], ins.op["alpha"], **extra
            )
        except GpuError as e:
            if plan.dtype not in QUANT_TYPES:
                raise
            step, ks = _generated_gemm(self.backend, ins, addrs, self.stream, out)
            out.add(step, StepInfo(ins.id, label, "kernel", f"{ks.name} (BLAS refused: {e})"))
        else:
            out.add(step, StepInfo(ins.id, label, "blas", plan.describe() + (f" [{note}]" if note else "")))
        if ins.module_inputs and not getattr(step, "fused_epilogue", False):
            key = ins.op["epilogue_key"]
            if not key:
                raise GpuError(f"executor: gemm #{ins.id} has an epilogue but no kernel (run compile_ops)")
            ep_addrs = [addrs[-1]] + addrs[2:-1]
            site = LaunchSite(ins, tuple(ep_addrs), True)
            step = self.launch(key, ins.op["epilogue_global"], ins.op["epilogue_local"], ep_addrs, site)
            out.add(step, StepInfo(ins.id, label + " epilogue", "kernel", ins.op["epilogue_symbol"]))
