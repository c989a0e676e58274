"""Greedy generation with a KV-cache model (built-in `gpt2_decode` or an ONNX file): a prefill,
then decode steps, on the reference evaluator or the GPU (eager or graph mode).

Both targets run the same per-bucket programs (compiler/kv_cache.py): the past length is
a runtime input and the cache is preallocated at `max_len`; on the GPU the cache stays on the
device and each step writes only its new K/V rows (gpu/decode.py); the reference evaluator
carries the caches as arrays.

    generate("gpt2_decode", [1, 2, 3], steps=8)                        # reference evaluator
    generate("gpt2_decode", [1, 2, 3], steps=8, target="gpu", mode="graph")
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from migx_explore.compiler.errors import MigxError

if TYPE_CHECKING:
    from .session import Session


def _model_proto(source: Any):
    import onnx

    from . import models

    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (str, os.PathLike)) and str(source) in models.list_models():
        return models.get_model(str(source))
    if isinstance(source, (str, os.PathLike)) and os.path.isfile(source):
        return onnx.load(str(source))
    raise MigxError(f"generate needs an ONNX model or a built-in model name, got {source!r}")


@dataclass
class CacheLayout:
    """Where a KV-cache model keeps its cache: the past inputs, their symbolic cache-length dim
    (a dim_param of the pasts that input_ids does not use), the new-token dim, and each past's
    shape with the cache at max_len."""

    pasts: list[str]
    past_dim: str
    new_dim: str
    shapes: dict[str, tuple[int, ...]]


def cache_layout(model, max_len: int) -> CacheLayout:
    from migx_explore.compiler.onnx.dims import symbolic_dims

    syms = symbolic_dims(model)
    inputs = {vi.name: vi for vi in model.graph.input}
    pasts = [n for n in inputs if n.startswith("past_")]
    ids_dims = inputs["input_ids"].type.tensor_type.shape.dim if "input_ids" in inputs else []
    new_dim = ids_dims[-1].dim_param if len(ids_dims) else ""
    cand = [s for s, uses in syms.items() if s != new_dim and all(n in pasts for n, _ in uses)]
    if not pasts or not new_dim or len(cand) != 1:
        raise MigxError(
            "generate needs a KV-cache model: input_ids with a symbolic new-token dim and past_* inputs "
            "sharing one symbolic cache-length dim (e.g. gpt2_decode)"
        )
    shapes = {}
    for n in pasts:
        dims = inputs[n].type.tensor_type.shape.dim
        shapes[n] = tuple(max_len if d.dim_param == cand[0] else int(d.dim_value) or 1 for d in dims)
    return CacheLayout(pasts, cand[0], new_dim, shapes)


def _dynamic_import(blob: bytes, layout: CacheLayout, max_len: int) -> Callable[[int], Any]:
    from .loading import load

    def dynamic(new: int):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load(blob, {layout.past_dim: (0, max_len - new), layout.new_dim: new})

    return dynamic


class ReferenceDecoder:
    """The same per-bucket programs on the numpy reference evaluator; caches are arrays."""

    def __init__(self, dynamic: Callable[[int], Any], layout: CacheLayout, max_len: int, buckets: str = "pow2"):
        self._dynamic, self.layout, self.max_len, self.buckets = dynamic, layout, max_len, buckets
        self._programs: dict[tuple[int, int], Any] = {}
        self.caches = {n: np.zeros(s, np.float32) for n, s in layout.shapes.items()}

    def step(self, input_ids: np.ndarray, past_len: int) -> np.ndarray:
        from migx_explore.compiler.kv_cache import cache_name, kv_cache_bucket
        from migx_explore.compiler.ref import evaluate
        from migx_explore.gpu.decode import bucket_for

        ids = np.asarray(input_ids, np.int64).reshape(1, -1)
        bucket = bucket_for(past_len + ids.shape[1], self.max_len, self.buckets)
        key = (ids.shape[1], bucket)
        if key not in self._programs:
            self._programs[key] = kv_cache_bucket(self._dynamic(ids.shape[1]), bucket, self.max_len, return_cache=True)
        program = self._programs[key]
        feed = {
            "input_ids": ids,
            "past_len": np.array([past_len], np.int64),
            **{cache_name(n): c for n, c in self.caches.items()},
        }
        outs = evaluate(program, feed)
        names = program.output_names
        for n in self.caches:
            self.caches[n] = outs[names.index(n.replace("past_", "present_"))]
        return outs[0]


def decoder(
    source: Any,
    *,
    target: str = "ref",
    max_len: int | None = None,
    buckets: str = "pow2",
    max_programs: int = 8,
    backend: Any = None,
    options: Any = None,
) -> Any:
    """A step-by-step decoder for `source` (ReferenceDecoder, or gpu.decode.KVCacheDecoder)."""
    model = _model_proto(source)
    if max_len is None:
        from .models.gpt2_decode import MAX_POSITIONS

        max_len = MAX_POSITIONS
    layout = cache_layout(model, max_len)
    dynamic = _dynamic_import(model.SerializeToString(), layout, max_len)
    if target == "ref":
        return ReferenceDecoder(dynamic, layout, max_len, buckets)
    if target != "gpu":
        raise MigxError(f"unknown target {target!r}; use 'ref' or 'gpu'")
    from migx_explore.gpu.decode import KVCacheDecoder

    return KVCacheDecoder(
        dynamic, layout.shapes, max_len, backend, buckets=buckets, max_programs=max_programs, options=options
    )


def generate(source: Any, prompt_ids: Any, steps: int, *, target: str = "ref", mode: str = "graph", **kw: Any) -> Any:
    """Greedy tokens and per-step logits (gpu.decode.Generation); `.stats` holds the GPU program
    cache's memory report (None on the reference evaluator)."""
    from migx_explore.gpu.decode import greedy

    if steps < 1:
        raise MigxError("generate needs steps >= 1")
    dec = decoder(source, target=target, **kw)
    rows = len(np.asarray(prompt_ids).reshape(-1)) + steps - 1
    if rows > dec.max_len:
        if target != "ref":
            dec.close()
        raise MigxError(
            f"a prompt of {rows - steps + 1} tokens and {steps} steps need {rows} cache rows, but the "
            f"cache holds {dec.max_len} (max_len / --max-len)"
        )
    if target == "ref":
        return greedy(dec.step, prompt_ids, steps)
    try:
        out = greedy(lambda ids, past: dec.step(ids, past, mode), prompt_ids, steps)
        out.stats = dec.memory()
    finally:
        dec.close()
    return out


def generate_from_session(
    session: Session, prompt_ids: Any, steps: int, *, target: str = "ref", mode: str = "graph", **kw: Any
) -> Any:
    """Greedy generation with a session's KV-cache model (an ONNX file or built-in model): prefill,
    then decode steps feeding presents back as pasts. It reloads the model from the session's
    source because it recompiles per shape."""
    if session.source.get("kind") not in ("model", "onnx"):
        raise MigxError("generate needs a session made by from_model or from_onnx (it recompiles per shape)")
    return generate(session.source["value"], prompt_ids, steps, target=target, mode=mode, **kw)
