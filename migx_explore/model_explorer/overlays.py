"""Node-data overlays for an exported trace, in Model Explorer's `ModelNodeData` JSON:
`{graphId: {"results": {nodeId: {"value": v}}, "gradient": [...]}}` (node_data_builder.py).

- provenance: the number of the pass that made each instruction (0: the input program had it),
  so a pass graph coloured by it shows what each stage contributed;
- gpu_time_us: microseconds per kernel step of the eager run (gpu.timing.kernel_breakdown), on
  the final program's graphs, when the session was timed;
- numeric_error: max |error| of each value against the input program's value it stands for (the
  same stable id, or the one it replaced, through the passes' recorded replacements), on the
  reference evaluator and the session's inputs, for the passes the numeric check ran on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.pass_infra import Trace
from migx_explore.compiler.snapshot import ProgramSnapshot

# Low to high: blue (old / fast / exact) to red (new / slow / off).
GRADIENT = [
    {"stop": 0, "bgColor": "#deebf7"},
    {"stop": 0.5, "bgColor": "#fdd49e"},
    {"stop": 1, "bgColor": "#ef6548"},
]


def _graph_data(results: Mapping[str, float], name: str) -> dict[str, Any]:
    return {"name": name, "results": {k: {"value": v} for k, v in results.items()}, "gradient": GRADIENT}


def provenance_data(graphs: Mapping[str, ProgramSnapshot], created: Mapping[int, tuple[int, str]]) -> dict[str, Any]:
    out = {}
    for gid, snap in graphs.items():
        res = {str(r.id): created.get(r.id, (0, ""))[0] for r in snap.module("main").instrs}
        out[gid] = _graph_data(res, "created by pass #")
    return out


def kernel_times(final: ProgramSnapshot, timing: Any) -> dict[int, float]:
    """Instruction id -> eager microseconds, from a TimingResult's per-kernel steps (labelled
    `@<position in main> <op>`; an epilogue step adds to its instruction)."""
    eager = getattr(timing, "modes", {}).get("eager")
    if eager is None:
        return {}
    main = final.module("main").instrs
    out: dict[int, float] = {}
    for k in eager.per_kernel:
        head, _, rest = k.instruction.partition(" ")
        if not head.startswith("@") or not head[1:].isdigit():
            continue
        pos = int(head[1:])
        if pos < len(main) and rest.split(" ", 1)[0] == main[pos].op.name:
            out[main[pos].id] = out.get(main[pos].id, 0.0) + float(k.us)
    return out


def gpu_time_data(graphs: Mapping[str, ProgramSnapshot], final: ProgramSnapshot, timing: Any) -> dict[str, Any]:
    times = {str(i): round(us, 3) for i, us in kernel_times(final, timing).items()}
    if not times:
        return {}
    final_main = final.module("main")
    data = _graph_data(times, "GPU µs (eager)")
    return {gid: data for gid, snap in graphs.items() if snap.module("main") is final_main}


def numeric_error_data(
    trace: Trace, passes: Sequence[Any], graphs: Mapping[str, ProgramSnapshot], inputs: Mapping[str, Any]
) -> dict[str, Any]:
    from migx_explore.compiler.ref import evaluate_all, with_buffer_params

    def values(snap: ProgramSnapshot) -> dict[int, np.ndarray] | None:
        prog = snap.to_program()
        try:
            with np.errstate(all="ignore"):
                return evaluate_all(prog, with_buffer_params(prog, inputs))
        except MigxError:  # an op without reference compute (lowered kernels): nothing to show
            return None

    reference = values(trace.initial)
    if reference is None:
        return {}
    out = {}
    claims: dict[int, int] = {}  # new id -> the id whose value it claims to compute
    done = 0
    for p in passes:
        rec = trace.records[p.index]
        for r in trace.records[done : p.index + 1]:
            if r.depth == 0:  # a top-level record holds its nested passes' claims too
                for c in r.replacements:
                    claims.setdefault(c.new, c.old)
        done = p.index + 1
        if rec.numeric is None or rec.numeric.note:
            continue  # the check did not run here (or could not): neither can this
        got = values(graphs[p.graph])
        if got is None:
            continue
        res = {}
        for i, v in got.items():
            j, hops = i, 0
            while j not in reference and j in claims and hops < 64:  # through chains of rewrites
                j, hops = claims[j], hops + 1
            ref = reference.get(j)
            if ref is not None and np.shape(ref) == np.shape(v) and np.size(v):
                err = float(np.max(np.abs(np.asarray(v, np.float64) - np.asarray(ref, np.float64))))
                res[str(i)] = err if math.isfinite(err) else 1e30
        if res:
            out[p.graph] = _graph_data(res, "max |error| vs input program")
    return out


__all__ = ["GRADIENT", "gpu_time_data", "kernel_times", "numeric_error_data", "provenance_data"]
