"""The GPU backend passes (pure IR; no GPU needed), one module per pass, named after it;
gpu/pipelines.py finds them by name."""

from __future__ import annotations

from migx_explore.compiler.pass_infra.base import Pass
from migx_explore.compiler.pass_infra.registry import register

from .adjust_allocation import AdjustAllocation
from .check_context import CheckContext
from .compile_blas import CompileBlas
from .compile_miopen import CompileMiopen
from .compile_ops import CompileOps
from .eliminate_allocation import EliminateAllocation
from .eliminate_concat import EliminateConcat
from .eliminate_contiguous import EliminateContiguous
from .fuse_mlss import FuseMlss
from .fuse_ops import FuseOps
from .lower_device_ops import LowerDeviceOps
from .lower_reshape import LowerReshape
from .lowering import Lowering
from .memory_coloring import MemoryColoring, MemoryStats, memory_stats
from .preallocate_param import PreallocateParam
from .promote_literals import PromoteLiterals
from .replace_allocate import ReplaceAllocate
from .schedule import Schedule
from .sync_device import SyncDevice
from .write_literals import WriteLiterals

# Every pass of this package, in module order; the registry reads this table (nothing registers
# by being imported). tests/passes/test_pass_tables.py checks it against the folder.
GPU_PASSES: tuple[type[Pass], ...] = (
    AdjustAllocation,
    CheckContext,
    CompileBlas,
    CompileMiopen,
    CompileOps,
    EliminateAllocation,
    EliminateConcat,
    EliminateContiguous,
    FuseMlss,
    FuseOps,
    LowerDeviceOps,
    LowerReshape,
    Lowering,
    MemoryColoring,
    PreallocateParam,
    PromoteLiterals,
    ReplaceAllocate,
    Schedule,
    SyncDevice,
    WriteLiterals,
)

# Modules here that hold no pass of their own (shared by several passes).
HELPERS: tuple[str, ...] = ("conv_layout", "entry_convert")

register(GPU_PASSES)

__all__ = ["GPU_PASSES", "HELPERS", "MemoryStats", "memory_stats"]
