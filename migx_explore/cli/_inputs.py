"""`--inputs FEED.npz` for every verb that evaluates or runs a model (verify, trace, waterfall,
perf, compile --run, run): the feed's shapes fix symbolic dims, and its values replace the
random inputs (migx_explore/feeds.py)."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

import numpy as np


def add_inputs_argument(p: argparse.ArgumentParser, what: str = "numeric checks") -> None:
    p.add_argument(
        "--inputs",
        metavar="FEED.npz",
        default=None,
        help=f"real inputs for the {what}, keyed by ONNX input name; their shapes fix symbolic dims "
        "(default: seeded random inputs that respect the model: indices below their table's rows, "
        "0/1 masks)",
    )
    p.add_argument(
        "--convert-inputs",
        action="store_true",
        help="cast a feed array of another element type (float64 for a float32 input, int32 for int64, "
        "...) to the input's type instead of refusing it, as ONNX Runtime does",
    )


def load_program_and_feed(
    args: argparse.Namespace, *, exact_outputs: bool = False
) -> tuple[Any, str, dict[str, np.ndarray] | None]:
    """(program, label, feed or None) from MODEL, --input-dim and --inputs; `exact_outputs` (run)
    freezes the inputs of ops whose output length depends on values (feeds.load_with_feed)."""
    from ..feeds import load_with_feed
    from ..loading import model_label, parse_input_dims

    path = getattr(args, "inputs", None) or None
    dims = parse_input_dims(getattr(args, "input_dim", None))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program, feed = load_with_feed(
            args.model,
            path,
            dims or None,
            convert_inputs=getattr(args, "convert_inputs", False),
            exact_outputs=exact_outputs,
        )
    from ..loading import collapse_warnings

    for line in collapse_warnings([str(w.message) for w in caught]):
        print(f"migx-explore: warning: {line}", file=sys.stderr)
    return program, model_label(args.model), feed
