"""Where a cold compile's kernel time goes (issue 44 item 4: eager <= 2 s with a cold cache).

For each model: one `gpu.compile` in eager mode with a fresh kernel cache (the pipelines' CPU time
and compile_many's wall time, apart), then the same kernels compiled again with nothing cached:
one at a time (each kernel's own compile time: total, median, slowest), front end only (PTX, no
ptxas) for the same kernels, and on thread pools of several sizes (how far the runtime compiler
scales with threads).

    python3 benchmarks/kernel_compile_profile.py [--models yolov10n,resnet18] [--precision fp16]

Runs on whatever `get_backend()` finds; the numbers mean something on a real GPU only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def _kernels_of(program) -> list:
    from migx_explore.gpu import kernel_cache

    return [kernel_cache.source_for(k) for k in kernel_cache.kernel_keys(program)]


def _compile_each(compiler, kernels: list, flags: list[str]) -> list[tuple[float, str]]:
    from migx_explore.gpu import kernel_cache

    headers = {kernel_cache.HEADER_NAME: kernel_cache.header_text()}
    out = []
    for ks in kernels:
        t = time.perf_counter()
        compiler.compile_source(ks.name, ks.source, headers, flags)
        out.append((time.perf_counter() - t, ks.name))
    return out


def _pool_wall(compiler, kernels: list, flags: list[str], workers: int) -> float:
    from migx_explore.gpu import kernel_cache

    headers = {kernel_cache.HEADER_NAME: kernel_cache.header_text()}
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda ks: compiler.compile_source(ks.name, ks.source, headers, flags), kernels))
    return time.perf_counter() - t


def _batched_sources(kernels: list, programs: int) -> list[tuple[str, str]]:
    """The kernels merged into `programs` translation units (the header once per unit, each
    kernel in its own namespace under a unique symbol), to measure what one program per kernel
    costs in fixed front-end work."""
    from migx_explore.gpu import kernel_cache

    include = f'#include "{kernel_cache.HEADER_NAME}"'
    units: list[list[str]] = [[include] for _ in range(programs)]
    names: list[str] = [""] * programs  # a unit is named after its first kernel's symbol
    for k, ks in enumerate(kernels):
        body = ks.source.replace(include, "").replace(f" {ks.name}(", f" {ks.name}_b{k}(")
        units[k % programs].append(f"namespace migx_b{k} {{\n{body}\n}}")
        names[k % programs] = names[k % programs] or f"{ks.name}_b{k}"
    return [(names[u], "\n".join(parts)) for u, parts in enumerate(units) if len(parts) > 1]


def _compile_in_process(args: tuple) -> float:
    name, source, flags = args
    from migx_explore.gpu import kernel_cache
    from migx_explore.gpu.runtime import get_backend

    t = time.perf_counter()
    get_backend().kernels.compile_source(name, source, {kernel_cache.HEADER_NAME: kernel_cache.header_text()}, flags)
    return time.perf_counter() - t


def _other_ways(compiler, kernels: list, flags: list[str], cpus: int) -> None:
    """Batched units, worker processes and the fast-compile option, each against one at a time."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from migx_explore.gpu import kernel_cache

    headers = {kernel_cache.HEADER_NAME: kernel_cache.header_text()}
    for programs in sorted({1, cpus}):
        units = _batched_sources(kernels, programs)
        t = time.perf_counter()
        with ThreadPoolExecutor(max_workers=programs) as pool:
            list(pool.map(lambda u: compiler.compile_source(u[0], u[1], headers, flags), units))
        wall = time.perf_counter() - t
        print(f"  batched into {len(units):2d} program(s) on {programs} thread(s): {wall:.2f} s wall")
    ctx = multiprocessing.get_context("forkserver")
    for programs in sorted({cpus, len(kernels)}):
        units = [(k.name, k.source) for k in kernels]
        if programs < len(kernels):
            units = _batched_sources(kernels, programs)
        t = time.perf_counter()
        with ProcessPoolExecutor(max_workers=cpus, mp_context=ctx) as pool:
            list(pool.map(_compile_in_process, [(n, src, flags) for n, src in units]))
        wall = time.perf_counter() - t
        print(f"  {len(units):3d} program(s) on {cpus} processes (start included): {wall:.2f} s wall")
    for extra in ("-Ofc=max", "-Ofc=mid"):
        try:
            fast = sum(s for s, _ in _compile_each(compiler, kernels[:40], [*flags, extra]))
            base = sum(s for s, _ in _compile_each(compiler, kernels[:40], flags))
            print(f"  {extra} on {min(40, len(kernels))} kernels: {fast:.2f} s against {base:.2f} s")
        except Exception as e:  # noqa: BLE001 - an older nvrtc rejects the option: say so
            print(f"  {extra}: {type(e).__name__}: {str(e)[:120]}")


