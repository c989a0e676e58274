"""IR metrics read off snapshots: kernel launches, op histograms (what the explorer charts)."""

from __future__ import annotations

from collections import Counter

from migx_explore.compiler.snapshot import ModuleSnapshot, ProgramSnapshot

# Ops that never launch a kernel: views, bookkeeping and memory planning (at least the ops the
# executor makes no step for, gpu/steps.py's FREE_OPS).
NO_LAUNCH = frozenset(
    {
        "identity",
        "get_tuple_elem",
        "allocate",
        "load",
        "hip::allocate",
        "hip::hip_allocate_memory",
        "hip::hip_copy_literal",
        "check_context",
        "gpu::check_context",
        "gpu::concat_alias",
        "hip::sync_stream",
        "gpu::set_stream",
        "gpu::record_event",
        "gpu::wait_event",
        "select_module",
    }
)


def launches(rec_op) -> bool:
    if rec_op.name.startswith("@") or rec_op.name in NO_LAUNCH:
        return False
    return not (rec_op.has("view") or rec_op.has("no_launch"))


def launch_count(snap: ProgramSnapshot, module: str = "main") -> int:
    """Instructions of `module` that would launch a GPU kernel (or BLAS call) when run."""
    m: ModuleSnapshot = snap.module(module)
    return sum(1 for r in m.instrs if launches(r.op))


def op_histogram(snap: ProgramSnapshot, module: str = "main") -> Counter:
    return Counter(r.op.name for r in snap.module(module).instrs if not r.op.name.startswith("@"))


def ir_metrics(snap: ProgramSnapshot) -> dict[str, int]:
    main = snap.module("main")
    return {
        "instructions": snap.total_instructions(),
        "main_instructions": len(main),
        "launches": launch_count(snap),
        "fused_modules": len(snap.modules) - 1,
        "literals": sum(1 for r in main.instrs if r.op.name == "@literal"),
    }
