"""Arguments shared by verbs that run the pipelines (trace, verify, compile, waterfall)."""

from __future__ import annotations

import argparse

from migx_explore.compiler.pass_infra import build_pipelines
from migx_explore.gpu.migraphx_catalogue import LATEST, VERSIONS
from migx_explore.gpu.pipelines import CompileOptions

from ._options import add_compile_mode
from ._precision import add_precision_arguments, precision_options


def add_pipeline_arguments(p: argparse.ArgumentParser, *, inputs: bool = True) -> None:
    add_compile_mode(p)
    p.add_argument(
        "--migraphx",
        choices=VERSIONS,
        default=None,
        help=f"which MIGraphX develop pass list to follow (default: {LATEST}; for a MIGraphX log: the closer one)",
    )
    p.add_argument(
        "--spec",
        default=None,
        help="pipeline spec, e.g. 'required,optimize_rewrite{-fuse_horizontal},fusion' (default: all five pipelines)",
    )
    p.add_argument("--no-backend", action="store_true", help="stop after the target-independent pipelines")
    p.add_argument("--nhwc", action="store_true", help="layout_convolution to NHWC (MIGRAPHX_ENABLE_NHWC)")
    add_precision_arguments(p, inputs=inputs)


def make_session(program, args: argparse.Namespace, *, numeric: bool, name: str):
    import os

    from ..session import Session

    opts = CompileOptions(
        mode=args.compile_mode,
        enable_nhwc=args.nhwc,
        migraphx=getattr(args, "migraphx", None) or LATEST,
        **precision_options(args),
    )
    if os.environ.get("MIGRAPHX_GPU_OPTIONS"):  # backend options, as MIGraphX reads them (PR #5131)
        opts = opts.with_gpu_options(os.environ["MIGRAPHX_GPU_OPTIONS"])
    s = Session(program, name=name, options=opts, include_backend=not args.no_backend, numeric=numeric)
    if args.spec:
        s.pipelines = build_pipelines(args.spec, s.config.catalog)
    return s
