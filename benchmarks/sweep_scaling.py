"""Waterfall of one model on 1 and on N Dask workers in one run (one worker per GPU), same kernel
cache, same figures: how much the sweep gains from scaling out.

    python benchmarks/sweep_scaling.py --model yolov8 --gpus 1,2 --out results.json

A warm-up sweep compiles every variant's kernels into the kernel cache first, so neither timed
run pays nvrtc for the other. Each timed run starts its own cluster (its start is reported apart)
and a fresh set of worker sessions: each worker traces the model itself, as in real use."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


def timed_waterfall(session, gpus: int, args) -> tuple[object, float, float]:
    from migx_explore.sweep import Sweeper
    from migx_explore.waterfall import waterfall

    t0 = time.perf_counter()
    with Sweeper(gpus=gpus if args.gpu else None, workers=None if args.gpu else gpus) as sw:
        sw.start(gpus)
        t1 = time.perf_counter()
        wf = waterfall(session, by=args.by, iters=args.iters, warmup=args.warmup, time_gpu=args.gpu, sweeper=sw)
        t2 = time.perf_counter()
    return wf, t1 - t0, t2 - t1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolov8")
    ap.add_argument("--by", default="pass")
    ap.add_argument("--gpus", default="1,2", help="worker counts to compare (one worker per GPU)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-gpu", dest="gpu", action="store_false", help="CPU workers, launch counts only")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from migx_explore.session import Session

    counts = [int(x) for x in args.gpus.split(",")]
    s = Session.from_model(args.model, numeric=False)
    t = time.perf_counter()
    s.run()
    trace_s = time.perf_counter() - t
    print(
        f"{args.model}: {s.initial.total_instructions()} instructions, {len(s.trace.top_level())} entries, "
        f"trace {trace_s:.1f} s",
        flush=True,
    )
    _, start_s, warm_s = timed_waterfall(s, max(counts), args)
    print(f"warm-up on {max(counts)} workers: {warm_s:.1f} s (cluster start {start_s:.1f} s)", flush=True)
    runs = []
    for n in counts:
        wf, start_s, sweep_s = timed_waterfall(s, n, args)
        rows = wf.rows()
        runs.append(
            {
                "workers": n,
                "cluster_start_s": round(start_s, 2),
                "sweep_s": round(sweep_s, 2),
                "where": wf.where,
                "rows": rows,
                "note": wf.timing_note,
            }
        )
        print(
            f"{n} worker(s): sweep {sweep_s:.1f} s (cluster start {start_s:.1f} s), {len(rows)} variants, "
            f"{sum(1 for r in rows if r['error'])} failed",
            flush=True,
        )
        print(wf.table(), flush=True)
    base = runs[0]
    same = all(
        [(r["variant"], r["launches"], r["error"]) for r in run["rows"]]
        == [(r["variant"], r["launches"], r["error"]) for r in base["rows"]]
        for run in runs
    )
    result = {
        "model": args.model,
        "by": args.by,
        "instructions": s.initial.total_instructions(),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "gpu": args.gpu,
        "iters": args.iters,
        "identical_launch_figures": same,
        "runs": runs,
        "speedup": {str(r["workers"]): round(base["sweep_s"] / r["sweep_s"], 3) for r in runs},
    }
    if args.gpu:
        from migx_explore.gpu_bridge import unavailable_reason

        result["gpu_unavailable"] = unavailable_reason()
        try:
            import subprocess

            result["devices"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            ).stdout.split("\n")[:-1]
        except (OSError, subprocess.SubprocessError):
            result["devices"] = []
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
