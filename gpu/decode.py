"""Decode loops on top of the executor: a bounded cache of compiled programs (and their captured
graphs) keyed by input shapes, and a greedy prefill-then-decode loop for KV-cache models.

Shape buckets are exact shapes. A KV-cache decoder derives its positions and causal mask from the
cache's *shape* (Shape -> Gather -> Range), so a program compiled for past length P computes the
right answer only for P: running a padded cache through a bigger bucket would need the mask
and the position to come from a runtime length instead. `ShapeGraphs` therefore keeps one
compiled program per distinct set of input shapes; each captures its graph on first graph-mode
use and replays it whenever the same shapes come back (a second generation, a benchmark loop).
Memory is bounded by `max_programs`: the least recently used program (its buffers and graph)
is closed when a new shape needs room, and `memory()` reports what the live ones hold.

The executor is used only through its public API (compile_program, CompiledProgram.run,
graph_nodes, close), so this layer survives executor refactors.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compiler.errors import MigxError


def shape_key(feed: Mapping[str, Any]) -> tuple:
    """What a compiled program is specialised to: every input's name, dtype and shape."""
    return tuple(sorted((k, np.asarray(v).dtype.str, np.shape(v)) for k, v in feed.items()))


@dataclass
class GraphCacheStats:
    programs: int  # live compiled programs (one per shape)
    graphs: int  # of them, how many hold a captured graph
    device_bytes: int  # arena + params + literals of the live programs
    compiles: int  # programs compiled so far (misses)
    hits: int  # runs served by an already compiled program
    evictions: int

    def __str__(self) -> str:
        return (f"{self.programs} programs ({self.graphs} with graphs), {self.device_bytes / 2**20:.1f} MiB, "
                f"{self.compiles} compiles, {self.hits} hits, {self.evictions} evictions")


def _device_bytes(program) -> int:
    from .passes.memory import memory_stats

    main = program.main
    held = sum(i.shape.bytes() for i in main if i.is_param() or i.is_literal())
    return memory_stats(program).arena_bytes + held


class ShapeGraphs:
    """Compiled programs (and graphs) per input shape, least recently used evicted first.

    `compile(feed)` builds a program for the feed's shapes (e.g. compile_program on the model
    with those dims); `run(feed, mode)` finds or compiles it and runs eagerly or by graph."""

    def __init__(self, compile: Callable[[Mapping[str, Any]], Any], max_programs: int = 8):
        if max_programs < 1:
            raise MigxError("ShapeGraphs needs room for at least one program")
        self._compile = compile
        self.max_programs = max_programs
        self._live: OrderedDict[tuple, Any] = OrderedDict()
        self._graphed: set[tuple] = set()
        self._bytes: dict[tuple, int] = {}
        self.compiles = self.hits = self.evictions = 0

    def program(self, feed: Mapping[str, Any]) -> Any:
        key = shape_key(feed)
        cp = self._live.get(key)
        if cp is not None:
            self._live.move_to_end(key)
            self.hits += 1
            return cp
        while len(self._live) >= self.max_programs:
            old_key, old = self._live.popitem(last=False)
            old.close()  # destroys its graph before freeing its buffers
            self._graphed.discard(old_key)
            self._bytes.pop(old_key, None)
            self.evictions += 1
        cp = self._compile(feed)
        self.compiles += 1
        self._live[key] = cp
        self._bytes[key] = _device_bytes(cp.program)
        return cp

    def run(self, feed: Mapping[str, Any], mode: str = "graph") -> list[np.ndarray]:
        cp = self.program(feed)
        outs = cp.run(dict(feed), mode=mode)
        if mode == "graph":
            self._graphed.add(shape_key(feed))
        return outs

    def memory(self) -> GraphCacheStats:
        return GraphCacheStats(len(self._live), len(self._graphed), sum(self._bytes.values()), self.compiles,
                               self.hits, self.evictions)

    def close(self) -> None:
        while self._live:
            self._live.popitem()[1].close()
        self._graphed.clear()
        self._bytes.clear()


# ---- the decode loop ------------------------------------------------------------------------------
Runner = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]


@dataclass
class Generation:
    tokens: list[int]  # the generated ids (not the prompt)
    logits: list[np.ndarray]  # each step's last-position logits [vocab]
    stats: GraphCacheStats | None = None  # the shape cache's report after the loop (GPU runs)


def kv_inputs(input_names: list[str]) -> list[str]:
    """The past inputs of a KV-cache model, in order (past_key_0, past_value_0, ...)."""
    return [n for n in input_names if n.startswith("past_")]


def generate(run: Runner, input_names: list[str], prompt_ids: Any, steps: int, kv_shape: tuple[int, ...],
             dtype: Any = np.float32) -> Generation:
    """Greedy decoding: one prefill over the prompt with empty pasts (P=0), then `steps` - 1
    single-token steps, each feeding the step's presents back as the next pasts.

    `run(feed)` returns [logits, present_0, present_1, ...] in the model's output order (the
    reference evaluator or a ShapeGraphs); kv_shape is a past's shape with P = 0."""
    pasts = kv_inputs(input_names)
    ids = np.asarray(prompt_ids, dtype=np.int64).reshape(1, -1)
    if ids.shape[1] == 0:
        raise MigxError("generate needs a non-empty prompt")
    cache = {n: np.zeros(kv_shape, dtype) for n in pasts}
    out = Generation([], [])
    for _ in range(steps):
        outs = run({"input_ids": ids, **cache})
        logits = outs[0][0, -1]
        token = int(np.argmax(logits))
        out.tokens.append(token)
        out.logits.append(np.array(logits))
        cache = dict(zip(pasts, outs[1:1 + len(pasts)]))
        ids = np.array([[token]], np.int64)
    return out
