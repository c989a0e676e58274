"""Greedy generation with a KV-cache model (built-in `gpt2_decode` or an ONNX file): prefill, then
decode steps feeding presents back as pasts, on the reference evaluator or the GPU (eager, or
graph mode with one captured graph per shape: gpu/decode.py's ShapeGraphs).

    generate("gpt2_decode", [1, 2, 3], steps=8)                        # reference evaluator
    generate("gpt2_decode", [1, 2, 3], steps=8, target="gpu", mode="graph")
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .compiler.errors import MigxError


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


def empty_cache_shape(model) -> tuple[list[str], tuple[int, ...]]:
    """The model's input names and a past's shape with an empty cache: the symbolic dims of the
    past inputs that input_ids does not use are the cache length (0); any other is 1."""
    from .compiler.onnx.dims import symbolic_dims

    syms = symbolic_dims(model)
    names = [vi.name for vi in model.graph.input if vi.name not in {t.name for t in model.graph.initializer}]
    past = next((vi for vi in model.graph.input if vi.name.startswith("past_")), None)
    if "input_ids" not in names or past is None:
        raise MigxError("generate needs a KV-cache model with inputs input_ids and past_* (e.g. gpt2_decode)")
    id_syms = {s for s, uses in syms.items() if any(n == "input_ids" for n, _ in uses)}
    lens = []
    for d in past.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            lens.append(int(d.dim_value))
        else:
            lens.append(0 if d.dim_param not in id_syms else 1)
    return names, tuple(lens)


def generate(source: Any, prompt_ids: Sequence[int], steps: int, *, target: str = "ref", mode: str = "graph",
             max_programs: int = 8, backend: Any = None, options: Any = None) -> Any:
    """Greedy tokens and per-step logits (gpu.decode.Generation); `.stats` holds the GPU shape
    cache's memory report (None on the reference evaluator)."""
    from .gpu.decode import ShapeGraphs
    from .gpu.decode import generate as loop
    from .loading import load

    if steps < 1:
        raise MigxError("generate needs steps >= 1")
    model = _model_proto(source)
    names, kv_shape = empty_cache_shape(model)
    blob = model.SerializeToString()
    if target == "ref":
        from .compiler.ref import evaluate

        programs: dict[tuple, Any] = {}

        def run(feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            key = tuple(np.shape(v) for v in feed.values())
            if key not in programs:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    programs[key] = load(blob, feed=feed)
            return evaluate(programs[key], feed)

        out = loop(run, names, prompt_ids, steps, kv_shape)
        out.stats = None
        return out
    if target != "gpu":
        raise MigxError(f"unknown target {target!r}; use 'ref' or 'gpu'")
    from .gpu import compile_program

    cache = ShapeGraphs(lambda feed: compile_program(blob, options, backend=backend,
                                                     input_dims={k: list(np.shape(v)) for k, v in feed.items()}),
                        max_programs=max_programs)
    try:
        out = loop(lambda feed: cache.run(feed, mode), names, prompt_ids, steps, kv_shape)
        out.stats = cache.memory()
    finally:
        cache.close()
    return out
