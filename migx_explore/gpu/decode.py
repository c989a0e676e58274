"""KV-cache decoding on the GPU: preallocated caches written in place, and one compiled program
and captured graph per shape bucket, cached, bounded and reported.

Why buckets, and which ones. A decoder's program depends on the past length P through its
shapes, so specialising to exact P (what split_single_dyn_dim does) would compile and capture
a new program at every decode step. `kv_cache_bucket` (compiler/kv_cache.py) turns P into
a runtime input instead: the program for bucket B attends over the first B rows of the cache
(a slice view), appends the step's K/V at row P with `concat_past_present`, and relies on the
model's causal mask (key index <= P + t) to hide rows P + T .. B - 1. Buckets are powers of two
(from `min_bucket`, capped at the cache length): at most log2(max_len) programs per new-token
count T, the attention never reads more than twice the rows it needs, and a decode loop from
P = 1 to 255 uses 5 programs instead of 255. `buckets="exact"` (B = P + T) is there to compare.

Memory. The caches are allocated once at `max_len` (one buffer per past input, zeroed, shared by
every bucket's program through the executor's `external` binding), so a step allocates nothing
and copies no cache: only the new K/V rows are written. Programs (with their arenas and graphs)
live in `ShapeGraphs`, least recently used closed first beyond `max_programs`; `memory()` reports
them. Keys are (T, B) plus the cache buffers the program was bound to.

The executor is used through its public API only (compile_program_ir, CompiledProgram(external=),
run, close), so this layer sits on top of it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.errors import MigxError


@dataclass
class GraphCacheStats:
    programs: int  # live compiled programs (one per bucket)
    graphs: int  # of them, how many hold a captured graph
    device_bytes: int  # arenas + params + literals of the live programs
    cache_bytes: int  # the KV cache buffers (allocated once)
    compiles: int  # programs compiled so far (misses)
    hits: int  # steps served by an already compiled program
    evictions: int

    def __str__(self) -> str:
        return (
            f"{self.programs} programs ({self.graphs} with graphs), {self.device_bytes / 2**20:.1f} MiB + "
            f"{self.cache_bytes / 2**20:.1f} MiB cache, {self.compiles} compiles, {self.hits} hits, "
            f"{self.evictions} evictions"
        )


def program_bytes(compiled) -> int:
    """A compiled program's arena plus its literals and own params (the bound caches are not its)."""
    held = sum(
        i.shape.bytes()
        for i in compiled.program.main
        if i.is_literal() or (i.is_param() and i.param_name not in getattr(compiled, "external", {}))
    )
    return compiled.memory().arena_bytes + held


class ShapeGraphs:
    """Compiled programs keyed by shape (and buffers), least recently used closed first.

    `get(key, build)` returns the program for `key`, calling `build()` on a miss; each program
    captures its own graph on its first graph-mode run and replays it afterwards."""

    def __init__(self, max_programs: int = 8):
        if max_programs < 1:
            raise MigxError("ShapeGraphs needs room for at least one program")
        self.max_programs = max_programs
        self._live: OrderedDict[Hashable, Any] = OrderedDict()
        self._bytes: dict[Hashable, int] = {}
        self.graphed: set[Hashable] = set()
        self.compiles = self.hits = self.evictions = 0

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        cp = self._live.get(key)
        if cp is not None:
            self._live.move_to_end(key)
            self.hits += 1
            return cp
        while len(self._live) >= self.max_programs:
            old_key, old = self._live.popitem(last=False)
            old.close()  # destroys its graph before its buffers
            self.graphed.discard(old_key)
            self._bytes.pop(old_key, None)
            self.evictions += 1
        cp = build()
        self.compiles += 1
        self._live[key] = cp
        self._bytes[key] = program_bytes(cp)
        return cp

    def stats(self, cache_bytes: int = 0) -> GraphCacheStats:
        return GraphCacheStats(
            len(self._live),
            len(self.graphed & set(self._live)),
            sum(self._bytes.values()),
            cache_bytes,
            self.compiles,
            self.hits,
            self.evictions,
        )

    def close(self) -> None:
        while self._live:
            self._live.popitem()[1].close()
        self.graphed.clear()
        self._bytes.clear()


def bucket_for(needed: int, max_len: int, buckets: str = "pow2", min_bucket: int = 16) -> int:
    """The cache rows a step attends over: the next power of two >= needed (at least min_bucket,
    at most max_len), or exactly `needed`."""
    if not 0 < needed <= max_len:
        raise MigxError(f"{needed} cache rows needed but the cache holds {max_len}")
    if buckets == "exact":
        return needed
    if buckets != "pow2":
        raise MigxError(f"unknown buckets {buckets!r}; use 'pow2' or 'exact'")
    b = max(min_bucket, 1 << (needed - 1).bit_length())
    return min(b, max_len)


