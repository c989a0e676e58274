"""Timing a compiled program: device time (events around the compute region), host time per run
and per-enqueue, in eager and graph mode, plus a per-kernel breakdown in eager mode.

Device time brackets the program's own work with two events on its stream (no input/output
copies), so it compares with a framework's compute-only latency. `host_us` is a whole
`run(inputs)` as a caller sees it (staging, copies, sync); `enqueue_us` is the host time to
submit the compute (the launch loop, or one graph launch): divided by the launches it is the
per-kernel dispatch overhead.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .executor import CompiledProgram, GraphPart
from .runtime.base import step_status


@dataclass
class Stats:
    median: float
    p10: float
    p90: float
    n: int

    @staticmethod
    def of(samples: Sequence[float]) -> Stats:
        a = np.asarray(samples, dtype=np.float64)
        return Stats(float(np.median(a)), float(np.percentile(a, 10)), float(np.percentile(a, 90)), len(a))

    def __str__(self) -> str:
        return f"{self.median:9.1f} [{self.p10:.1f}, {self.p90:.1f}]"


@dataclass
class KernelTime:
    instruction: str
    kernel: str
    kind: str
    us: float


@dataclass
class ModeTiming:
    mode: str
    device_us: Stats
    host_us: Stats
    enqueue_us: Stats
    launches: int
    per_kernel: list[KernelTime] = field(default_factory=list)

    @property
    def enqueue_per_launch_us(self) -> float:
        return self.enqueue_us.median / max(self.launches, 1)


@dataclass
class TimingResult:
    """Timings per mode. Graph mode is piecewise where host steps remain: `graph_parts` lists what
    a graph run replays in order (device segments as graphs, host steps between them)."""

    modes: dict[str, ModeTiming]
    kernels: int
    blas_calls: int
    graph_nodes: int = -1
    graph_parts: list[GraphPart] = field(default_factory=list)

    @property
    def graph_segments(self) -> int:
        """Captured device segments (1 for a program without host steps; 0 before graph mode ran)."""
        return sum(1 for p in self.graph_parts if p.kind == "graph")

    @property
    def segment_nodes(self) -> list[int]:
        """Graph nodes of each captured segment, in order."""
        return [p.nodes for p in self.graph_parts if p.kind == "graph"]

    @property
    def host_gaps(self) -> list[str]:
        """The host steps graph mode runs between its segments, in order."""
        return [p.label for p in self.graph_parts if p.kind == "host"]

    def segments_line(self) -> str:
        """One line on how graph mode ran: whole, or in pieces around host steps."""
        if not self.graph_parts:
            return ""
        if not self.host_gaps:
            return f"graph: 1 segment, {self.graph_nodes} nodes"
        return (
            f"graph: {self.graph_segments} segments (nodes {' + '.join(map(str, self.segment_nodes))}) around "
            f"{len(self.host_gaps)} host step(s): {', '.join(self.host_gaps)}"
        )

    def table(self) -> str:
        head = ("mode", "device us (median [p10, p90])", "host us per run", "enqueue us", "launches")
        rows = [
            (m.mode, str(m.device_us), str(m.host_us), f"{m.enqueue_us.median:.1f}", str(m.launches))
            for m in self.modes.values()
        ]
        # each column as wide as its widest cell, so a slow host (7-digit µs) cannot push columns apart
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = [
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in [head, *rows]
        ]
        if self.segments_line():
            lines.append(self.segments_line())
        return "\n".join(lines)

    def kernel_table(self, top: int = 15) -> str:
        eager = self.modes.get("eager")
        if eager is None or not eager.per_kernel:
            return ""
        rows = sorted(eager.per_kernel, key=lambda k: -k.us)[:top]
        total = sum(k.us for k in eager.per_kernel)
        lines = [f"{'instruction':28} {'kernel':44} {'us':>8} {'%':>6}"]
        for k in rows:
            lines.append(f"{k.instruction[:28]:28} {k.kernel[:44]:44} {k.us:8.1f} {100 * k.us / max(total, 1e-9):6.1f}")
        return "\n".join(lines)


def _device_and_enqueue_us(compiled: CompiledProgram, launch, ev) -> tuple[float, float]:
    """Device µs between two events around `launch`, and the host µs the launch call took (the
    events are recorded outside it, so they are not part of the enqueue time)."""
    b = compiled.backend
    a, c = ev
    start, stop = b.streams.make_event_record(a, compiled.stream), b.streams.make_event_record(c, compiled.stream)
    start()
    t0 = time.perf_counter()
    launch()
    enqueue_us = (time.perf_counter() - t0) * 1e6
    stop()
    b.streams.event_sync(c)
    return b.streams.event_elapsed_ms(a, c) * 1e3, enqueue_us


def _device_us(compiled: CompiledProgram, launch, ev) -> float:
    return _device_and_enqueue_us(compiled, launch, ev)[0]


def graph_replay_us(compiled: CompiledProgram, iters: int) -> list[float]:
    """Device microseconds of `iters` graph replays of the compute region (no copies; the graph
    must be captured, e.g. by a run in graph mode), one event pair around each: for a caller that
    interleaves these with other timings (benchmarks/issue28_table.py)."""
    ev = compiled.event_pair()
    return [_device_us(compiled, lambda: compiled.launch_graph(io=False), ev) for _ in range(iters)]


def time_program(
    compiled: CompiledProgram,
    modes: Sequence[str] = ("eager", "graph"),
    warmup: int = 10,
    iters: int = 100,
    inputs: Mapping[str, Any] | None = None,
    per_kernel: bool = True,
    profile_iters: int = 20,
) -> TimingResult:
    """Median, p10 and p90 of device and host time per mode (see the module docstring)."""
    from migx_explore.compiler.inputs import random_inputs

    feeds = dict(inputs) if inputs is not None else random_inputs(compiled.program, seed=0)
    feeds = {k: v for k, v in feeds.items() if k in compiled.inputs}
    ev = compiled.event_pair()
    out: dict[str, ModeTiming] = {}
    for mode in modes:
        compiled.run(feeds, mode=mode)  # stage inputs, load, capture
        if mode == "eager":

            def launch():
                compiled.launch_eager(io=False)

            launches = len(compiled.steps.steps)
        else:

            def launch():
                compiled.launch_graph(io=False)

            launches = compiled.graph_launches(io=False)
        for _ in range(warmup):
            launch()
        compiled.backend.streams.sync(compiled.stream)
        dev, enq, host = [], [], []
        for _ in range(iters):  # one loop for both: the host times only the launch call itself
            us, enqueue_us = _device_and_enqueue_us(compiled, launch, ev)
            dev.append(us)
            enq.append(enqueue_us)
        for _ in range(max(iters // 10, 3)):
            t0 = time.perf_counter()
            compiled.run(feeds, mode=mode)
            host.append((time.perf_counter() - t0) * 1e6)
        mt = ModeTiming(mode, Stats.of(dev), Stats.of(host), Stats.of(enq), launches)
        if mode == "eager" and per_kernel:
            mt.per_kernel = kernel_breakdown(compiled, profile_iters)
        out[mode] = mt
    graphed = "graph" in modes
    nodes = compiled.graph_nodes(io=False) if graphed else -1
    parts = list(compiled.graph_parts(io=False)) if graphed else []
    return TimingResult(out, compiled.kernel_count, compiled.blas_calls, nodes, parts)


def kernel_breakdown(compiled: CompiledProgram, iters: int = 20) -> list[KernelTime]:
    """Eager run with an event between every step: median microseconds per step."""
    b, s = compiled.backend, compiled.stream
    built = compiled.steps
    events = [b.streams.event_create() for _ in range(len(built.steps) + 1)]
    records = [b.streams.make_event_record(e, s) for e in events]
    samples = np.zeros((iters, len(built.steps)))
    try:
        for it in range(iters):
            records[0]()
            for k, step in enumerate(built.steps):
                r = step()
                if r and step_status(r):
                    raise RuntimeError(f"step {built.info[k].label} failed: {step_status(r)}")
                records[k + 1]()
            b.streams.event_sync(events[-1])
            for k in range(len(built.steps)):
                samples[it, k] = b.streams.event_elapsed_ms(events[k], events[k + 1]) * 1e3
    finally:
        for e in events:
            b.streams.event_destroy(e)
    med = np.median(samples, axis=0) if iters else np.zeros(len(built.steps))
    return [KernelTime(i.label, i.kernel, i.kind, float(m)) for i, m in zip(built.info, med)]
