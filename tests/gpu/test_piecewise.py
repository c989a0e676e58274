"""Piecewise graph capture: where a host step remains (here a planted Python op with no device
kernel), graph mode captures the device segments around it and replays them in order. The three
capture rules hold per segment: new inputs honoured, capture closed on error, graphs invalidated
on recompile. Plus: no built-in model keeps a host step after lowering."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore import gpu, models
from migx_explore.compiler import Program, Shape, evaluate, make_op
from migx_explore.compiler.inputs import random_inputs
from migx_explore.compiler.op import _REGISTRY, GpuCode, defop
from migx_explore.gpu.runtime.base import GpuError
from migx_explore.gpu.timing import time_program

PLANTED = "planted_python_square"


@pytest.fixture
def planted():
    """A user's Python op: a reference compute and no GPU code, so lowering keeps it on the host."""
    defop(
        PLANTED,
        lambda op, s, m: s[0],
        lambda op, a, out, run: np.square(a[0]),
        nargs=1,
        doc="test-only: x * x in numpy on the host",
        gpu=GpuCode.host("a user's Python op (planted)"),
    )
    yield PLANTED
    _REGISTRY.pop(PLANTED, None)


def _program() -> Program:
    """device (mul, exp) -> host -> device (add, relu) -> host -> device (neg): three segments."""
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", [4, 33]))

    def op(name, *inputs, **attrs):
        return m.add_instruction(make_op(name, **attrs), list(inputs))

    a = op("tanh", op("mul", x, x))
    b = op("relu", op("add", op(PLANTED, a), x))
    m.add_return([op("neg", op(PLANTED, b))])
    return p


def _check(compiled, program, seeds=(1, 2, 3)) -> None:
    outs = []
    for seed in seeds:
        feeds = random_inputs(program, seed=seed)
        got = compiled.run(feeds, mode="graph")[0]
        np.testing.assert_allclose(got, evaluate(program, feeds)[0], rtol=1e-5, atol=1e-6)
        outs.append(got)
    assert not np.allclose(outs[0], outs[1])  # each replay computed on its own inputs


def test_graph_mode_replays_segments_around_host_steps(fake, planted):
    program = _program()
    with gpu.compile(program, backend=fake) as c:
        assert len(c.steps.host_ops) == 2
        _check(c, program)
        kinds = [p.kind for p in c.graph_parts(io=True)]
        assert kinds == ["graph", "host", "graph", "host", "graph"]
        assert len(fake.calls_named("begin_capture")) == 3  # captured once, replayed three times
        assert len(fake.calls_named("graph_launch")) == 9


def test_failure_in_a_later_segment_closes_capture_and_destroys_earlier_ones(fake, planted):
    program = _program()
    with gpu.compile(program, backend=fake) as c:
        c.run(random_inputs(program, seed=0))
        captures = 0

        def fail(kind, entry):
            nonlocal captures
            captures += kind == "begin_capture"
            if kind == "launch" and captures == 2 and fake.capturing_any():
                raise GpuError("injected failure in segment 2")

        fake.fail = fail
        with pytest.raises(GpuError, match="injected"):
            c.run(random_inputs(program, seed=1), mode="graph")
        fake.fail = None
        assert not fake.capturing_any()
        assert len(fake.calls_named("end_capture")) == len(fake.calls_named("begin_capture")) == 2
        assert len(fake.calls_named("graph_exec_destroy")) == 1  # segment 1's graph, instantiated then freed
        _check(c, program)


def test_recompile_invalidates_every_segment_before_freeing(fake, planted):
    program = _program()
    with gpu.compile(program, backend=fake) as c:
        c.run(random_inputs(program, seed=0), mode="graph")
        fake.calls.clear()
        c.recompile(options={"mode": "eager"})
        kinds = [k[0] for k in fake.calls]
        assert kinds.count("graph_exec_destroy") == 3 and kinds.index("graph_exec_destroy") < kinds.index("free")
        _check(c, program)
        assert len(fake.calls_named("begin_capture")) == 3


def test_timing_reports_the_segments(fake, planted):
    with gpu.compile(_program(), backend=fake) as c:
        res = time_program(c, warmup=1, iters=3, profile_iters=1)
    assert res.graph_segments == 3 and len(res.segment_nodes) == 3 and all(n > 0 for n in res.segment_nodes)
    assert len(res.host_gaps) == 2 and all(PLANTED in g for g in res.host_gaps)
    assert res.modes["graph"].launches == 5
    assert "3 segments" in res.table() and PLANTED in res.segments_line()


def test_whole_device_program_is_one_graph(fake):
    with gpu.compile(models.load("mlp"), backend=fake) as c:
        assert [p.kind for p in c.graph_parts()] == ["graph"]


@pytest.mark.parametrize("name", models.list_models())
def test_no_built_in_model_keeps_a_host_step(fake, name):
    program = models.load(name, **({"x": [3, 64]} if name == "dynamic_mlp" else {}))
    lowered = gpu.lower(program, backend=fake)
    host = [i.op["op"] for i in lowered.main if i.name == "gpu::host_op"]
    assert not host, f"{name} keeps host steps: {host}"


@pytest.mark.gpu
def test_piecewise_capture_on_device(device, planted):
    program = _program()
    with gpu.compile(program, backend=device) as c:
        np.testing.assert_allclose(
            c.run(random_inputs(program, seed=0))[0],
            evaluate(program, random_inputs(program, seed=0))[0],
            rtol=1e-5,
            atol=1e-6,
        )
        _check(c, program)
        assert [p.kind for p in c.graph_parts(io=True)] == ["graph", "host", "graph", "host", "graph"]
        steps = list(c.steps.steps)

        def boom():
            raise RuntimeError("injected during capture")

        c.invalidate_graphs()
        c.steps.steps = steps[:-1] + [boom] + steps[-1:]  # fails in the last segment
        with pytest.raises(RuntimeError, match="injected"):
            c.run(random_inputs(program, seed=4), mode="graph")
        assert not device.graphs.is_capturing(c.stream)
        c.steps.steps = steps
        _check(c, program, seeds=(5, 6))
        c.recompile(options={"mode": "eager"})
        _check(c, program, seeds=(7, 8))