class KVCacheDecoder:
    """Runs a KV-cache decoder step by step on a backend with its cache resident on the device.

    `dynamic(T)` returns the model's program with the past length as a dynamic range and T new
    tokens (the importer with input_dims={P: (0, max_len - T), T: T}); `past_shapes` maps each
    past input to its shape with the cache at max_len."""

    def __init__(
        self,
        dynamic: Callable[[int], Any],
        past_shapes: dict[str, tuple[int, ...]],
        max_len: int,
        backend: Any = None,
        *,
        buckets: str = "pow2",
        max_programs: int = 8,
        options: Any = None,
        dtype: str = "float32",
    ):
        from .runtime import get_backend

        self.backend = backend or get_backend()
        self.max_len, self.buckets, self.options = max_len, buckets, options
        self._dynamic = dynamic
        self._dyn_cache: dict[int, Any] = {}
        self.programs = ShapeGraphs(max_programs)
        self.caches: dict[str, int] = {}
        b = self.backend
        getattr(b, "make_current", lambda: None)()
        stream = b.streams.create()
        try:
            for name, shape in past_shapes.items():
                zeros = np.zeros(shape, dtypes.np_dtype(dtype))
                ptr = b.memory.malloc(zeros.nbytes)
                self.caches[f"cache_{name}"] = ptr
                b.memory.copy("h2d", ptr, zeros.ctypes.data, zeros.nbytes, stream)  # stale rows must be finite
            b.streams.sync(stream)
        finally:
            b.streams.destroy(stream)
        self.cache_bytes = sum(int(np.prod(s)) for s in past_shapes.values()) * dtypes.dtype(dtype).size

    def _program(self, new: int, bucket: int) -> Any:
        from migx_explore.compiler.kv_cache import kv_cache_bucket

        from . import compile_program_ir
        from .executor import CompiledProgram

        def build() -> Any:
            if new not in self._dyn_cache:
                self._dyn_cache[new] = self._dynamic(new)
            program = kv_cache_bucket(self._dyn_cache[new], bucket, self.max_len)
            lowered = compile_program_ir(program, self.options, backend=self.backend)
            return CompiledProgram(lowered, self.backend, external=self.caches)

        return self.programs.get((new, bucket, tuple(sorted(self.caches.items()))), build)

    def step(self, input_ids: np.ndarray, past_len: int, mode: str = "graph") -> np.ndarray:
        """Append the step's K/V at row past_len and return its logits (host copy)."""
        if self.caches is None:
            raise MigxError("this KVCacheDecoder was closed")
        ids = np.asarray(input_ids, np.int64).reshape(1, -1)
        new = ids.shape[1]
        if past_len < 0 or past_len + new > self.max_len:
            raise MigxError(f"past length {past_len} + {new} new tokens exceed the cache of {self.max_len}")
        bucket = bucket_for(past_len + new, self.max_len, self.buckets)
        cp = self._program(new, bucket)
        feed = {"input_ids": ids, "past_len": np.array([past_len], np.int64)}
        key = (new, bucket, tuple(sorted(self.caches.items())))
        if mode == "graph" and key not in self.programs.graphed:
            # Before its first capture the executor warms a program up on whatever its input
            # buffers hold; here that would append at a garbage row of the shared cache. An eager
            # run with this step's inputs sets them (the append is idempotent: same rows, values).
            cp.run(feed, mode="eager")
            self.programs.graphed.add(key)
        return cp.run(feed, mode=mode)[0]

    def memory(self) -> GraphCacheStats:
        return self.programs.stats(self.cache_bytes)

    def close(self) -> None:
        if self.caches is None:
            return
        self.programs.close()
        for ptr in self.caches.values():
            self.backend.memory.free(ptr)
        self.caches = None

    def __enter__(self) -> KVCacheDecoder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- the loop -----------------------------------------------------------------------------------
@dataclass
class Generation:
    tokens: list[int]  # the generated ids (not the prompt)
    logits: list[np.ndarray]  # each step's last-position logits [vocab]
    stats: GraphCacheStats | None = None  # the program cache's report after the loop (GPU runs)


Step = Callable[[np.ndarray, int], np.ndarray]  # (input_ids [1, T], past_len) -> logits [1, T, vocab]


def greedy(
    step: Step, prompt_ids: Any, steps: int, check: Callable[[int, np.ndarray, int], None] | None = None
) -> Generation:
    """Prefill over the prompt at past length 0, then `steps` - 1 single-token steps, each taking
    the previous step's argmax. `check(k, ids, past_len)` runs after each step (tests use it to
    compare modes on the same step)."""
    ids = np.asarray(prompt_ids, np.int64).reshape(1, -1)
    if ids.shape[1] == 0:
        raise MigxError("generate needs a non-empty prompt")
    out = Generation([], [])
    past = 0
    for k in range(steps):
        logits = step(ids, past)[0, -1]
        if check is not None:
            check(k, ids, past)
        token = int(np.argmax(logits))
        out.tokens.append(token)
        out.logits.append(np.array(logits))
        past += ids.shape[1]
        ids = np.array([[token]], np.int64)
    return out
