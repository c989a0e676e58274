"""Backend selection and the no-GPU message; the GPU layer imports with no GPU stack."""

from __future__ import annotations

import subprocess
import sys

import pytest

from migx_explore.gpu import runtime


@pytest.fixture
def clean(monkeypatch):
    runtime.reset_backends()
    yield monkeypatch
    runtime.reset_backends()


def test_env_override_selects_fake(clean):
    clean.setenv("MIGX_GPU_BACKEND", "fake")
    assert runtime.unavailable_reason() is None
    assert runtime.get_backend().name == "fake"


def test_unknown_backend_is_explained(clean):
    clean.setenv("MIGX_GPU_BACKEND", "metal")
    assert "not one of" in runtime.unavailable_reason()


def test_reason_says_what_to_install(clean):
    clean.delenv("MIGX_GPU_BACKEND", raising=False)
    reason = runtime.unavailable_reason()
    if reason is not None:  # a machine with a GPU stack has nothing to explain
        assert "migx-explore[cuda]" in reason and "migx-explore[hip]" in reason


def test_gpu_layer_imports_nothing_gpu_specific():
    code = ("import sys, migx_explore.gpu, migx_explore.gpu.pipelines, migx_explore.gpu.passes, migx_explore.gpu.ops;"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('cuda', 'hip', 'rocm', 'torch', 'cupy')];"
            "print(bad); sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_gpu_entry_points_need_nothing_of_the_explorer():
    code = ("import sys; from migx_explore import gpu; from migx_explore.compiler import Program, Shape, make_op;"
            "from migx_explore.gpu.runtime.fake import FakeBackend;"
            "p = Program(); x = p.main.add_parameter('x', Shape.of('float32', [4]));"
            "p.main.add_return([p.main.add_instruction(make_op('relu'), [x])]);"
            "gpu.compile(p, backend=FakeBackend()).close();"
            "bad = [m for m in sys.modules if m.startswith('migx_explore.') and m.split('.')[1] not in "
            "('compiler', 'gpu')];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    from migx_explore import gpu

    assert sorted(gpu.__all__) == ["compile", "lower"]
