"""`migx-explore waterfall MODEL`: Δ kernel launches and Δ eager / graph latency when each pass (or
sub-pipeline) is disabled, as a table and a PNG chart."""

from __future__ import annotations

import argparse
import json

from ._inputs import add_inputs_argument, load_program_and_feed
from ._options import Progress, add_exec_mode, add_quiet, exec_modes, heading, print_fake_backend_note
from ._pipeline_args import add_pipeline_arguments, make_session
from ._sweep_args import add_sweep_arguments, sweep_kwargs


def run(args: argparse.Namespace) -> int:
    from ..waterfall import waterfall

    program, name, feed = load_program_and_feed(args)
    s = make_session(program, args, numeric=False, name=name)
    if args.no_backend:
        print("note: without the backend only kernel-launch counts of the un-lowered IR are compared")
    with Progress("waterfall", quiet=args.quiet) as report:
        wf = waterfall(
            s,
            by=args.by,
            modes=tuple(exec_modes(args)),
            iters=args.iters,
            time_gpu=not args.no_gpu,
            inputs=feed,
            progress=report,
            **sweep_kwargs(args),
        )
    heading(f"{name}: what disabling each {args.by} costs")
    print(wf.table())
    print_fake_backend_note()
    print(f"variants ran on: {wf.where}" + (f" ({wf.scale_note})" if wf.scale_note else ""))
    from ..outputs import atomic_file

    if args.png:
        with atomic_file(args.png, suffix=".png") as tmp:
            wf.plot(tmp)
        print(f"wrote {args.png}")
    if args.json:
        with atomic_file(args.json) as tmp, open(tmp, "w") as f:
            json.dump({"model": wf.model, "by": wf.by, "rows": wf.rows(), "note": wf.timing_note}, f, indent=1)
        print(f"wrote {args.json}")
    return 0


def register(sub) -> None:
    from ..loading import add_model_arguments

    p = sub.add_parser("waterfall", help="cost of disabling each pass: Δ launches and Δ eager/graph latency")
    add_model_arguments(p)
    add_pipeline_arguments(p)
    p.add_argument(
        "--by",
        choices=("pass", "pipeline", "prefix"),
        default="pass",
        help="what one variant disables: a pass, a sub-pipeline, or every pass up to a point (default pass)",
    )
    add_exec_mode(p, old=("--mode-timing",))
    p.add_argument("--iters", type=int, default=50, help="timed runs per variant and mode (default 50)")
    p.add_argument("--no-gpu", action="store_true", help="count launches only")
    p.add_argument("--png", default=None, metavar="F.png", help="write the chart here")
    p.add_argument("--json", default=None, metavar="F.json", help="write the rows here")
    add_inputs_argument(p, "GPU timings")
    add_sweep_arguments(p)
    add_quiet(p)
    p.set_defaults(func=run)
