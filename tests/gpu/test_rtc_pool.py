"""compile_many on worker processes (gpu/runtime/rtc_pool.py) with a stand-in compiler: the
binaries come from the workers, a compile error names the kernel and carries the log, a worker
that dies costs its kernel an in-process compile and nothing else, and MIGX_COMPILE_WORKERS=0
keeps everything in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from migx_explore.gpu import kernel_cache
from migx_explore.gpu.codegen.common import KernelSource
from migx_explore.gpu.runtime import rtc_pool
from migx_explore.gpu.runtime.base import GpuError
from migx_explore.gpu.runtime.rtc import RuntimeCompiler
from migx_explore.gpu.runtime.rtc_pool import WorkerSpec
from migx_explore.gpu.runtime.rtc_worker import tuple_status

from . import fake_rtc_bindings


class StandInCompiler:
    arch = "fake_arch"
    worker_spec = WorkerSpec("fake_rtc_bindings", "fake", ".cu", "CUBIN", "bytearray")

    def compiler_id(self) -> str:
        return "stand-in"

    def compile_flags(self) -> list[str]:
        return ["-O3"]

    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes:
        rtc = RuntimeCompiler(fake_rtc_bindings, "fake", ".cu", "CUBIN", bytearray, _gpu_status)
        return rtc.compile_program(name, source, headers, flags)


def _gpu_status(result, call: str):
    try:
        return tuple_status(result, call)
    except RuntimeError as e:
        raise GpuError(str(e)) from None


def _kernels(n: int, extra: dict[int, str] | None = None) -> list[KernelSource]:
    extra = extra or {}
    return [
        KernelSource(f"k{i}", f'#include "migx.hpp"\nMIGX_GLOBAL void k{i}() {{}} // {i} {extra.get(i, "")}', 1, 1)
        for i in range(n)
    ]


@pytest.fixture
def workers_here(monkeypatch):
    """Workers that can import the stand-in bindings, a fresh pool and an empty memory cache."""
    here = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH", "")])))
    monkeypatch.setenv("MIGX_COMPILE_WORKERS", "2")
    rtc_pool.close_pools()
    kernel_cache.clear_memory_cache()
    yield
    rtc_pool.close_pools()
    kernel_cache.clear_memory_cache()


def _made_by(binary: bytes) -> int:
    return int(binary.decode().split(";")[0].removeprefix("pid="))


def test_large_batches_compile_on_worker_processes(workers_here):
    kernels = _kernels(rtc_pool.MIN_KERNELS + 2)
    out = kernel_cache.compile_many(StandInCompiler(), kernels, use_disk=False)
    assert set(out) == {k.key for k in kernels}
    makers = {_made_by(b) for b in out.values()}
    assert os.getpid() not in makers and 1 <= len(makers) <= 2
    # the binary is what the in-process compile makes, apart from the process that made it
    here = StandInCompiler().compile_source(kernels[0].name, kernels[0].source, {"migx.hpp": ""}, [])
    assert out[kernels[0].key].split(b";")[1] == here.split(b";")[1]


def test_small_batches_and_workers_off_compile_in_process(workers_here, monkeypatch):
    few = kernel_cache.compile_many(StandInCompiler(), _kernels(rtc_pool.MIN_KERNELS - 1), use_disk=False)
    assert {_made_by(b) for b in few.values()} == {os.getpid()}
    kernel_cache.clear_memory_cache()
    monkeypatch.setenv("MIGX_COMPILE_WORKERS", "0")
    many = kernel_cache.compile_many(StandInCompiler(), _kernels(rtc_pool.MIN_KERNELS + 2), use_disk=False)
    assert {_made_by(b) for b in many.values()} == {os.getpid()}


def test_a_compile_error_on_a_worker_names_the_kernel_with_its_log(workers_here):
    kernels = _kernels(rtc_pool.MIN_KERNELS + 2, {3: "\n#error broken"})
    with pytest.raises(GpuError) as e:
        kernel_cache.compile_many(StandInCompiler(), kernels, use_disk=False)
    assert "fake failed to compile k3" in str(e.value) and "#error directive" in str(e.value)
    assert "--- source ---" in str(e.value)


def test_a_dying_worker_costs_its_kernel_an_in_process_compile(workers_here, monkeypatch):
    kernels = _kernels(rtc_pool.MIN_KERNELS + 2, {2: "KILL_WORKER"})
    # in this process the stand-in must not die: only the worker's copy reacts to the marker
    monkeypatch.setattr(fake_rtc_bindings, "fakeCompileProgram", lambda prog, n, opts: (0,))
    out = kernel_cache.compile_many(StandInCompiler(), kernels, use_disk=False)
    assert set(out) == {k.key for k in kernels}
    assert _made_by(out[kernels[2].key]) == os.getpid()
    assert all(_made_by(out[k.key]) != os.getpid() for k in kernels if k.name != "k2")


def test_when_every_worker_dies_everything_compiles_in_process(workers_here, monkeypatch):
    kernels = _kernels(rtc_pool.MIN_KERNELS + 2, dict.fromkeys(range(rtc_pool.MIN_KERNELS + 2), "KILL_WORKER"))
    monkeypatch.setattr(fake_rtc_bindings, "fakeCompileProgram", lambda prog, n, opts: (0,))
    out = kernel_cache.compile_many(StandInCompiler(), kernels, use_disk=False)
    assert {_made_by(b) for b in out.values()} == {os.getpid()}


def test_binding_a_target_starts_its_pool_before_any_compile(workers_here):
    class Target:
        kernels = StandInCompiler()

    assert not rtc_pool._POOLS
    with kernel_cache.bound_target(Target()):
        pool = rtc_pool._POOLS.get(StandInCompiler.worker_spec)
        assert pool is not None and pool.size == 2
        pool.wait_ready()  # the workers import and warm up on their own, before a kernel is asked for
        assert all(w.ready for w in pool._all)
        out = kernel_cache.compile_many(Target.kernels, _kernels(rtc_pool.MIN_KERNELS), use_disk=False)
    assert rtc_pool._POOLS[StandInCompiler.worker_spec] is pool  # the same workers did the compiles
    assert os.getpid() not in {_made_by(b) for b in out.values()}


def test_no_pool_for_a_target_without_workers(workers_here, monkeypatch):
    class Target:
        kernels = object()  # the fake backend's compiler: no worker_spec

    with kernel_cache.bound_target(Target()):
        assert not rtc_pool._POOLS
    monkeypatch.setenv("MIGX_COMPILE_WORKERS", "0")
    with kernel_cache.bound_target(type("T", (), {"kernels": StandInCompiler()})()):
        assert not rtc_pool._POOLS


def test_workers_import_a_vendor_package_named_like_a_runtime_module(workers_here, monkeypatch, tmp_path):
    """The worker runs as a script from gpu/runtime/, beside cuda.py and hip.py: the vendors'
    `cuda` package must still be the one it imports (it once imported runtime/cuda.py and died,
    and every kernel quietly compiled in the parent)."""
    pkg = tmp_path / "cuda" / "bindings"
    pkg.mkdir(parents=True)
    (tmp_path / "cuda" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "fakertc.py").write_text("from fake_rtc_bindings import *  # noqa: F403\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))

    class VendorNamed(StandInCompiler):
        worker_spec = WorkerSpec("cuda.bindings.fakertc", "fake", ".cu", "CUBIN", "bytearray")

    out = kernel_cache.compile_many(VendorNamed(), _kernels(rtc_pool.MIN_KERNELS), use_disk=False)
    assert os.getpid() not in {_made_by(b) for b in out.values()}
