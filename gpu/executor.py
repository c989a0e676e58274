"""Run a compiled program: finalize once, then eager launches or one captured graph per run.

finalize: check the target, compile and load every kernel, allocate the arena, parameter and
output buffers and upload literals, set up BLAS (workspace set here, before any capture), and
pre-pack every launch's argument block. After that nothing is allocated.

Eager mode walks the step list; a launch is a pre-bound call, so no Python packs arguments per
launch. Graph mode captures the whole program (input copies, kernels, BLAS, output copies) once
and replays it. Unlike MIGraphX's prototype (PR #4785), every run honours its inputs: they are
copied into pinned staging buffers that the graph's own copy nodes read, so a replay computes on
the new data; a failure during capture always ends the capture (the eager path keeps working); a
recompile or close destroys the graph before any buffer it uses is freed; host ops refuse
capture instead of silently baking in stale host results.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..compiler import dtypes
from ..compiler.errors import MigxError
from ..compiler.ir import Instruction, Program
from ..compiler.shape import Shape
from . import kernel_cache
from .passes.memory_coloring import MemoryStats, memory_stats
from .runtime import Backend, GpuError, get_backend
from .steps import Built, build_steps, plan_addresses

BLAS_WORKSPACE = 32 << 20
INTERNAL_PARAMS = ("scratch", "memory")


def is_output_param(name: str) -> bool:
    return name.startswith("main:#output_")


@dataclass
class _Resources:
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
                b.stream_sync(self.stream)
        for e in self.events:
            b.event_destroy(e)
        if self.blas is not None:
            b.blas_destroy(self.blas)
        for m in self.modules:
            b.unload_module(m)
        for p in self.device:
            b.free(p)
        for p in self.host:
            b.host_free(p)
        if self.stream is not None:
            b.stream_destroy(self.stream)
        self.device, self.host, self.modules, self.events = [], [], [], []
        self.blas = self.stream = None


@dataclass
class _Graph:
    graph: Any
    exec: Any
    launch: Any
    nodes: int


class CompiledProgram:
    """A finalized program bound to one backend. `run(inputs, mode)` returns numpy outputs."""

    def __init__(self, program: Program, backend: Backend | None = None, *, source: Any = None,
                 options: Any = None):
        self.backend = backend or get_backend()
        self.source = source  # what compile_program was given (kept for recompile)
        self.options = options
        self.generation = 0
        self._graphs: dict[bool, _Graph] = {}
        self._res: _Resources | None = None
        self._finalize(program)

    # ---- finalize ----------------------------------------------------------------------------
    def _finalize(self, program: Program) -> None:
        b = self.backend
        getattr(b, "make_current", lambda: None)()
        self.program = program
        main = program.main
        self._check_target(main)
        res = self._res = _Resources(b)
        res.stream = b.stream_create()
        self.inputs: dict[str, Shape] = {}
        self._param_dev: dict[str, int] = {}
        self._host_bufs: dict[int, tuple[int, np.ndarray]] = {}
        self.offload = any(i.name == "hip::copy_to_gpu" for i in main)
        owned: dict[int, int] = {}

        def dev(nbytes: int) -> int:
            p = b.malloc(nbytes)
            res.device.append(p)
            return p

        def pinned(ins: Instruction) -> int:
            if ins.id not in self._host_bufs:
                ptr, arr = b.host_alloc(ins.shape.bytes())
                res.host.append(ptr)
                self._host_bufs[ins.id] = (ptr, arr)
            return self._host_bufs[ins.id][0]

        def own(ins: Instruction) -> int:
            if ins.id in owned:
                return owned[ins.id]
            if ins.is_param():
                name = ins.param_name
                if name in INTERNAL_PARAMS or is_output_param(name):
                    p = dev(ins.shape.bytes())
                else:
                    self.inputs[name] = ins.shape
                    p = pinned(ins) if self.offload else dev(ins.shape.bytes())
                    self._param_dev[name] = p
            elif ins.is_literal() or ins.name == "hip::hip_copy_literal":
                lit = ins if ins.is_literal() else ins.inputs[0]
                p = owned.get(lit.id) or self._upload(dev, lit.literal.data)
                owned[lit.id] = p
            elif ins.name == "hip::copy_from_gpu":
                p = pinned(ins)
            else:  # hip_allocate_memory, and buffers no pass placed in an arena
                p = dev(ins.shape.bytes())
            owned[ins.id] = p
            return p

        self._addr = plan_addresses(main, own)
        functions = self._load_kernels(sorted(kernel_cache.kernel_keys(program)))

        def blas() -> Any:
            if res.blas is None:
                ws = dev(BLAS_WORKSPACE)
                res.blas = b.blas_create(res.stream, ws, BLAS_WORKSPACE)
            return res.blas

        self._built: Built = build_steps(main, self._addr, b, res.stream, functions, blas, pinned)
        self._io(main, pinned)
        b.stream_sync(res.stream)
        self._warm = False

    def _check_target(self, main) -> None:
        for ins in main:
            if ins.name == "gpu::check_context":
                t = ins.op["target"]
                here = f"{self.backend.name}:{self.backend.arch}"
                if t not in ("any", here):
                    raise MigxError(f"program was compiled for {t} but runs on {here}; compile it again")

    def _upload(self, dev, data: np.ndarray) -> int:
        arr = np.ascontiguousarray(data)
        p = dev(arr.nbytes)
        if arr.nbytes:
            self.backend.copy("h2d", p, arr.ctypes.data, arr.nbytes, self._res.stream)
            self.backend.stream_sync(self._res.stream)
        return p

    def _load_kernels(self, keys: Sequence[str]) -> dict[str, Any]:
        sources = [kernel_cache.source_for(k) for k in keys]
        binaries = kernel_cache.compile_many(self.backend, sources)
        out = {}
        for ks in sources:
            mod = self.backend.load_module(binaries[ks.key])
            self._res.modules.append(mod)
            out[ks.key] = self.backend.get_function(mod, ks.name)
        return out

    def _io(self, main, pinned) -> None:
        """Staging: input copies before the program and output copies after it (in the graph too)."""
        b, s = self.backend, self._res.stream
        self._in_steps, self._stage_in = [], {}
        if not self.offload:
            for name, shape in self.inputs.items():
                ptr, arr = b.host_alloc(shape.bytes())
                self._res.host.append(ptr)
                self._stage_in[name] = arr
                self._in_steps.append(b.make_copy("h2d", self._param_dev[name], ptr, shape.bytes(), s))
        else:
            for ins in main:
                if ins.is_param() and ins.param_name in self.inputs:
                    self._stage_in[ins.param_name] = self._host_bufs[ins.id][1]
        ret = main.return_instruction()
        outs = list(ret.inputs) if ret is not None else [main.last]
        self.output_shapes = [o.shape for o in outs]
        self._out_steps, self._stage_out = [], []
        for o in outs:
            if o.name == "hip::sync_stream":
                o = o.inputs[0]
            if o.name == "hip::copy_from_gpu":
                self._stage_out.append(self._host_bufs[o.id][1])
                continue
            ptr, arr = b.host_alloc(o.shape.bytes())
            self._res.host.append(ptr)
            self._stage_out.append(arr)
            self._out_steps.append(b.make_copy("d2h", ptr, self._addr[o.id], o.shape.bytes(), s))

    # ---- running -----------------------------------------------------------------------------
    @property
    def steps(self) -> Built:
        return self._built

    @property
    def kernel_count(self) -> int:
        return sum(1 for i in self._built.info if i.kind == "kernel")

    @property
    def blas_calls(self) -> int:
        return sum(1 for i in self._built.info if i.kind == "blas")

    def memory(self) -> MemoryStats:
        return memory_stats(self.program)

    def _stage_inputs(self, inputs: Mapping[str, Any] | Sequence[Any]) -> None:
        names = list(self.inputs)
        if not isinstance(inputs, Mapping):
            if len(inputs) != len(names):
                raise MigxError(f"program takes {len(names)} inputs ({', '.join(names)}), got {len(inputs)}")
            inputs = dict(zip(names, inputs))
        missing = [n for n in names if n not in inputs]
        extra = [n for n in inputs if n not in self.inputs]
        if missing or extra:
            raise MigxError(f"inputs: missing {missing or 'none'}, unknown {extra or 'none'}; expected "
                            + ", ".join(f"{n}: {s}" for n, s in self.inputs.items()))
        for n, shape in self.inputs.items():
            arr = np.asarray(inputs[n])
            if tuple(arr.shape) != shape.lens and arr.size != shape.elements():
                raise MigxError(f"input {n!r} has shape {tuple(arr.shape)} but the program was compiled for "
                                f"{list(shape.lens)}; recompile for the new shape (CompiledProgram.recompile)")
            npd = dtypes.np_dtype(shape.type)
            self._stage_in[n][:shape.bytes()].view(npd)[...] = arr.astype(npd, copy=False).reshape(-1)

    def _enqueue(self, steps) -> None:
        for f in steps:
            r = f()
            if r[0]:
                raise GpuError(f"{self.backend.name}: launch failed: {self.backend.error_string(r[0])}")

    def run(self, inputs: Mapping[str, Any] | Sequence[Any] | None = None, mode: str = "eager") -> list[np.ndarray]:
        """Copy `inputs` in, execute (eager launches or the captured graph), return the outputs."""
        if self._res is None:
            raise MigxError("this CompiledProgram was closed")
        if mode not in ("eager", "graph"):
            raise MigxError(f"unknown mode {mode!r}; use 'eager' or 'graph'")
        self._stage_inputs(inputs or {})
        getattr(self.backend, "make_current", lambda: None)()
        if mode == "eager":
            self.launch_eager(io=True)
        else:
            self.launch_graph(io=True)
        self.backend.stream_sync(self._res.stream)
        self._warm = True
        return self._outputs()

    def _outputs(self) -> list[np.ndarray]:
        outs = []
        for shape, arr in zip(self.output_shapes, self._stage_out):
            npd = dtypes.np_dtype(shape.type)
            outs.append(arr[:shape.bytes()].view(npd).reshape(shape.lens).copy())
        return outs

    def trace_values(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[int, np.ndarray]:
        """Run eagerly, one step at a time, reading every instruction's result back right after it
        is produced (later steps may reuse its arena space). Keys are stable instruction ids; used
        to find the first instruction whose GPU value diverges from the reference evaluator."""
        import ctypes

        self._stage_inputs(inputs)
        getattr(self.backend, "make_current", lambda: None)()
        b, s = self.backend, self._res.stream
        self._enqueue(self._in_steps)
        by_id = {ins.id: ins for ins in self.program.main}
        infos = self._built.info
        values: dict[int, np.ndarray] = {}
        for k, step in enumerate(self._built.steps):
            self._enqueue([step])
            iid = infos[k].ins_id
            if k + 1 < len(infos) and infos[k + 1].ins_id == iid:
                continue  # the instruction's last step (e.g. a GEMM's epilogue) is still to come
            ins = by_id.get(iid)
            addr = self._addr.get(iid)
            if ins is None or not isinstance(addr, int) or ins.shape.is_tuple or ins.shape.dynamic_shape:
                continue
            shape = ins.shape
            npd = dtypes.np_dtype(shape.type)
            raw = np.empty(max(shape.element_space(), 1), dtype=npd)
            b.stream_sync(s)
            if shape.bytes():
                b.copy("d2h", raw.ctypes.data_as(ctypes.c_void_p).value, addr, shape.bytes(), s)
            strides = tuple(st * npd.itemsize for st in shape.strides)
            values[iid] = np.lib.stride_tricks.as_strided(raw, shape.lens, strides).copy()
        b.stream_sync(s)
        return values

    def launch_eager(self, io: bool = True) -> None:
        """Enqueue the program's steps (asynchronous; the caller synchronizes)."""
        if io:
            self._enqueue(self._in_steps)
        self._enqueue(self._built.steps)
        if io:
            self._enqueue(self._out_steps)

    def launch_graph(self, io: bool = True) -> None:
        g = self._graphs.get(io) or self._capture(io)
        r = g.launch()
        if r[0]:
            raise GpuError(f"{self.backend.name}: graph launch failed: {self.backend.error_string(r[0])}")

    def _capture(self, io: bool) -> _Graph:
        if self._built.host_ops:
            raise MigxError("graph mode unavailable: these instructions run on the host, which a graph cannot "
                            f"capture: {', '.join(self._built.host_ops)}")
        b, s = self.backend, self._res.stream
        if not self._warm:  # module loading and BLAS setup happen on first use, never inside capture
            self.launch_eager(io=False)
            b.stream_sync(s)
            self._warm = True
        steps = (self._in_steps if io else []) + self._built.steps + (self._out_steps if io else [])
        b.begin_capture(s)
        try:
            self._enqueue(steps)
        except BaseException:
            with contextlib.suppress(GpuError):
                b.graph_destroy(b.end_capture(s))
            raise
        graph = b.end_capture(s)
        try:
            gexec = b.graph_instantiate(graph)
        except BaseException:
            b.graph_destroy(graph)
            raise
        getattr(b, "graph_upload", lambda *a: None)(gexec, s)
        nodes = getattr(b, "graph_node_count", lambda g: -1)(graph)
        g = _Graph(graph, gexec, b.make_graph_launch(gexec, s), nodes)
        self._graphs[io] = g
        return g

    def graph_nodes(self, io: bool = False) -> int:
        g = self._graphs.get(io) or self._capture(io)
        return g.nodes

    def invalidate_graphs(self) -> None:
        """Destroy captured graphs (after the stream is idle); the next graph run captures again."""
        if not self._graphs:
            return
        b = self.backend
        b.stream_sync(self._res.stream)
        for g in self._graphs.values():
            b.graph_exec_destroy(g.exec)
            b.graph_destroy(g.graph)
        self._graphs = {}

    # ---- lifetime ----------------------------------------------------------------------------
    def recompile(self, program: Program | None = None, options: Any = None,
                  input_dims: Mapping[str, Sequence[int]] | None = None) -> CompiledProgram:
        """Compile again (new options, a new program, or new input shapes for an ONNX source) and
        re-finalize in place. Graphs are destroyed before the old buffers are freed."""
        if program is None:
            if self.source is None:
                raise MigxError("recompile needs a program: this one was finalized from an already compiled program")
            from . import compile_program_ir

            program = compile_program_ir(self.source, options or self.options, input_dims=input_dims,
                                         backend=self.backend)
        self.invalidate_graphs()
        old, self._res = self._res, None
        old.free()
        self.generation += 1
        self.options = options or self.options
        self._finalize(program)
        return self

    def close(self) -> None:
        if self._res is None:
            return
        self.invalidate_graphs()
        self._res.free()
        self._res = None

    def __enter__(self) -> CompiledProgram:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort at interpreter exit
        with contextlib.suppress(Exception):
            self.close()

    def event_pair(self) -> tuple[Any, Any]:
        a, c = self.backend.event_create(), self.backend.event_create()
        self._res.events += [a, c]
        return a, c

    @property
    def stream(self) -> Any:
        return self._res.stream


def finalize(program: Program, backend: Backend | None = None) -> CompiledProgram:
    """Finalize an already compiled (backend-lowered) program for execution."""
    return CompiledProgram(program, backend)
