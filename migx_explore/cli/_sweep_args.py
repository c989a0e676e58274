"""Arguments of the verbs whose variants run as Dask tasks (waterfall, study): where they run."""

from __future__ import annotations

import argparse
from typing import Any


def add_sweep_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sweep (Dask; needs the [sweep] extra, else variants run one after another)")
    g.add_argument(
        "--cluster",
        default=None,
        metavar="tcp://HOST:8786",
        help="a running Dask scheduler (default: $MIGX_DASK_SCHEDULER, else a local cluster)",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local worker processes (default: one per core, up to the variants; 0: run serially)",
    )
    g.add_argument("--gpus", type=int, default=None, help="one worker per GPU (dask-cuda where installed)")


def sweep_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"cluster": args.cluster, "workers": args.workers, "gpus": args.gpus}
