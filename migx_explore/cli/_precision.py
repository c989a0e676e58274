"""--fp16 / --bf16 / --int8 / --fp8 and --calibration, as migraphx-driver spells them, for every
verb that compiles a program (read, run, trace, verify, perf, waterfall, compile)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from migx_explore.compiler.errors import MigxError

_FLAGS = ("fp16", "bf16", "int8", "fp8")


def add_precision_arguments(p: argparse.ArgumentParser, *, inputs: bool = True) -> None:
    g = p.add_mutually_exclusive_group()
    for name in _FLAGS:
        g.add_argument(
            f"--{name}",
            dest="precision",
            action="store_const",
            const=name,
            help=f"quantize to {name} first (the quantize stage runs before the five pipelines)",
        )
    p.set_defaults(precision="fp32")
    p.add_argument(
        "--calibration",
        action="append",
        default=[],
        metavar="FEED.npz",
        help="int8/fp8: a feed to calibrate scales on (repeatable; default: "
        + ("the --inputs feed, else " if inputs else "")
        + "seeded random inputs with a warning)",
    )


def _load_feed(path: str) -> dict:
    """A calibration feed through the one safe .npz reader (never unpickled), errors naming the flag."""
    from ..npz import read_npz

    if not os.path.exists(path):
        raise MigxError(f"--calibration {path}: file not found")
    try:
        return read_npz(path)
    except MigxError as e:
        raise MigxError(f"--calibration {path}: {e}") from None


def precision_options(args: argparse.Namespace) -> dict[str, Any]:
    """CompileOptions keyword arguments for the precision flags of `args`."""
    precision = getattr(args, "precision", "fp32") or "fp32"
    feeds = [_load_feed(p) for p in getattr(args, "calibration", None) or []]
    if getattr(args, "calibration", None) and precision not in ("int8", "fp8"):
        print(
            f"migx-explore: warning: --calibration is used by --int8 / --fp8 only (precision is {precision})",
            file=sys.stderr,
        )
    if not feeds and precision in ("int8", "fp8") and getattr(args, "inputs", None):
        feeds = [_load_feed(args.inputs)]
    return {"precision": precision, "calibration": tuple(feeds)}


def apply_quantize_stage(program: Any, args: argparse.Namespace) -> Any:
    """Run the quantize stage on `program` in place (read / run --target ref); fp32 is a no-op."""
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.compiler.quantize import quantize_pipeline

    opts = precision_options(args)
    stage = quantize_pipeline(opts["precision"], opts["calibration"])
    if stage is not None:
        PassManager().run(program, [stage])
    return program
