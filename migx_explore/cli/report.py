"""`migx-explore report MODEL --out report.html [--spec SPEC] [--fp16 ...] [--inputs FEED.npz] [--gpu]`:
one self-contained HTML page of the passes (migx_explore.report), to attach or hand around."""

from __future__ import annotations

import argparse

from ._inputs import add_inputs_argument, load_program_and_feed
from ._options import Progress, add_quiet
from ._pipeline_args import add_pipeline_arguments, make_session


def run(args: argparse.Namespace) -> int:
    from ..report import write_report
    from ..report.repro import cli_command

    _check_out(args.out)  # refuse a bad --out before spending a minute on the trace
    if args.model_explorer is not None:
        from ..model_explorer import check_export_folder

        check_export_folder(args.model_explorer)
    if args.gpu:
        from ..errors import GpuUnavailable
        from ..gpu_bridge import unavailable_reason

        why = unavailable_reason()
        if why:
            raise GpuUnavailable(f"--gpu: GPU timing unavailable: {why}")
    program, name, feed = load_program_and_feed(args)
    s = make_session(program, args, numeric=not args.no_numeric, name=name)
    s.source = _source(args)
    if feed is not None:
        s.traces.set_inputs(feed)
    with Progress(f"tracing {name}", quiet=args.quiet) as tracing:
        s.traces.on_progress = tracing
        s.run()
    drawing = Progress(f"drawing {name}", quiet=args.quiet)
    command = cli_command(getattr(args, "command_line", None))
    with drawing:
        info = write_report(
            s,
            args.out,
            graphs=not args.no_graphs,
            gpu=args.gpu,
            command=command,
            inputs_path=args.inputs,
            waterfall_by=None if args.waterfall == "none" else args.waterfall,
            iters=args.iters,
            warmup=args.warmup,
            progress=drawing,
        )
    print(info)
    if args.model_explorer is not None:  # after write_report: with --gpu it carries the kernel times
        from ..model_explorer import export_trace

        e = export_trace(s, args.model_explorer)
        print(f"wrote a Model Explorer trace ({len(e.passes)} pass graphs, {e.nodes} nodes) to {args.model_explorer}")
    if s.trace.error:
        print(f"error: {s.trace.error} (the report shows the passes up to it)")
        return 1
    return 0


def _check_out(path: str) -> None:
    import os

    from migx_explore.compiler.errors import MigxError

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise MigxError(f"--out {path!r} is a folder; give a file name such as report.html")
    if not os.path.isdir(folder):
        raise MigxError(f"--out {path!r}: folder {folder!r} does not exist")


def _source(args: argparse.Namespace) -> dict:
    """Where the model came from, for the report's repro script (Session.source's form)."""
    import os

    from ..loading import parse_input_dims

    dims = parse_input_dims(args.input_dim)
    model = str(args.model)
    if not os.path.exists(model):
        return {"kind": "model", "value": model, "input_dims": dims}
    return {"kind": "onnx" if model.endswith(".onnx") else "program", "value": model, "input_dims": dims}


def register(sub) -> None:
    from ..loading import add_model_arguments

    p = sub.add_parser(
        "report",
        help="write one self-contained HTML report of the passes (tree, stats, rewrite "
        "summaries, numeric checks, text and graph diffs, GPU timing with --gpu)",
    )
    add_model_arguments(p)
    add_pipeline_arguments(p)
    p.add_argument("--out", required=True, help="the .html file to write")
    add_inputs_argument(p)
    p.add_argument(
        "--gpu", action="store_true", help="also time the final program (eager and graph) and its waterfall on the GPU"
    )
    p.add_argument(
        "--waterfall",
        choices=("pipeline", "pass", "prefix", "none"),
        default="pipeline",
        help="with --gpu: the waterfall's variants (default: each sub-pipeline off)",
    )
    p.add_argument("--iters", type=int, default=50, help="with --gpu: timed runs per mode")
    p.add_argument("--warmup", type=int, default=5, help="with --gpu: untimed runs before them (default 5)")
    p.add_argument("--no-graphs", action="store_true", help="text diffs only (no graphviz drawing)")
    p.add_argument("--no-numeric", action="store_true", help="skip the per-pass numeric check")
    p.add_argument(
        "--model-explorer",
        metavar="DIR",
        help="also write the trace for Google Model Explorer (docs/model_explorer.md; with --gpu, kernel times too)",
    )
    add_quiet(p)
    p.set_defaults(func=run)
