"""Executor behaviour on the recording fake backend: call order, capture pairing, no allocation
inside capture, failures during capture, graph invalidation, graph replays honouring inputs."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.gpu import compile_program
from migx_explore.gpu.runtime.base import GpuError

from .op_cases import CASES, inputs_for


@pytest.fixture
def net():
    return CASES["conv_bias_relu"]()


def _feeds(program, seed):
    return inputs_for("conv_bias_relu", program, seed)


def test_eager_call_order(fake, net):
    with compile_program(net, backend=fake) as c:
        fake.calls.clear()
        c.run(_feeds(net, 0))
        kinds = [k[0] for k in fake.calls]
        # inputs in, kernels and BLAS in program order, results out, then one synchronize
        assert kinds[0] == "h2d" and kinds[-2:] == ["d2h", "stream_sync"]
        body = [k for k in kinds if k in ("launch", "gemm")]
        assert body == [("launch" if i.kind == "kernel" else "gemm") for i in c.steps.info]
        assert not fake.calls_named("malloc", "free", "host_alloc", "load_module")  # all done at finalize


def test_graph_capture_is_paired_and_allocates_nothing(fake, net):
    with compile_program(net, backend=fake) as c:
        c.run(_feeds(net, 0), mode="graph")
        kinds = [k[0] for k in fake.calls]
        b, e = kinds.index("begin_capture"), kinds.index("end_capture")
        assert kinds.count("begin_capture") == kinds.count("end_capture") == 1
        assert not [k for k in kinds[b:e] if k in ("malloc", "host_alloc", "free", "load_module", "blas_create")]
        # the eager warm-up ran before the capture (lazy loading and BLAS setup stay outside it)
        assert "gemm" in kinds[:b]
        fake.calls.clear()
        c.run(_feeds(net, 1), mode="graph")
        assert [k[0] for k in fake.calls] == ["graph_launch", "stream_sync"]


def test_graph_replays_honour_new_inputs(fake, net):
    with compile_program(net, backend=fake) as c:
        outs = []
        for seed in (1, 2, 3):
            feeds = _feeds(net, seed)
            got = c.run(feeds, mode="graph")[0]
            np.testing.assert_allclose(got, evaluate(net, feeds)[0], rtol=1e-4, atol=1e-5)
            outs.append(got)
        assert not np.allclose(outs[0], outs[1])
        assert len(fake.calls_named("begin_capture")) == 1


@pytest.mark.parametrize("fail_at", ["launch", "gemm", "d2h"])
def test_failure_during_capture_ends_capture_and_eager_still_works(fake, net, fail_at):
    with compile_program(net, backend=fake) as c:
        c.run(_feeds(net, 0))
        fake.calls.clear()

        def fail(kind, entry):
            if kind == fail_at and fake.capturing_any():
                raise GpuError(f"injected failure at {kind}")

        fake.fail = fail
        with pytest.raises(GpuError, match="injected"):
            c.run(_feeds(net, 1), mode="graph")
        fake.fail = None
        kinds = [k[0] for k in fake.calls]
        assert kinds.count("begin_capture") == kinds.count("end_capture") == 1
        assert "graph_destroy" in kinds and not fake.capturing_any()
        feeds = _feeds(net, 2)
        np.testing.assert_allclose(c.run(feeds)[0], evaluate(net, feeds)[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c.run(feeds, mode="graph")[0], evaluate(net, feeds)[0], rtol=1e-4, atol=1e-5)


def test_allocation_inside_capture_is_caught(fake, net):
    with compile_program(net, backend=fake) as c:
        c.run(_feeds(net, 0))
        orig = c.steps.steps[0]

        def allocating_step():
            fake.memory.malloc(64)  # what a lazily initialising library would do
            return orig()

        c.steps.steps[0] = allocating_step
        with pytest.raises(GpuError, match="during stream capture"):
            c.run(_feeds(net, 1), mode="graph")
        c.steps.steps[0] = orig
        assert not fake.capturing_any()
        feeds = _feeds(net, 3)
        np.testing.assert_allclose(c.run(feeds, mode="graph")[0], evaluate(net, feeds)[0], rtol=1e-4, atol=1e-5)


def test_recompile_invalidates_graph_before_freeing(fake, net):
    with compile_program(net, backend=fake) as c:
        c.run(_feeds(net, 0), mode="graph")
        fake.calls.clear()
        c.recompile(options={"mode": "eager"})
        kinds = [k[0] for k in fake.calls]
        assert kinds.index("graph_exec_destroy") < kinds.index("free")
        assert c.generation == 1
        feeds = _feeds(net, 4)
        got = c.run(feeds, mode="graph")[0]
        assert [k[0] for k in fake.calls].count("begin_capture") == 1  # captured again
        np.testing.assert_allclose(got, evaluate(net, feeds)[0], rtol=1e-4, atol=1e-5)


def test_close_frees_everything(fake, net):
    c = compile_program(net, backend=fake)
    c.run(_feeds(net, 0), mode="graph")
    c.close()
    assert not fake.allocations(), "device or pinned memory left allocated"
    with pytest.raises(Exception, match="closed"):
        c.run(_feeds(net, 0))


def test_wrong_input_shape_is_refused(fake, net):
    with compile_program(net, backend=fake) as c, pytest.raises(Exception, match="compiled for"):
        c.run({"x": np.zeros((1, 8, 12, 12), np.float32)})


def test_offload_copy_program_runs(fake, net):
    feeds = _feeds(net, 5)
    with compile_program(net, {"offload_copy": True}, backend=fake) as c:
        names = [i.name for i in c.program.main]
        assert "hip::copy_to_gpu" in names and "hip::copy_from_gpu" in names and "hip::sync_stream" in names
        for mode in ("eager", "graph"):
            np.testing.assert_allclose(c.run(feeds, mode=mode)[0], evaluate(net, feeds)[0], rtol=1e-4, atol=1e-5)


def test_recompile_for_new_input_shapes(fake):
    from migx_explore import models

    c = compile_program(models.get_model("dynamic_mlp"), backend=fake, input_dims={"x": [2, 64]})
    with c:
        x2 = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
        ref2 = evaluate(models.load("dynamic_mlp", x=[2, 64]), {"x": x2})[0]
        np.testing.assert_allclose(c.run({"x": x2}, mode="graph")[0], ref2, rtol=1e-4, atol=1e-5)
        x5 = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
        with pytest.raises(Exception, match="recompile"):
            c.run({"x": x5}, mode="graph")
        c.recompile(input_dims={"x": [5, 64]})
        ref5 = evaluate(models.load("dynamic_mlp", x=[5, 64]), {"x": x5})[0]
        np.testing.assert_allclose(c.run({"x": x5}, mode="graph")[0], ref5, rtol=1e-4, atol=1e-5)
        assert [k[0] for k in fake.calls].count("begin_capture") == 2
