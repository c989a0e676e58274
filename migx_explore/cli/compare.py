"""`migx-explore compare MODEL LOG`: our pipelines on MODEL beside MIGraphX's compile log of it,
pass by pass (what each pass did to the ops, instruction counts, kernels, a graph diff after it),
and the first pass where the two part."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from ..loading import load_program
    from ..migraphx import read_log
    from ..migraphx.compare import compare
    from ._pipeline_args import make_session

    log = read_log(args.log, version=args.migraphx)
    if log.kind != "trace":
        from migx_explore.compiler.errors import MigxError

        raise MigxError(f"{args.log}: a printed program, not a compile log (MIGRAPHX_TRACE_COMPILE=1 output)")
    if args.migraphx is None and log.read.catalogue:
        args.migraphx = log.read.catalogue  # our pipelines follow the catalogue the log matches
    program, name = load_program(args)
    ours = make_session(program, args, numeric=False, name=name).run()
    print(log.read.summary().splitlines()[0])
    print(compare(ours, log.trace).report())
    return 0


def register(sub) -> None:
    from ..loading import add_model_arguments
    from ._pipeline_args import add_pipeline_arguments

    p = sub.add_parser("compare", help="our passes beside a MIGraphX compile log of the same model")
    add_model_arguments(p)
    p.add_argument("log", metavar="LOG", help="MIGRAPHX_TRACE_COMPILE=1 migraphx-driver compile output")
    add_pipeline_arguments(p)
    p.set_defaults(func=run)
