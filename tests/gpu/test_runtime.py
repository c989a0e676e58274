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
    code = (
        "import sys, migx_explore.gpu, migx_explore.gpu.pipelines, migx_explore.gpu.passes, migx_explore.gpu.ops;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('cuda', 'hip', 'rocm', 'torch', 'cupy')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_gpu_entry_points_need_nothing_of_the_explorer():
    code = (
        "import sys; from migx_explore import gpu; from migx_explore.compiler import Program, Shape, make_op;"
        "from migx_explore.gpu.runtime.fake import FakeBackend;"
        "p = Program(); x = p.main.add_parameter('x', Shape.of('float32', [4]));"
        "p.main.add_return([p.main.add_instruction(make_op('relu'), [x])]);"
        "gpu.compile(p, backend=FakeBackend()).close();"
        "bad = [m for m in sys.modules if m.startswith('migx_explore.') and m.split('.')[1] not in "
        "('compiler', 'gpu')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    from migx_explore import gpu

    assert sorted(gpu.__all__) == ["compile", "lower"]


def test_the_backend_interface_stays_narrow_and_the_fake_runs_the_shared_code():
    """A backend is a driver table plus five parts; only Kernels, Blas and Graphs have abstract
    methods (<= 12 in all). The fake fills the same driver table with recorded bindings and
    overrides nothing of the shared memory, stream and graph code."""
    from migx_explore.gpu.runtime import base
    from migx_explore.gpu.runtime.fake import FakeBackend, FakeGraphs, FakeKernels

    parts = (base.Memory, base.Streams, base.Kernels, base.Blas, base.Graphs, base.Backend)
    abstract = {f"{p.__name__}.{m}" for p in parts for m in getattr(p, "__abstractmethods__", ())}
    assert len(abstract) <= 12, sorted(abstract)
    fake = FakeBackend()
    assert type(fake.memory) is base.Memory and type(fake.streams) is base.Streams
    own = {n for n, v in vars(FakeGraphs).items() if callable(v) and not n.startswith("__")}
    assert own <= base.Graphs.__abstractmethods__, own
    # the fake's launch adds only the kernel's emulation to the shared launch (same raw-call shape)
    assert set(vars(FakeKernels)) & {"load_module", "get_function", "unload_module"} == set()
    fake.memory.free(fake.memory.malloc(16))
    assert [c[0] for c in fake.calls] == ["malloc", "free"]
    with pytest.raises(base.GpuError, match="unknown pointer"):
        fake.memory.free(0x1234)


def test_capture_that_fails_ends_the_capture_and_destroys_its_graph(fake):
    """Graphs.capture (the executor's segments, the BLAS tuning timer): an error while enqueuing
    leaves the stream out of capture, with the partial graph destroyed, and goes on unchanged."""
    from migx_explore.gpu.runtime.base import GpuError

    stream = fake.streams.create()

    def fails():
        raise GpuError("refused while capturing")

    with pytest.raises(GpuError, match="refused while capturing"):
        fake.graphs.capture(stream, fails)
    assert not fake.graphs.is_capturing(stream)
    names = [c[0] for c in fake.calls]
    assert names[-3:] == ["begin_capture", "end_capture", "graph_destroy"], names[-3:]
    graph = fake.graphs.capture(stream, lambda: None)  # the stream captures again
    assert fake.graphs.node_count(graph) == 0 and not fake.graphs.is_capturing(stream)
