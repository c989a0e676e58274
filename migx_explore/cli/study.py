"""`migx-explore study order MODEL [MODEL ...]`: which pass orderings matter. Every movable pass
swapped with its neighbour (or, `--scope pipeline`, adjacent sub-pipelines swapped), each variant
compiled as a Dask task (migx_explore.sweep), the moves that change something ranked with the
rewrites they gain or lose. Several models (`models/*.onnx`) write one table with `--out`
(parquet through pyarrow, else CSV)."""

from __future__ import annotations

import argparse
import json

from ._options import add_quiet
from ._sweep_args import add_sweep_arguments, sweep_kwargs


def run(args: argparse.Namespace) -> int:
    from migx_explore.compiler.errors import MigxError

    from ..outputs import atomic_file
    from ..study import study_order
    from ..study_set import write_rows
    from ..sweep import Sweeper
    from ._options import Progress
    from ._pipeline_args import make_session

    if args.png and len(args.models) > 1:
        raise MigxError("--png draws one model's study; give one MODEL or leave --png out")
    studies = []
    with Sweeper(**sweep_kwargs(args)) as sw:
        for model in args.models:
            program, name = _load(model, args)
            s = make_session(program, args, numeric=False, name=name)
            with Progress(f"study {name}", quiet=args.quiet) as report:
                st = study_order(
                    s,
                    scope=args.scope,
                    gpu=args.gpu,
                    numeric=not args.no_numeric,
                    iters=args.iters,
                    progress=report,
                    sweeper=sw,
                )
            studies.append(st)
            print(st.report(top=args.top))
            print()
    if args.png:
        with atomic_file(args.png, suffix=".png") as tmp:
            studies[0].plot(tmp)
        print(f"wrote {args.png}")
    if args.out:
        written = write_rows(studies, args.out)
        print(f"wrote {written}" + ("" if written == args.out else " (pyarrow is not installed: CSV instead)"))
    if args.json:
        with atomic_file(args.json) as tmp, open(tmp, "w") as f:
            json.dump(
                [
                    {
                        "model": st.model,
                        "scope": st.scope,
                        "where": st.where,
                        "rows": st.rows(),
                        "ranked": [st.describe(r) for r in st.ranked()],
                        "skipped": [{"move": k.label, "rule": k.reason} for k in st.skipped],
                    }
                    for st in studies
                ],
                f,
                indent=1,
                default=str,
            )
        print(f"wrote {args.json}")
    return 0


def _load(model: str, args: argparse.Namespace):
    from ..loading import load_program, model_label, parse_input_dims

    dims = parse_input_dims(args.input_dim)
    return load_program(model, dims or None), model_label(model)


def register(sub) -> None:
    from ._pipeline_args import add_pipeline_arguments

    p = sub.add_parser("study", help="ordering study: which pass orderings change this model's program")
    what = p.add_subparsers(dest="study", metavar="STUDY", required=True)
    o = what.add_parser("order", help="swap every movable pass with its neighbour; rank the moves that matter")
    o.add_argument("models", metavar="MODEL", nargs="+", help=".onnx files or built-in model names")
    o.add_argument(
        "--input-dim",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="fix a symbolic input dimension (every MODEL)",
    )
    add_pipeline_arguments(o, inputs=False)  # study has no --inputs: variants run on random inputs
    o.add_argument(
        "--scope",
        choices=("pass", "pipeline"),
        default="pass",
        help="pass: swap adjacent passes (within and across pipelines); pipeline: swap sub-pipelines",
    )
    o.add_argument("--gpu", action="store_true", help="also time every variant eagerly and through graph capture")
    o.add_argument("--iters", type=int, default=30, help="timing iterations per variant (--gpu)")
    o.add_argument("--no-numeric", action="store_true", help="skip the numeric check of each variant")
    o.add_argument("--top", type=int, default=10, help="moves listed per model")
    o.add_argument("--out", default=None, help="all rows to .parquet (pyarrow) or .csv")
    o.add_argument("--png", default=None, help="chart of the ranked moves (one MODEL)")
    o.add_argument("--json", default=None, help="rows and ranked moves as JSON")
    add_sweep_arguments(o)
    add_quiet(o)
    o.set_defaults(func=run)
