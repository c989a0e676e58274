"""The GPU backend passes (pure IR; no GPU needed). Importing registers them with the pass
registry, so gpu/pipelines.py finds them by name."""

from . import allocation, compile_ops, fuse_ops, layout, lowering, memory  # noqa: F401  (registration)
from .memory import MemoryStats, memory_stats

__all__ = ["MemoryStats", "memory_stats"]
