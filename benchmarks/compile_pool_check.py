"""Does the compile pool (gpu/runtime/rtc_pool.py) compile in parallel on this machine? Compiles
one model's kernels with nothing cached: in-process on one thread, on threads, and on worker
pools of several sizes, each pool's start-up (until every worker answered) timed apart from its
compiles; and a CPU probe (N processes spinning) says how much parallel CPU the machine gives.

    python3 benchmarks/compile_pool_check.py [--model yolov10n] [--sizes 4,8,16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

_SPIN = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.5: pass"


def cpu_probe(n: int) -> float:
    """Wall seconds for n processes that each spin 0.5 s of CPU (0.5 + start-up where the cores are real)."""
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-S", "-c", _SPIN]) for _ in range(n)]
    for p in procs:
        p.wait()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="yolov10n")
    ap.add_argument("--sizes", default="4,8,16")
    args = ap.parse_args()
    os.environ["MIGX_EXPLORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="migx-pool-")
    from migx_explore import models
    from migx_explore.gpu import kernel_cache, lower
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend, rtc_pool

    usable = len(os.sched_getaffinity(0))
    print(f"cores {os.cpu_count()}, affinity {usable}")
    for n in (1, 4, 8, 16):
        print(f"  cpu probe: {n:2d} processes x 0.5 s CPU: {cpu_probe(n):.2f} s wall")
    be = get_backend()
    program = lower(models.load(args.model), CompileOptions(mode="eager", precision="fp16"), backend=be)
    kernels = [kernel_cache.source_for(k) for k in kernel_cache.kernel_keys(program)]
    print(f"{len(kernels)} kernels")
    for label, workers in (("one thread", 1), ("16 threads", 16)):
        kernel_cache.clear_memory_cache()
        t = time.perf_counter()
        kernel_cache.compile_many(be.kernels, kernels, workers=workers, use_disk=False)
        print(f"  {label:14}: {time.perf_counter() - t:.2f} s")
    flags = be.kernels.compile_flags()
    headers = {kernel_cache.HEADER_NAME: kernel_cache.header_text()}
    for size in (int(s) for s in args.sizes.split(",")):
        t = time.perf_counter()
        pool = rtc_pool.CompilePool(be.kernels.worker_spec, size)
        pool.wait_ready()
        started = time.perf_counter() - t
        t = time.perf_counter()
        with ThreadPoolExecutor(size) as ex:
            ok = list(ex.map(lambda k: pool.compile(k.name, k.source, headers, flags)[0], kernels))
        print(
            f"  pool of {size:2d}    : start {started:.2f} s, then {time.perf_counter() - t:.2f} s for the kernels "
            f"({sum(ok)} compiled, {pool.alive} alive)"
        )
        pool.close()


if __name__ == "__main__":
    main()
