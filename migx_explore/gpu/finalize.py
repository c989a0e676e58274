"""Finalize: turn a compiled (backend-lowered) program into everything a run needs, in one object.

`finalize(program, backend)` checks the target, compiles and loads every kernel, allocates the
arena, parameter and output buffers and uploads literals, sets up BLAS (workspace set here,
before any capture), pre-packs every launch's argument block and builds the input/output staging
copies. The result, `Finalized`, is the whole state of a finalized program; after it nothing is
allocated, and `Resources.free()` releases it all together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Instruction, Program
from migx_explore.compiler.shape import Shape

from . import kernel_cache
from .runtime import Backend, GpuError
from .runtime.base import Step
from .steps import Built, build_steps, plan_addresses

BLAS_WORKSPACE = 32 << 20
INTERNAL_PARAMS = ("scratch", "memory")


def is_output_param(name: str) -> bool:
    return name.startswith("main:#output_")


@dataclass
class Resources:
    """Everything on the device a finalized program (and any graph of it) uses; freed together."""

    backend: Backend
    stream: Any = None
    device: list[int] = field(default_factory=list)
    host: list[int] = field(default_factory=list)
    modules: list[Any] = field(default_factory=list)
    blas: Any = None
    events: list[Any] = field(default_factory=list)

    def free(self) -> None:
        b = self.backend
        with contextlib.suppress(GpuError):
            if self.stream is not None:
                b.streams.sync(self.stream)
        for e in self.events:
            b.streams.event_destroy(e)
        if self.blas is not None:
            b.blas.destroy(self.blas)
        for m in self.modules:
            b.kernels.unload_module(m)
        for p in self.device:
            b.memory.free(p)
        for p in self.host:
            b.memory.host_free(p)
        if self.stream is not None:
            b.streams.destroy(self.stream)
        self.device, self.host, self.modules, self.events = [], [], [], []
        self.blas = self.stream = None


@dataclass
class Finalized:
    """The planned state of a finalized program (built once by `finalize`)."""

    program: Program
    resources: Resources
    inputs: dict[str, Shape]  # user inputs by parameter name
    addresses: dict[int, Any]  # device address of every value, by instruction id
    built: Built  # the step list
    stage_in: dict[str, np.ndarray]  # pinned host buffers a run writes its inputs into
    in_steps: list[Step]  # their copies to the device (empty with offload_copy: the program copies)
    stage_out: list[np.ndarray]  # pinned host buffers the outputs land in
    out_steps: list[Step]
    output_shapes: list[Shape]
    offload: bool  # the program copies its own inputs and outputs (offload_copy)

    @property
    def stream(self) -> Any:
        return self.resources.stream


def finalize(program: Program, backend: Backend, external: Mapping[str, int] | None = None) -> Finalized:
    """Everything a run of `program` needs on `backend` (see the module docstring). `external`
    binds params to caller-owned device buffers (used in place, never staged, never freed here)."""
    backend.make_current()
    main = program.main
    check_target(main, backend)
    res = Resources(backend)
    try:
        return _Finalizer(program, backend, res, dict(external or {})).build()
    except BaseException:
        res.free()
        raise


def check_target(main, backend: Backend) -> None:
    for ins in main:
        if ins.name == "gpu::check_context":
            t = ins.op["target"]
            here = f"{backend.name}:{backend.arch}"
            if t not in ("any", here):
                raise MigxError(f"program was compiled for {t} but runs on {here}; compile it again")


class _Finalizer:
    """The steps of finalize, sharing the buffers they allocate."""

    def __init__(self, program: Program, backend: Backend, res: Resources, external: dict[str, int]):
        self.program, self.b, self.res, self.external = program, backend, res, external
        self.inputs: dict[str, Shape] = {}
        self.param_dev: dict[str, int] = {}
        self.host_bufs: dict[int, tuple[int, np.ndarray]] = {}
        self.owned: dict[int, int] = {}
        self.offload = any(i.name == "hip::copy_to_gpu" for i in program.main)

    def build(self) -> Finalized:
        b, res, main = self.b, self.res, self.program.main
        res.stream = b.streams.create()
        addr = plan_addresses(main, self.own)
        functions = self.load_kernels(sorted(kernel_cache.kernel_keys(self.program)))

        def blas() -> Any:
            if res.blas is None:
                res.blas = b.blas.create(res.stream, self.dev(BLAS_WORKSPACE), BLAS_WORKSPACE)
            return res.blas

        built = build_steps(main, addr, b, res.stream, functions, blas, self.pinned)
        stage_in, in_steps = self.input_staging()
        stage_out, out_steps, out_shapes = self.output_staging(addr)
        b.streams.sync(res.stream)
        return Finalized(
            self.program,
            res,
            self.inputs,
            addr,
            built,
            stage_in,
            in_steps,
            stage_out,
            out_steps,
            out_shapes,
            self.offload,
        )

    def dev(self, nbytes: int) -> int:
        p = self.b.memory.malloc(nbytes)
        self.res.device.append(p)
        return p

    def pinned(self, ins: Instruction) -> int:
        if ins.id not in self.host_bufs:
            ptr, arr = self.b.memory.host_alloc(ins.shape.bytes())
            self.res.host.append(ptr)
            self.host_bufs[ins.id] = (ptr, arr)
        return self.host_bufs[ins.id][0]

    def own(self, ins: Instruction) -> int:
        """The address of an instruction that owns memory (allocated on first ask)."""
        owned = self.owned
        if ins.id in owned:
            return owned[ins.id]
        if ins.is_param():
            name = ins.param_name
            if name in self.external:
                p = self.external[name]
            elif name in INTERNAL_PARAMS or is_output_param(name):
                p = self.dev(ins.shape.bytes())
            else:
                self.inputs[name] = ins.shape
                p = self.pinned(ins) if self.offload else self.dev(ins.shape.bytes())
                self.param_dev[name] = p
        elif ins.is_literal() or ins.name == "hip::hip_copy_literal":
            lit = ins if ins.is_literal() else ins.inputs[0]
            p = owned.get(lit.id) or self.upload(lit.literal.data)
            owned[lit.id] = p
        elif ins.name == "hip::copy_from_gpu":
            p = self.pinned(ins)
        else:  # hip_allocate_memory, and buffers no pass placed in an arena
            p = self.dev(ins.shape.bytes())
        owned[ins.id] = p
        return p

    def upload(self, data: np.ndarray) -> int:
        arr = np.ascontiguousarray(data)
        p = self.dev(arr.nbytes)
        if arr.nbytes:
            self.b.memory.copy("h2d", p, arr.ctypes.data, arr.nbytes, self.res.stream)
            self.b.streams.sync(self.res.stream)
        return p

    def load_kernels(self, keys: Sequence[str]) -> dict[str, Any]:
        sources = [kernel_cache.source_for(k) for k in keys]
        binaries = kernel_cache.compile_many(self.b.kernels, sources)
        out = {}
        for ks in sources:
            mod = self.b.kernels.load_module(binaries[ks.key])
            self.res.modules.append(mod)
            out[ks.key] = self.b.kernels.get_function(mod, ks.name)
        return out

    def input_staging(self) -> tuple[dict[str, np.ndarray], list[Step]]:
        """Pinned buffers for the inputs and their copies before the program (in the graph too)."""
        b, s = self.b, self.res.stream
        stage, steps = {}, []
        if self.offload:  # the program's own hip::copy_to_gpu reads the pinned parameter buffers
            for ins in self.program.main:
                if ins.is_param() and ins.param_name in self.inputs:
                    stage[ins.param_name] = self.host_bufs[ins.id][1]
            return stage, steps
        for name, shape in self.inputs.items():
            ptr, arr = b.memory.host_alloc(shape.bytes())
            self.res.host.append(ptr)
            stage[name] = arr
            steps.append(b.memory.make_copy("h2d", self.param_dev[name], ptr, shape.bytes(), s))
        return stage, steps

    def output_staging(self, addr: dict[int, Any]) -> tuple[list[np.ndarray], list[Step], list[Shape]]:
        b, s, main = self.b, self.res.stream, self.program.main
        ret = main.return_instruction()
        outs = list(ret.inputs) if ret is not None else [main.last]
        stage, steps = [], []
        for o in outs:
            if o.name == "hip::sync_stream":
                o = o.inputs[0]
            if o.name == "hip::copy_from_gpu":
                stage.append(self.host_bufs[o.id][1])
                continue
            ptr, arr = b.memory.host_alloc(o.shape.bytes())
            self.res.host.append(ptr)
            stage.append(arr)
            steps.append(b.memory.make_copy("d2h", ptr, addr[o.id], o.shape.bytes(), s))
        return stage, steps, [o.shape for o in outs]
