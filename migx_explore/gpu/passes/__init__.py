"""The GPU backend passes (pure IR; no GPU needed), one module per pass, named after it.
Importing this package registers them with the pass registry, so gpu/pipelines.py finds them by
name."""

import importlib
import pkgutil

from .memory_coloring import MemoryStats, memory_stats


def _load_pass_modules() -> None:
    # Every module in this package defines one pass; importing registers it.
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_load_pass_modules()

__all__ = ["MemoryStats", "memory_stats"]
