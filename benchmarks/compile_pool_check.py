"""Does the compile pool (gpu/runtime/rtc_pool.py) compile in parallel on this machine? Compiles
one model's kernels three ways with nothing cached: in-process on one thread, on threads, and on
the worker pool, and says how many workers answered and what the CPU quota allows.

    python3 benchmarks/compile_pool_check.py [--model yolov10n]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def _cpu_quota() -> str:
    try:
        return Path("/sys/fs/cgroup/cpu.max").read_text().strip()
    except OSError:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="yolov10n")
    args = ap.parse_args()
    os.environ["MIGX_EXPLORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="migx-pool-")
    from migx_explore import models
    from migx_explore.gpu import kernel_cache, lower
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend, rtc_pool

    be = get_backend()
    program = lower(models.load(args.model), CompileOptions(mode="eager", precision="fp16"), backend=be)
    kernels = [kernel_cache.source_for(k) for k in kernel_cache.kernel_keys(program)]
    usable = len(os.sched_getaffinity(0))
    print(f"{len(kernels)} kernels; cores {os.cpu_count()}, affinity {usable}, cpu.max {_cpu_quota()}")
    for label, workers in (("one thread", 1), ("16 threads", 16), ("worker pool", None)):
        kernel_cache.clear_memory_cache()
        t = time.perf_counter()
        kernel_cache.compile_many(be.kernels, kernels, workers=workers, use_disk=False)
        print(f"  {label:12}: {time.perf_counter() - t:.2f} s")
    pool = rtc_pool.pool_for(be.kernels.worker_spec, len(kernels))
    print(f"  pool: {pool.size if pool else 0} workers started, {pool.alive if pool else 0} alive")


if __name__ == "__main__":
    main()
