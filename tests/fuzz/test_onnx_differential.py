"""Differential fuzzer (issue 24 item 4): single ONNX nodes with random attributes and shapes
(tests/fuzz/onnx_ops.py), imported and evaluated by us and run by ONNX Runtime, or by
onnx.reference where ORT refuses the model. Our outputs must match the oracle's; a model we
refuse must be refused with one clean MigxError naming the node, never a crash.

Bounded for CI (~1 minute, derandomized: the same examples every run). MIGX_FUZZ_EXAMPLES=N runs
N examples per op family instead, with a fresh seed, for a longer hunt."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("onnxruntime")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from migx_explore.compiler import evaluate  # noqa: E402
from migx_explore.compiler.errors import MigxError  # noqa: E402
from migx_explore.compiler.onnx import param_name, parse_onnx  # noqa: E402
from tests.fuzz.onnx_ops import NodeCase  # noqa: E402
from tests.fuzz.onnx_ops_more import STRATEGIES  # noqa: E402

_LONG = int(os.environ.get("MIGX_FUZZ_EXAMPLES", "0"))
SETTINGS = settings(
    max_examples=_LONG or 120,
    deadline=None,
    derandomize=not _LONG,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def oracle(case: NodeCase) -> tuple[str, list[np.ndarray]] | None:
    """(name, outputs) of ONNX Runtime, else onnx.reference; None if neither runs the model."""
    import onnxruntime as ort

    model = case.model()
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return "onnxruntime", sess.run(None, case.feed)
    except Exception:  # noqa: BLE001 - ORT refuses some valid models: ask the second oracle
        pass
    try:
        from onnx.reference import ReferenceEvaluator

        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return "onnx.reference", list(ReferenceEvaluator(model).run(None, case.feed))
    except Exception:  # noqa: BLE001
        return None


def check_case(case: NodeCase) -> None:
    want = oracle(case)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = parse_onnx(case.model())
            got = evaluate(program, {param_name(k): v for k, v in case.feed.items()})
    except MigxError as e:
        assert "node " in str(e) or want is None, f"{case!r}: refused without naming the node: {e}"
        return  # a clean refusal (a known limitation), not a wrong answer
    if want is None:
        return
    name, ref = want
    assert len(got) == len(ref), f"{case!r}: {len(got)} outputs, {name} gives {len(ref)}"
    for k, (a, b) in enumerate(zip(got, ref)):
        b = np.asarray(b)
        assert a.shape == b.shape, f"{case!r}: output {k} shape {a.shape}, {name} gives {b.shape}"
        if b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"{case!r} against {name}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{case!r} against {name}")


@pytest.mark.parametrize("family", sorted(STRATEGIES))
def test_single_nodes_agree_with_the_oracles(family):
    @SETTINGS
    @given(STRATEGIES[family])
    def run(case):
        check_case(case)

    run()


PIPELINE_SETTINGS = settings(
    max_examples=_LONG or 40,
    deadline=None,
    derandomize=not _LONG,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.mark.parametrize("family", sorted(STRATEGIES))
def test_single_nodes_survive_the_pipelines(family):
    """Fewer examples, each also run through the target-independent pipelines (validated after every
    pass, outputs within tolerance of the unoptimized program): what the importer gets right a
    rewrite must not break (Celu(alpha=0)'s NaNs, a 3-input Einsum's reshapes)."""
    from tests.pipeline_check import check_pipelines

    @PIPELINE_SETTINGS
    @given(STRATEGIES[family])
    def run(case):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = parse_onnx(case.model())
        except MigxError:
            return
        check_pipelines(program, {param_name(k): v for k, v in case.feed.items()})

    run()


def test_small_graphs_agree_with_onnxruntime_through_the_pipelines():
    """Chains of 2 to 6 shape-moving and arithmetic nodes (tests/fuzz/onnx_graphs.py): imported and
    evaluated they match ONNX Runtime, and the pipelines keep them valid and within tolerance."""
    import onnxruntime as ort

    from tests.fuzz.onnx_graphs import graphs
    from tests.pipeline_check import check_pipelines

    @settings(
        max_examples=_LONG or 60,
        deadline=None,
        derandomize=not _LONG,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(graphs())
    def run(case):
        model, feed = case
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, feed)
        program = parse_onnx(model)
        got = evaluate(program, {param_name(k): v for k, v in feed.items()})
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
        check_pipelines(parse_onnx(model), {param_name(k): v for k, v in feed.items()})

    run()
