"""CPU seconds of the GPU pipelines (`gpu.lower`) per model on the fake backend, cold kernel cache:
what a compile costs before nvrtc, measured without a GPU (issue 44 item 4).

    MIGX_GPU_BACKEND=fake python3 benchmarks/compile_cpu.py [--models yolov10n,resnet18,bert_encoder]
        [--mode eager] [--precision fp16] [--repeat 3] [--profile MODEL] [--top 30]

Prints the median of `--repeat` runs of time.process_time per model; `--profile` prints a cProfile
of one run of that model instead.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time


def lower_seconds(source, mode: str, precision: str) -> float:
    from migx_explore.gpu import lower
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend

    with tempfile.TemporaryDirectory(prefix="migx-compile-cpu-") as cache:
        os.environ["MIGX_EXPLORE_CACHE_DIR"] = cache  # cold: every kernel is compiled (by the fake)
        start = time.process_time()
        lower(source, CompileOptions(mode=mode, precision=precision), backend=get_backend())
        return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="yolov10n,resnet18,bert_encoder")
    ap.add_argument("--mode", default="eager")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", default="", help="cProfile one lower of this model")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--sort", default="tottime")
    args = ap.parse_args()
    os.environ.setdefault("MIGX_GPU_BACKEND", "fake")
    import migx_explore.gpu.executor  # noqa: F401 - imports are not compile time
    from migx_explore import models

    if args.profile:
        source = models.load(args.profile)
        lower_seconds(source, args.mode, args.precision)  # warm the imports and lazy tables
        prof = cProfile.Profile()
        prof.enable()
        lower_seconds(source, args.mode, args.precision)
        prof.disable()
        pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
        return
    for name in args.models.split(","):
        source = models.load(name)
        lower_seconds(source, args.mode, args.precision)  # the first run pays lazy imports
        runs = [lower_seconds(source, args.mode, args.precision) for _ in range(args.repeat)]
        print(
            f"{name:14s} {args.mode} {args.precision}: {statistics.median(runs):.3f} s CPU "
            f"(runs {', '.join(f'{r:.3f}' for r in runs)})",
            flush=True,
        )


if __name__ == "__main__":
    main()
