"""A dynamic-batch CNN compiles to one program, with its graph, per batch size (issue 37), on the
fake backend: each size is its own static program, and run picks the one the feed selects."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.gpu.buckets import BucketedProgram
from migx_explore.gpu.runtime import get_backend
from tests.dynamic_exports import cnn_feed, dyn_batch_cnn


def test_one_compiled_program_per_batch_size(monkeypatch):
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    program = parse_onnx(dyn_batch_cnn(), input_dims={"batch_size": (1, 3)})
    with BucketedProgram(program, backend=get_backend()) as bucketed:
        assert sorted(bucketed.programs) == [1, 2, 3]
        for size, compiled in bucketed.programs.items():
            assert compiled.inputs["input"].lens == (size, 3, 16, 16)
            assert compiled.output_shapes[0].lens == (size, 10)
        for size in (1, 3):
            outs = bucketed.run(cnn_feed(size), mode="graph")
            assert np.shape(outs[0]) == (size, 10)
            assert bucketed.for_inputs(cnn_feed(size)) is bucketed.programs[size]
        with pytest.raises(MigxError, match=r"no compiled program for size 4; compiled sizes: \[1, 2, 3\]"):
            bucketed.run(cnn_feed(4))


def _no_host_step_per_size(backend):
    program = parse_onnx(dyn_batch_cnn(), input_dims={"batch_size": (1, 3)})
    with BucketedProgram(program, backend=backend) as bucketed:
        for size, compiled in bucketed.programs.items():
            # the squeeze-excite gate ([N, C, 1, 1] params before the [N, C, H, W] it scales)
            # fuses into one device reduction, not a host step
            assert compiled.steps.host_ops == [], (size, compiled.steps.host_ops)
            feeds = cnn_feed(size)
            want = evaluate(program_for(program, size), feeds)[0]
            for mode in ("eager", "graph"):
                np.testing.assert_allclose(bucketed.run(feeds, mode=mode)[0], want, rtol=1e-4, atol=1e-5)


def program_for(program, size):
    from migx_explore.gpu.buckets import static_programs

    return static_programs(program)[0][size]


def test_every_size_runs_on_the_device_alone_on_fake(fake):
    _no_host_step_per_size(fake)


@pytest.mark.gpu
def test_every_size_runs_on_the_device_alone(device):
    _no_host_step_per_size(device)
