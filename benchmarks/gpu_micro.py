"""Micro-benchmarks of our GPU runtime (gpu_vs_torch.py and gpu_detector.py report them): eager
dispatch per launch and graph replay per node on an empty kernel, and the kernel cache (cold
against warm compile of resnet18_like).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_models  # noqa: E402


def micro(n: int = 300, iters: int = 50) -> dict:
    """Overheads on an empty kernel: eager enqueue per launch, graph replay per node."""
    from migx_explore.gpu import kernel_cache
    from migx_explore.gpu.codegen.common import KernelSource
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.gpu.steps import argblock

    be = get_backend()
    ks = KernelSource(
        "empty_kernel",
        '#include "migx.hpp"\nMIGX_GLOBAL void empty_kernel(float* p) { migx::kernel_entry(); }\n',
        64,
        64,
    )
    fn = be.kernels.get_function(be.kernels.load_module(kernel_cache.compile_many(be.kernels, [ks])[ks.key]), ks.name)
    s = be.streams.create()
    buf = be.memory.malloc(256)
    keep: list = []
    step = be.kernels.make_launch(fn, 1, 64, 0, s, argblock([buf], keep))
    a, b = be.streams.event_create(), be.streams.event_create()
    ra, rb = be.streams.make_event_record(a, s), be.streams.make_event_record(b, s)

    def device_us(launch) -> float:
        ra()
        launch()
        rb()
        be.streams.event_sync(b)
        return be.streams.event_elapsed_ms(a, b) * 1e3

    def eager():
        for _ in range(n):
            step()

    enq = []
    for _ in range(iters):
        t0 = time.perf_counter()
        eager()
        enq.append((time.perf_counter() - t0) * 1e6 / n)
        be.streams.sync(s)
    eager_dev = statistics.median(device_us(eager) for _ in range(iters)) / n
    graphs = {}
    for count in (1, n):
        be.graphs.begin_capture(s)
        for _ in range(count):
            step()
        g = be.graphs.end_capture(s)
        gx = be.graphs.instantiate(g)
        be.graphs.upload(gx, s)
        launch = be.graphs.make_launch(gx, s)
        for _ in range(5):
            launch()
        graphs[count] = statistics.median(device_us(launch) for _ in range(iters))
    per_node = (graphs[n] - graphs[1]) / (n - 1)
    return {
        "eager_enqueue_us_per_launch": statistics.median(enq),
        "eager_device_us_per_launch": eager_dev,
        "graph_1_node_us": graphs[1],
        f"graph_{n}_nodes_us": graphs[n],
        "graph_us_per_node": per_node,
    }


def cache_speedup() -> dict:
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu import compile_program_ir, kernel_cache
    from migx_explore.gpu.runtime import get_backend

    be = get_backend()
    model = gpu_models.resnet18_like()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MIGX_EXPLORE_CACHE_DIR"] = tmp
        kernel_cache.clear_memory_cache()
        compile_program_ir(model, backend=be, pass_manager=PassManager(validate=False))
        cold = kernel_cache.last_stats
        kernel_cache.clear_memory_cache()
        compile_program_ir(model, backend=be, pass_manager=PassManager(validate=False))
        warm = kernel_cache.last_stats
    return {
        "kernels": cold.compiled,
        "cold_s": cold.seconds,
        "warm_s": warm.seconds,
        "warm_from_disk": warm.from_disk,
        "speedup": cold.seconds / max(warm.seconds, 1e-9),
    }
