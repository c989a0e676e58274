"""Run a compiled program: finalize once (gpu/finalize.py), then eager launches or captured graphs.

Eager mode walks the step list; a launch is a pre-bound call, so no Python packs arguments per
launch. Graph mode captures the program (input copies, kernels, BLAS, output copies) and replays
it. Where a host step remains (a data-dependent shape, a user's Python op), graph mode is
piecewise, as vLLM's piecewise CUDA graphs: each device segment between host steps is captured as
its own graph, and a run replays them in order around the host steps, which synchronize the
stream themselves. `graph_segments()` describes the pieces.

Unlike MIGraphX's prototype (PR #4785), every run honours its inputs: they are copied into pinned
staging buffers that the graph's own copy nodes read, so a replay computes on the new data; a
failure during capture always ends the capture and destroys the pieces captured so far (the eager
path keeps working); a recompile or close destroys the graphs before any buffer they use is freed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Program
from migx_explore.compiler.shape import Shape

from .finalize import Finalized, finalize
from .passes.memory_coloring import MemoryStats, memory_stats
from .runtime import Backend, GpuError, get_backend
from .runtime.base import Step, step_status
from .steps import Built


@dataclass
class _Graph:
    graph: Any
    exec: Any
    launch: Step
    nodes: int


@dataclass(frozen=True)
class GraphPart:
    """One piece of a graph-mode run, in order: a captured device segment (`kind` "graph": `steps`
    device steps replayed as one graph of `nodes` driver nodes) or a host step (`kind` "host",
    `label` names its instruction) that the device segments are replayed around."""

    kind: str
    steps: int = 0
    nodes: int = 0
    label: str = ""


@dataclass
class _PiecewiseGraph:
    """Graphs and host steps in run order (a whole-device program is one graph and no host step)."""

    parts: list[_Graph | Step]
    layout: list[GraphPart]

    @property
    def graphs(self) -> list[_Graph]:
        return [p for p in self.parts if isinstance(p, _Graph)]


class CompiledProgram:
    """A finalized program bound to one backend. `run(inputs, mode)` returns numpy outputs."""

    def __init__(
        self,
        program: Program,
        backend: Backend | None = None,
        *,
        source: Any = None,
        options: Any = None,
        trace: Any = None,
        external: Mapping[str, int] | None = None,
        lowerer: Callable[..., Program] | None = None,
    ):
        self.backend = backend or get_backend()
        # How recompile() runs the pipelines again (gpu.lower, passed in by gpu.compile: the
        # executor never imports the package that imports it).
        self.lowerer = lowerer
        # Params bound to caller-owned device buffers (a KV cache that outlives this program): read
        # and written in place, never staged from the host, never freed here.
        self.external = dict(external or {})
        self.source = source  # what gpu.compile was given (kept for recompile)
        self.options = options
        self.trace = trace  # the pass manager's trace of the compile, when gpu.compile made it
        self.generation = 0
        self._graphs: dict[bool, _PiecewiseGraph] = {}
        self._warm = False
        self._state: Finalized | None = finalize(program, self.backend, self.external)

    # ---- the finalized state -----------------------------------------------------------------
    @property
    def state(self) -> Finalized:
        if self._state is None:
            raise MigxError("this CompiledProgram was closed")
        return self._state

    @property
    def program(self) -> Program:
        return self.state.program

    @property
    def inputs(self) -> dict[str, Shape]:
        return self.state.inputs

    @property
    def output_shapes(self) -> list[Shape]:
        return self.state.output_shapes

    @property
    def offload(self) -> bool:
        return self.state.offload

    @property
    def steps(self) -> Built:
        return self.state.built

    @property
    def stream(self) -> Any:
        return self.state.stream

    @property
    def kernel_count(self) -> int:
        return sum(1 for i in self.steps.info if i.kind == "kernel")

    @property
    def blas_calls(self) -> int:
        return sum(1 for i in self.steps.info if i.kind == "blas")

    def memory(self) -> MemoryStats:
        return memory_stats(self.program)

    # ---- running -----------------------------------------------------------------------------
    def _stage_inputs(self, inputs: Mapping[str, Any] | Sequence[Any]) -> None:
        shapes, stage = self.state.inputs, self.state.stage_in
        names = list(shapes)
        if not isinstance(inputs, Mapping):
            if len(inputs) != len(names):
                raise MigxError(f"program takes {len(names)} inputs ({', '.join(names)}), got {len(inputs)}")
            inputs = dict(zip(names, inputs))
        missing = [n for n in names if n not in inputs]
        extra = [n for n in inputs if n not in shapes]
        if missing or extra:
            raise MigxError(
                f"inputs: missing {missing or 'none'}, unknown {extra or 'none'}; expected "
                + ", ".join(f"{n}: {s}" for n, s in shapes.items())
            )
        for n, shape in shapes.items():
            arr = np.asarray(inputs[n])
            if tuple(arr.shape) != shape.lens and arr.size != shape.elements():
                raise MigxError(
                    f"input {n!r} has shape {tuple(arr.shape)} but the program was compiled for "
                    f"{list(shape.lens)}; recompile for the new shape (CompiledProgram.recompile)"
                )
            npd = dtypes.np_dtype(shape.type)
            stage[n][: shape.bytes()].view(npd)[...] = arr.astype(npd, copy=False).reshape(-1)

    def _enqueue(self, steps: Sequence[Step]) -> None:
        for f in steps:
            r = f()
            if r and step_status(r):
                raise GpuError(f"{self.backend.name}: launch failed: {self.backend.error_string(step_status(r))}")

    def run(self, inputs: Mapping[str, Any] | Sequence[Any] | None = None, mode: str = "eager") -> list[np.ndarray]:
        """Copy `inputs` in, execute (eager launches or the captured graphs), return the outputs."""
        state = self.state
        if mode not in ("eager", "graph"):
            raise MigxError(f"unknown mode {mode!r}; use 'eager' or 'graph'")
        self._stage_inputs(inputs or {})
        self.backend.make_current()
        if mode == "eager":
            self.launch_eager(io=True)
        else:
            self.launch_graph(io=True)
        self.backend.streams.sync(state.stream)
        self._warm = True
        return self._outputs()

    def _outputs(self) -> list[np.ndarray]:
        outs = []
        for shape, arr in zip(self.state.output_shapes, self.state.stage_out):
            npd = dtypes.np_dtype(shape.type)
            outs.append(arr[: shape.bytes()].view(npd).reshape(shape.lens).copy())
        return outs

    def trace_values(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[int, np.ndarray]:
        """Run eagerly, one step at a time, reading every instruction's result back right after it
        is produced (later steps may reuse its arena space). Keys are stable instruction ids; used
        to find the first instruction whose GPU value diverges from the reference evaluator."""
        import ctypes

        state = self.state
        self._stage_inputs(inputs)
        self.backend.make_current()
        b, s = self.backend, state.stream
        self._enqueue(state.in_steps)
        by_id = {ins.id: ins for ins in state.program.main}
        infos = state.built.info
        values: dict[int, np.ndarray] = {}
        for k, step in enumerate(state.built.steps):
            self._enqueue([step])
            iid = infos[k].ins_id
            if k + 1 < len(infos) and infos[k + 1].ins_id == iid:
                continue  # the instruction's last step (e.g. a GEMM's epilogue) is still to come
            ins = by_id.get(iid)
            addr = state.addresses.get(iid)
            if ins is None or not isinstance(addr, int) or ins.shape.is_tuple or ins.shape.dynamic_shape:
                continue
            shape = ins.shape
            npd = dtypes.np_dtype(shape.type)
            raw = np.empty(max(shape.element_space(), 1), dtype=npd)
            b.streams.sync(s)
            if shape.bytes():
                b.memory.copy("d2h", raw.ctypes.data_as(ctypes.c_void_p).value, addr, shape.bytes(), s)
            strides = tuple(st * npd.itemsize for st in shape.strides)
            values[iid] = np.lib.stride_tricks.as_strided(raw, shape.lens, strides).copy()
        b.streams.sync(s)
        return values

    def launch_eager(self, io: bool = True) -> None:
        """Enqueue the program's steps (asynchronous; the caller synchronizes)."""
        state = self.state
        if io:
            self._enqueue(state.in_steps)
        self._enqueue(state.built.steps)
        if io:
            self._enqueue(state.out_steps)

    def launch_graph(self, io: bool = True) -> None:
        """Replay the captured graphs (capturing them on first use), host steps in between."""
        pg = self._graphs.get(io) or self._capture(io)
        for part in pg.parts:
            r = part.launch() if isinstance(part, _Graph) else part()
            if r and step_status(r):
                raise GpuError(f"{self.backend.name}: graph launch failed: {self.backend.error_string(step_status(r))}")

    def _pieces(self, io: bool) -> list[tuple[list[Step], Step | None, str]]:
        """(device steps, following host step or None, its label): the program cut at host steps."""
        state = self.state
        pieces: list[tuple[list[Step], Step | None, str]] = []
        current: list[Step] = list(state.in_steps) if io else []
        for step, info in zip(state.built.steps, state.built.info):
            if info.kind == "host":  # label: position and the op it runs, e.g. "@7 topk[k=3]"
                pieces.append((current, step, f"{info.label.split()[0]} {info.kernel}"))
                current = []
            else:
                current.append(step)
        pieces.append((current + (list(state.out_steps) if io else []), None, ""))
        return pieces

    def _capture(self, io: bool) -> _PiecewiseGraph:
        b, s = self.backend, self.stream
        if not self._warm:  # module loading and BLAS setup happen on first use, never inside capture
            self.launch_eager(io=False)
            b.streams.sync(s)
            self._warm = True
        parts: list[_Graph | Step] = []
        layout: list[GraphPart] = []
        try:
            for steps, host, label in self._pieces(io):
                if steps:
                    g = self._capture_segment(steps)
                    parts.append(g)
                    layout.append(GraphPart("graph", len(steps), g.nodes))
                if host is not None:
                    parts.append(host)
                    layout.append(GraphPart("host", 1, 0, label))
        except BaseException:
            self._destroy([p for p in parts if isinstance(p, _Graph)])
            raise
        pg = _PiecewiseGraph(parts, layout)
        self._graphs[io] = pg
        return pg

    def _capture_segment(self, steps: list[Step]) -> _Graph:
        b, s = self.backend, self.stream
        graph = b.graphs.capture(s, lambda: self._enqueue(steps))
        try:
            gexec = b.graphs.instantiate(graph)
        except BaseException:
            b.graphs.destroy(graph)
            raise
        g = _Graph(graph, gexec, b.graphs.make_launch(gexec, s), b.graphs.node_count(graph))
        try:
            b.graphs.upload(gexec, s)
        except BaseException:
            self._destroy([g])
            raise
        return g

    def graph_parts(self, io: bool = False) -> list[GraphPart]:
        """What graph mode replays, in order (captured now if needed): one "graph" part for an
        all-device program; device segments and the host steps between them otherwise."""
        return (self._graphs.get(io) or self._capture(io)).layout

    def graph_nodes(self, io: bool = False) -> int:
        """Driver nodes over all segments (-1 where the backend cannot count them)."""
        counts = [p.nodes for p in self.graph_parts(io) if p.kind == "graph"]
        return -1 if any(n < 0 for n in counts) else sum(counts)

    def graph_launches(self, io: bool = False) -> int:
        """Host calls per graph-mode run: one per captured segment plus one per host step."""
        return len(self.graph_parts(io))

    def _destroy(self, graphs: Sequence[_Graph]) -> None:
        b = self.backend
        for g in graphs:
            b.graphs.exec_destroy(g.exec)
            b.graphs.destroy(g.graph)

    def invalidate_graphs(self) -> None:
        """Destroy captured graphs (after the stream is idle); the next graph run captures again."""
        if not self._graphs:
            return
        self.backend.streams.sync(self.stream)
        for pg in self._graphs.values():
            self._destroy(pg.graphs)
        self._graphs = {}

    # ---- lifetime ----------------------------------------------------------------------------
    def recompile(
        self, program: Program | None = None, options: Any = None, input_dims: Mapping[str, Sequence[int]] | None = None
    ) -> CompiledProgram:
        """Compile again (new options, a new program, or new input shapes for an ONNX source) and
        re-finalize in place. Graphs are destroyed before the old buffers are freed."""
        if program is None:
            if self.source is None or self.lowerer is None:
                raise MigxError("recompile needs a program: this one was finalized from an already compiled program")
            program = self.lowerer(self.source, options or self.options, input_dims=input_dims, backend=self.backend)
        self.invalidate_graphs()
        old, self._state = self.state, None
        old.resources.free()
        self.generation += 1
        self.options = options or self.options
        self._warm = False
        self._state = finalize(program, self.backend, self.external)
        return self

    def close(self) -> None:
        if self._state is None:
            return
        self.invalidate_graphs()
        self._state.resources.free()
        self._state = None

    def __enter__(self) -> CompiledProgram:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort at interpreter exit
        with contextlib.suppress(Exception):
            self.close()

    def event_pair(self) -> tuple[Any, Any]:
        a, c = self.backend.streams.event_create(), self.backend.streams.event_create()
        self.state.resources.events += [a, c]
        return a, c
