"""`migx-explore waterfall MODEL`: Δ kernel launches and Δ eager / graph latency when each pass (or
sub-pipeline) is disabled, as a table and a PNG chart."""

from __future__ import annotations

import argparse
import json
import sys

from ._inputs import add_inputs_argument, load_program_and_feed
from ._pipeline_args import add_pipeline_arguments, make_session
from ._sweep_args import add_sweep_arguments, sweep_kwargs


def run(args: argparse.Namespace) -> int:
    from ..waterfall import waterfall

    program, name, feed = load_program_and_feed(args)
    s = make_session(program, args, numeric=False, name=name)
    if args.no_backend:
        print("note: without the backend only kernel-launch counts of the un-lowered IR are compared")
    from ..sweep import terminal_progress

    report, end = terminal_progress("waterfall") if sys.stderr.isatty() else (None, lambda: None)
    try:
        wf = waterfall(
            s,
            by=args.by,
            modes=tuple(args.mode_timing.split(",")),
            iters=args.iters,
            time_gpu=not args.no_gpu,
            inputs=feed,
            progress=report,
            **sweep_kwargs(args),
        )
    finally:
        end()
    print(wf.table())
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
    p.add_argument("--by", choices=("pass", "pipeline", "prefix"), default="pass")
    p.add_argument("--mode-timing", default="eager,graph", help="timing modes, e.g. eager,graph")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--no-gpu", action="store_true", help="count launches only")
    p.add_argument("--png", default=None, help="write the chart here")
    p.add_argument("--json", default=None, help="write the rows here")
    add_inputs_argument(p, "GPU timings")
    add_sweep_arguments(p)
    p.set_defaults(func=run)
