"""Kernel cache: keyed by (source, header, arch, compiler, flags); a warm compile skips compiling."""

from __future__ import annotations

import time

import pytest

from migx_explore.gpu import compile_program_ir, kernel_cache
from migx_explore.gpu.codegen.common import KernelSource
from migx_explore.gpu.runtime.fake import FakeBackend

from .op_cases import CASES


def _kernels(n: int, tag: str) -> list[KernelSource]:
    return [KernelSource(f"k{tag}{i}_kernel", f'#include "migx.hpp"\nMIGX_GLOBAL void k{tag}{i}_kernel(float* p) '
                         f"{{ p[0] = {i}; }}\n", 64, 64) for i in range(n)]


def test_warm_compile_is_at_least_10x_faster(tmp_path, monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))
    be = FakeBackend(compile_delay=0.2)  # a slow compiler, so the ratio is not lost in noise
    ks = _kernels(24, "a")
    t0 = time.perf_counter()
    cold = kernel_cache.compile_many(be, ks)
    t_cold = time.perf_counter() - t0
    assert kernel_cache.last_stats.compiled == 24
    assert t_cold < 24 * 0.2 * 0.75, "cold compiles should run in parallel"
    kernel_cache.clear_memory_cache()  # force the disk path, as in a new process
    t0 = time.perf_counter()
    warm = kernel_cache.compile_many(be, ks)
    t_warm = time.perf_counter() - t0
    assert kernel_cache.last_stats.from_disk == 24 and kernel_cache.last_stats.compiled == 0
    assert warm == cold
    assert t_cold / t_warm >= 10, f"cold {t_cold * 1e3:.1f} ms, warm {t_warm * 1e3:.1f} ms"


def test_key_changes_with_arch_and_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))
    ks = _kernels(1, "b")[0]
    a, b = FakeBackend(), FakeBackend()
    b.arch = "other"
    assert kernel_cache.binary_key(ks, a, a.compile_flags()) != kernel_cache.binary_key(ks, b, b.compile_flags())
    assert kernel_cache.binary_key(ks, a, ["-O3"]) != kernel_cache.binary_key(ks, a, ["-O2"])


def test_compile_ops_compiles_when_a_target_is_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))
    be = FakeBackend()
    compile_program_ir(CASES["conv_bias_relu"](), backend=be)
    first = be.compiles
    assert first > 0
    kernel_cache.clear_memory_cache()
    compile_program_ir(CASES["conv_bias_relu"](), backend=be)
    assert be.compiles == first  # second compile: every binary from the disk cache


@pytest.mark.gpu
def test_real_compiler_warm_cache(tmp_path, monkeypatch, device):
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))
    from migx_explore import models

    program = models.load("resnet_block")
    t0 = time.perf_counter()
    compile_program_ir(program, backend=device)
    stats_cold = kernel_cache.last_stats
    kernel_cache.clear_memory_cache()
    compile_program_ir(program, backend=device)
    stats_warm = kernel_cache.last_stats
    assert stats_cold.compiled > 0 and stats_warm.compiled == 0
    assert stats_cold.seconds / max(stats_warm.seconds, 1e-6) >= 10, (stats_cold, stats_warm, time.perf_counter() - t0)
