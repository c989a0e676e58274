"""Kernel cache: keyed by (source, header, arch, compiler, flags); a warm compile skips compiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from migx_explore import models
from migx_explore.gpu import compile_program_ir, kernel_cache
from migx_explore.gpu.codegen.common import KernelSource
from migx_explore.gpu.runtime.fake import FakeBackend

from .op_cases import CASES


def _kernels(n: int, tag: str) -> list[KernelSource]:
    return [
        KernelSource(
            f"k{tag}{i}_kernel",
            f'#include "migx.hpp"\nMIGX_GLOBAL void k{tag}{i}_kernel(float* p) {{\n'
            f"    migx::kernel_entry();\n    p[0] = {i};\n}}\n",
            64,
            64,
        )
        for i in range(n)
    ]


def test_warm_compile_is_at_least_10x_faster(tmp_path, monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))
    be = FakeBackend(compile_delay=0.2)  # a slow compiler, so the ratio is not lost in noise
    ks = _kernels(24, "a")
    t0 = time.perf_counter()
    cold = kernel_cache.compile_many(be.kernels, ks)
    t_cold = time.perf_counter() - t0
    assert kernel_cache.last_stats.compiled == 24
    assert t_cold < 24 * 0.2 * 0.75, "cold compiles should run in parallel"
    kernel_cache.clear_memory_cache()  # force the disk path, as in a new process
    t0 = time.perf_counter()
    warm = kernel_cache.compile_many(be.kernels, ks)
    t_warm = time.perf_counter() - t0
    assert kernel_cache.last_stats.from_disk == 24 and kernel_cache.last_stats.compiled == 0
    assert warm == cold
    assert t_cold / t_warm >= 10, f"cold {t_cold * 1e3:.1f} ms, warm {t_warm * 1e3:.1f} ms"


def test_key_changes_with_arch_and_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))
    ks = _kernels(1, "b")[0]
    a, b = FakeBackend(), FakeBackend()
    b.arch = "other"
    key_a = kernel_cache.binary_key(ks, a.kernels, a.kernels.compile_flags())
    assert key_a != kernel_cache.binary_key(ks, b.kernels, b.kernels.compile_flags())
    assert kernel_cache.binary_key(ks, a.kernels, ["-O3"]) != kernel_cache.binary_key(ks, a.kernels, ["-O2"])


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty disk cache folder and an empty memory cache (binaries earlier tests built are
    forgotten, so what a test counts is what it compiled itself)."""
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path))
    kernel_cache.clear_memory_cache()
    yield tmp_path
    kernel_cache.clear_memory_cache()


def test_compile_ops_compiles_when_a_target_is_bound(fresh_cache):
    be = FakeBackend()
    compile_program_ir(CASES["conv_bias_relu"](), backend=be)
    first = be.kernels.compiles
    assert first > 0
    kernel_cache.clear_memory_cache()
    compile_program_ir(CASES["conv_bias_relu"](), backend=be)
    assert be.kernels.compiles == first  # second compile: every binary from the disk cache


def _compile_twice(name: str, backend) -> tuple[list[str], list[str], kernel_cache.CompileStats]:
    """Compile a built-in model, forget the memory cache (as a new process would), compile again."""
    first = kernel_cache.kernel_keys(compile_program_ir(models.load(name), backend=backend))
    kernel_cache.clear_memory_cache()
    second = kernel_cache.kernel_keys(compile_program_ir(models.load(name), backend=backend))
    return first, second, kernel_cache.last_stats


@pytest.mark.parametrize("name", models.list_models())
def test_warm_recompile_compiles_nothing(name, fresh_cache):
    be = FakeBackend()
    first, second, warm = _compile_twice(name, be)
    assert first == second, "kernel sources must be a pure function of the program and target"
    compiles_cold = be.kernels.compiles
    assert compiles_cold == len(set(first)) > 0 or not first
    kernel_cache.clear_memory_cache()
    compile_program_ir(models.load(name), backend=be)
    assert be.kernels.compiles == compiles_cold, "a warm disk cache must make a recompile compile nothing"
    assert kernel_cache.last_stats.from_disk == len(set(first))


def test_memory_hit_is_written_to_the_current_cache_folder(tmp_path, monkeypatch):
    """The H100 failure of issue 19: binaries another cache folder put in memory were never
    written to the folder in use, so a warm start from that folder recompiled them."""
    ks = _kernels(3, "w")
    be = FakeBackend()
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path / "first"))
    kernel_cache.clear_memory_cache()
    kernel_cache.compile_many(be.kernels, ks)
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path / "second"))
    kernel_cache.compile_many(be.kernels, ks)  # all from memory
    assert kernel_cache.last_stats.from_memory == 3
    kernel_cache.clear_memory_cache()
    kernel_cache.compile_many(be.kernels, ks)
    assert kernel_cache.last_stats.from_disk == 3 and kernel_cache.last_stats.compiled == 0
    assert be.kernels.compiles == 3


def test_kernel_keys_do_not_depend_on_the_process(tmp_path):
    """Sources must not leak hash-seed-dependent iteration order, ids or counters: two processes
    with different hash seeds produce the same keys for every built-in model."""
    script = (
        "import json, warnings; warnings.simplefilter('ignore')\n"
        "from migx_explore import models\n"
        "from migx_explore.gpu import compile_program_ir, kernel_cache\n"
        "from migx_explore.gpu.runtime.fake import FakeBackend\n"
        "print(json.dumps({n: kernel_cache.kernel_keys(compile_program_ir(models.load(n), "
        "backend=FakeBackend())) for n in models.list_models()}))\n"
    )
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, MIGX_EXPLORE_CACHE_DIR=str(tmp_path / seed))
        res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        outs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    assert outs[0] == outs[1]


@pytest.mark.gpu
# not the explorer's scale models (issue 23): compiling bilstm's unrolled kernels twice on a device
# would take minutes of a shared device session; the fake-backend test above covers their caching
@pytest.mark.parametrize("name", [n for n in models.list_models() if n not in ("yolov10n", "bilstm")])
def test_real_compiler_warm_cache(name, fresh_cache, device):
    t0 = time.perf_counter()
    first, second, warm = _compile_twice(name, device)
    assert first == second
    assert warm.compiled == 0, (name, warm, time.perf_counter() - t0)
