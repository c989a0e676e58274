"""Whole models through the GPU target against the reference evaluator (fp32: rtol 1e-3, atol 1e-4),
in eager and graph mode; graph replays with fresh inputs; failures injected during capture."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numpy as np
import pytest

from migx_explore import models
from migx_explore.compiler import evaluate
from migx_explore.compiler.discontinuous import has_discontinuous_ops
from migx_explore.compiler.inputs import random_inputs
from migx_explore.gpu import compile_program
from migx_explore.gpu.runtime.base import GpuError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gpu_models  # noqa: E402  (benchmark networks: ResNet-18-like, YOLO-style, at test sizes)

RTOL, ATOL = 1e-3, 1e-4


def load(name: str):
    if name.startswith("bench:"):
        kind = name.split(":")[1]
        kw = {"resnet18_like": {"res": 96}, "yolo_style": {"res": 160}}.get(kind, {})
        return _parse(gpu_models.MODELS[kind](**kw))
    return models.load(name, **({"x": [3, 64]} if name == "dynamic_mlp" else {}))


def _parse(model):
    from migx_explore.compiler.onnx import parse_onnx

    return parse_onnx(model)


ALL = models.list_models() + [f"bench:{n}" for n in gpu_models.MODELS]
FAKE = ["resnet_block", "mobilenet", "transformer", "mlp", "dynamic_mlp", "yolo"]


def _rows_sorted(a: np.ndarray) -> np.ndarray:
    """The rows of the last two axes in lexicographic order (values rounded to the tolerance, so
    rows that agree within it sort alike)."""
    a = np.asarray(a, np.float64)
    if a.ndim < 2:
        return np.sort(a)
    rows = a.reshape(-1, a.shape[-1])
    keys = np.round(rows, 2)
    return rows[np.lexsort(keys.T[::-1])].reshape(a.shape)


def check_model(name, backend):
    program = load(name)
    selects = has_discontinuous_ops(program)
    with compile_program(program, backend=backend) as c:
        assert not c.steps.host_ops, c.steps.host_ops
        outs = {}
        for seed in (0, 1):
            feeds = random_inputs(program, seed=seed)
            ref = evaluate(program, feeds)
            for mode in ("eager", "graph"):
                got = c.run(feeds, mode=mode)
                for g, w in zip(got, ref):
                    if selects and not np.allclose(g, w, rtol=RTOL, atol=ATOL):
                        # A TopK over near-tied scores (random weights) may order tied rows
                        # differently on the GPU: the same rows must be there, in any order.
                        g, w = _rows_sorted(g), _rows_sorted(w)
                    np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{name} {mode} seed {seed}")
                outs[seed, mode] = got[0]
        # two graph replays in a row with different inputs: two different, correct outputs
        assert not np.allclose(outs[0, "graph"], outs[1, "graph"])


@pytest.mark.parametrize("name", FAKE)
def test_model_on_fake(name, fake):
    check_model(name, fake)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ALL)
def test_model_on_device(name, device):
    check_model(name, device)


@pytest.mark.gpu
def test_failures_during_capture_on_device(device):
    program = models.load("resnet_block")
    feeds = random_inputs(program, seed=0)
    ref = evaluate(program, feeds)[0]
    with compile_program(program, backend=device) as c:
        c.run(feeds)
        steps = list(c.steps.steps)

        def boom():
            raise RuntimeError("injected during capture")

        c.steps.steps = steps[:2] + [boom] + steps[2:]  # a Python error mid-capture
        with pytest.raises(RuntimeError, match="injected"):
            c.run(feeds, mode="graph")
        assert not device.graphs.is_capturing(c.stream)

        def alloc():  # a driver-level error: allocating during capture is refused and invalidates it
            device.memory.free(device.memory.malloc(1 << 20))
            return (0,)

        c.steps.steps = steps[:2] + [alloc] + steps[2:]
        with contextlib.suppress(GpuError):
            c.run(feeds, mode="graph")
        assert not device.graphs.is_capturing(c.stream)
        c.steps.steps = steps
        c.invalidate_graphs()
        np.testing.assert_allclose(c.run(feeds)[0], ref, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(c.run(feeds, mode="graph")[0], ref, rtol=RTOL, atol=ATOL)
