"""`migx-explore perf MODEL [--exec-mode eager,graph]`: compile for the GPU and time it.

Prints device time (events around the program), host time per run and per enqueue, for each
mode, then the slowest kernels of an eager run (like migraphx-driver perf)."""

from __future__ import annotations

import argparse

from migx_explore.compiler.errors import MigxError

from ._options import (
    add_compile_mode,
    add_exec_mode,
    add_quiet,
    exec_modes,
    heading,
    plural,
    print_fake_backend_note,
    step,
)
from ._precision import add_precision_arguments, precision_options


def run(args: argparse.Namespace) -> int:
    from ._inputs import load_program_and_feed

    program, label, feed = load_program_and_feed(args)
    modes = exec_modes(args)
    try:
        from migx_explore.gpu.runtime import unavailable_reason
        from migx_explore.gpu.timing import time_program

        from .. import gpu
    except ImportError as e:  # pragma: no cover - the GPU layer itself is broken
        raise MigxError(f"the GPU layer could not be loaded ({e})") from None
    why = unavailable_reason()
    if why:
        raise MigxError(f"no GPU: {why}")
    from migx_explore.gpu.pipelines import CompileOptions

    options = CompileOptions(mode=args.compile_mode, **precision_options(args))
    if any(p.shape.dynamic_shape for p in program.main.params()):
        return _perf_buckets(program, label, feed, options, modes, args)
    with step(f"compiling {label} for the GPU", args):
        compiled = gpu.compile(program, options)
    try:
        with step(f"timing {label} ({', '.join(modes)})", args):
            res = time_program(
                compiled, modes=modes, warmup=args.warmup, iters=args.iters, per_kernel="eager" in modes, inputs=feed
            )
        mem = compiled.memory()
        print(
            f"{label} on {compiled.backend.describe()}: {plural(res.kernels, 'kernel')}, "
            f"{plural(res.blas_calls, 'BLAS call')}"
            + (f", graph nodes {res.graph_nodes}" if res.graph_nodes >= 0 else "")
            + f"; arena {mem.arena_bytes / 2**20:.2f} MiB (naive {mem.naive_bytes / 2**20:.2f} MiB)"
        )
        heading("timing per mode:")
        print(res.table())
        if "eager" in modes and args.kernels:
            heading(f"slowest kernels of an eager run (up to {args.kernels}):")
            print(res.kernel_table(args.kernels))
        print_fake_backend_note()
    finally:
        compiled.close()
    return 0


def _perf_buckets(program, label, feed, options, modes, args) -> int:
    """A dynamic dimension: one compiled program and graph per size (pow2 buckets past 8 sizes),
    each timed; with --inputs only the size the feed selects."""
    from migx_explore.compiler.passes.split_single_dyn_dim import single_dyn_dim
    from migx_explore.gpu.buckets import BucketedProgram
    from migx_explore.gpu.timing import time_program

    dim, _ = single_dyn_dim(program.main) or (None, None)
    if dim is None:
        raise MigxError("perf: the program has more than one dynamic dimension; fix all but one with --input-dim")
    buckets = "pow2" if dim.max - dim.min + 1 > 8 else ""
    with BucketedProgram(program, options, buckets=buckets) as bucketed:
        sizes = [bucketed.size_of(feed)] if feed else sorted(bucketed.programs)
        how = buckets or "every size"
        print(f"{label}: {len(bucketed.programs)} programs, one per size of the dynamic dim {dim} ({how})")
        for size in sizes:
            compiled = bucketed.programs.get(size) or bucketed.for_inputs(feed)
            res = time_program(
                compiled, modes=modes, warmup=args.warmup, iters=args.iters, per_kernel=False, inputs=feed
            )
            print(
                f"size {size}: {plural(res.kernels, 'kernel')}, {plural(res.blas_calls, 'BLAS call')}"
                + (f", graph nodes {res.graph_nodes}" if res.graph_nodes >= 0 else "")
            )
            print(res.table())
    print_fake_backend_note()
    return 0


def register(sub) -> None:
    from ..loading import add_model_arguments

    p = sub.add_parser("perf", help="compile for the GPU and time eager and graph execution")
    add_model_arguments(p)
    add_precision_arguments(p)
    add_exec_mode(p, old=("--mode",))
    add_compile_mode(p, old=())
    p.add_argument("--iters", type=int, default=100, help="timed runs per mode (default 100)")
    p.add_argument("--warmup", type=int, default=10, help="untimed runs before them (default 10)")
    p.add_argument("--kernels", type=int, default=15, help="slowest kernels to list (0: none)")
    from ._inputs import add_inputs_argument

    add_inputs_argument(p, "timed runs")
    add_quiet(p)
    p.set_defaults(func=run)