def _gil_released() -> bool:
    """Whether the bindings' nvrtcCompileProgram lets other Python threads run meanwhile."""
    import threading

    from migx_explore.gpu.runtime import get_backend

    done, spins = threading.Event(), 0
    src = 'extern "C" __global__ void k(float* x) { for (int i = 0; i < 64; ++i) x[i] = sinf(x[i]); }'

    def compile_some() -> None:
        for _ in range(5):
            get_backend().kernels.compile_source("k", src, {}, ["-arch=sm_90"])
        done.set()

    threading.Thread(target=compile_some).start()
    while not done.is_set():
        spins += 1
    return spins > 10_000


def one_model(name: str, precision: str) -> None:
    from migx_explore import models
    from migx_explore.gpu import compile, kernel_cache
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend

    be = get_backend()
    source = models.load(name)
    os.environ["MIGX_EXPLORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="migx-kcp-")
    kernel_cache.clear_memory_cache()
    calls: list = []  # every compile_many call's stats (compile_ops's, then finalize's)
    real = kernel_cache.compile_many

    def counted(*a, **kw):
        out = real(*a, **kw)
        calls.append(kernel_cache.last_stats)
        return out

    kernel_cache.compile_many = counted
    try:
        t = time.perf_counter()
        compiled = compile(source, CompileOptions(mode="eager", precision=precision), backend=be)
        total = time.perf_counter() - t
    finally:
        kernel_cache.compile_many = real
    kernels = _kernels_of(compiled.program)
    compiled.close()
    print(f"## {name} {precision} eager: compile {total:.2f} s cold")
    print(
        f"  kernels: {len(kernels)} in the program; compile_many compiled {sum(c.compiled for c in calls)} in "
        f"{sum(c.seconds for c in calls):.2f} s wall over {len(calls)} call(s); the rest "
        f"({total - sum(c.seconds for c in calls):.2f} s) is the pipelines and finalize"
    )
    compiler, flags = be.kernels, be.kernels.compile_flags()
    each = _compile_each(compiler, kernels, flags)
    times = [s for s, _ in each]
    print(
        f"  one at a time: {sum(times):.2f} s total, median {statistics.median(times) * 1e3:.0f} ms, "
        f"slowest {max(times) * 1e3:.0f} ms"
    )
    for s, kname in sorted(each, reverse=True)[:6]:
        print(f"      {s * 1e3:6.0f} ms  {kname}")
    ptx_flags = [f.replace("-arch=sm_", "-arch=compute_") for f in flags]
    if ptx_flags != flags:
        front = [s for s, _ in _compile_each(compiler, kernels, ptx_flags)]
        print(f"  front end only (PTX, {ptx_flags[0]}): {sum(front):.2f} s total ({sum(front) / sum(times):.0%})")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    for workers in sorted({1, 4, cpus}):
        wall = _pool_wall(compiler, kernels, flags, workers)
        print(f"  pool of {workers:2d}: {wall:.2f} s wall (speed-up {sum(times) / wall:.1f}x over one at a time)")
    _other_ways(compiler, kernels, flags, cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="yolov10n,resnet18,bert_encoder")
    ap.add_argument("--precision", default="fp16")
    args = ap.parse_args()
    import migx_explore.gpu.executor  # noqa: F401 - imports are not compile time

    try:
        from importlib.metadata import version

        print(f"cuda-bindings {version('cuda-bindings')}; nvrtc releases the GIL: {_gil_released()}")
    except Exception as e:  # noqa: BLE001 - no CUDA bindings: the fake backend
        print(f"no GIL check: {type(e).__name__}: {e}")
    for name in args.models.split(","):
        one_model(name, args.precision)


if __name__ == "__main__":
    main()
