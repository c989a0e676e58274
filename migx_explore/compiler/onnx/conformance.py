"""ONNX node conformance: run onnx.backend.test's node cases through ReferenceBackend.

Counted honestly, by rule rather than by hand:
- a case is *listed* when every node's op type is one `supported_ops()` names (default domain);
  the headline rate is passed / listed;
- a listed case whose graph values we cannot represent (string, complex, float8 e8m0, sequence or
  optional values) is *rejected*: it counts as a failure of the listed rate, not as out of scope;
- the rate over all cases (passed / total) is reported too.

Each case that ran is also compared with two oracles run on the spot: onnx's own
`onnx.reference.ReferenceEvaluator` (the second oracle, always present) and ONNX Runtime where it
is installed and accepts the model. Where the stored expectation and an oracle disagree (random
ops, align_corners' output length, ...) the report says which one our result follows.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import MigxError
from . import supported_ops
from .backend import ReferenceBackend
from .tensors import supported_type


@dataclass
class Report:
    total: int = 0
    listed: int = 0  # every op type is one we list
    supported: int = 0  # listed, and every value has a type we represent (the cases that ran)
    passed: int = 0
    specialized: int = 0  # passed cases that needed an input frozen to its value (see backend.py)
    failures: dict[str, str] = field(default_factory=dict)  # listed cases that ran and failed
    # Second and third oracles, over the cases that ran: how many each could run, and on how many
    # of those our outputs agree with it (same tolerance as the stored expectation).
    reference_ran: int = 0
    reference_agree: int = 0
    ort_ran: int = 0
    ort_agree: int = 0
    # Failed cases whose outputs an oracle confirms: case -> "onnx.reference" / "onnxruntime" / both.
    oracle_agrees: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)  # listed cases with a value type we lack
    unsupported: dict[str, str] = field(default_factory=dict)  # cases using an op type we do not list

    @property
    def pass_rate(self) -> float:
        """Passed over every listed case (value-type rejections count as failures)."""
        return self.passed / self.listed if self.listed else 0.0

    @property
    def overall_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def unlisted_reason(model: onnx.ModelProto, ops: Iterable[str] | None = None) -> str | None:
    """The first op type (or domain) of the case that we do not list, or None."""
    known = set(supported_ops() if ops is None else ops)
    for n in model.graph.node:
        if n.domain not in ("", "ai.onnx"):
            return f"domain {n.domain}"
        if n.op_type not in known:
            return f"op {n.op_type}"
    return None


def unsupported_reason(model: onnx.ModelProto, ops: Iterable[str] | None = None) -> str | None:
    """Why a case cannot run (an unlisted op, or a value type we lack), or None if it can."""
    why = unlisted_reason(model, ops)
    if why is not None:
        return why
    for vi in list(model.graph.input) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            return f"non-tensor value {vi.name}"
        if not supported_type(vi.type.tensor_type.elem_type):
            return f"element type {onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type)}"
    for t in model.graph.initializer:
        if not supported_type(t.data_type):
            return f"element type {onnx.TensorProto.DataType.Name(t.data_type)}"
    return None


@dataclass
class CaseResult:
    error: str | None  # None when every data set matches the stored expectation
    frozen: bool = False  # an input had to be frozen to its value
    reference: bool | None = None  # agrees with onnx.reference (None: it could not run the case)
    ort: bool | None = None  # agrees with ONNX Runtime (None: not installed, or it refused the case)


def _agree(expected: list, outputs, case) -> bool:
    from onnx.backend.test.runner import Runner

    try:
        Runner.assert_similar_outputs(list(expected), list(outputs), rtol=case.rtol, atol=case.atol)
    except (AssertionError, ValueError, TypeError):
        return False
    return True


def _oracle_outputs(kind: str, model: onnx.ModelProto, inputs) -> list | None:
    """The outputs onnx.reference ("reference") or ONNX Runtime ("ort") computes, None if it cannot."""
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    feed = dict(zip(names, (numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v for v in inputs)))
    try:
        if kind == "reference":
            from onnx.reference import ReferenceEvaluator

            return list(ReferenceEvaluator(model).run(None, feed))
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return list(sess.run(None, feed))
    except ImportError:
        return None
    except Exception:  # noqa: BLE001 - an oracle that refuses a case is no oracle for it
        return None


_SUB_BYTE_RANGE = {
    getattr(onnx.TensorProto, name): rng
    for name, rng in (("INT4", (-8, 7)), ("UINT4", (0, 15)), ("INT2", (-2, 1)), ("UINT2", (0, 3)))
    if hasattr(onnx.TensorProto, name)
}
_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16)


def undefined_elements(model: onnx.ModelProto, inputs) -> np.ndarray | None:
    """Where a one-node Cast / CastLike from a float type to a 2- or 4-bit integer gets values out
    of the target's range: the ONNX spec leaves those elements undefined ("fixed point: undefined if
    OOR"), and the stored expectations are whatever the generating ml_dtypes did (wrapped before
    0.7, zero from 0.7 on). None for every other case."""
    g = model.graph
    if len(g.node) != 1 or g.node[0].op_type not in ("Cast", "CastLike") or not inputs:
        return None
    src, dst = g.input[0].type.tensor_type.elem_type, g.output[0].type.tensor_type.elem_type
    if src not in _FLOATS or dst not in _SUB_BYTE_RANGE:
        return None
    x = inputs[0]
    x = numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else np.asarray(x)
    lo, hi = _SUB_BYTE_RANGE[dst]
    with np.errstate(invalid="ignore"):
        t = np.trunc(x.astype(np.float64))
        return ~np.isfinite(t) | (t < lo) | (t > hi)


def _defined_only(expected: list, outputs, mask: np.ndarray | None) -> list:
    """`expected` with the undefined elements replaced by ours (compared only where defined)."""
    if mask is None or len(expected) != 1 or np.shape(expected[0]) != mask.shape:
        return expected
    e = np.array(expected[0], copy=True)
    e[mask] = np.asarray(outputs[0])[mask]
    return [e]


def run_case(case, oracles: bool = True) -> CaseResult:
    """Our result against the stored expectation of every data set and, with `oracles`, against
    onnx.reference and ONNX Runtime on the same inputs."""
    from onnx.backend.test.runner import Runner

    res = CaseResult(None)
    ours: list = []
    try:
        rep = ReferenceBackend.prepare(case.model)
        for inputs, expected in case.data_sets:
            outputs = rep.run(inputs)
            ours.append((inputs, outputs))
            res.frozen = res.frozen or bool(rep.frozen)
            expected = [numpy_helper.to_array(e) if isinstance(e, onnx.TensorProto) else e for e in expected]
            expected = _defined_only(expected, outputs, undefined_elements(case.model, inputs))
            Runner.assert_similar_outputs(expected, outputs, rtol=case.rtol, atol=case.atol)
    except MigxError as e:
        res.error = f"{type(e).__name__}: {e}"
    except AssertionError as e:
        res.error = "mismatch: " + " ".join(str(e).split())[:300]
    except Exception as e:  # noqa: BLE001 - a crash is a failure of this case, reported, not raised
        res.error = f"crash {type(e).__name__}: {e}"
    if oracles and ours and len(ours) == len(case.data_sets):
        for kind in ("reference", "ort"):
            verdict: bool | None = True
            for inputs, outputs in ours:
                theirs = _oracle_outputs(kind, case.model, inputs)
                if theirs is None:
                    verdict = None
                    break
                theirs = _defined_only(theirs, outputs, undefined_elements(case.model, inputs))
                verdict = verdict and _agree(theirs, outputs, case)
            setattr(res, kind, verdict)
    return res


def load_cases(pattern: str | None = None) -> list:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return [c for c in cases if pattern is None or pattern in c.name]


def _run_many(cases) -> list[CaseResult]:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return [run_case(c) for c in cases]


def run_suite(pattern: str | None = None, processes: int | None = None) -> Report:
    """Run every node case; `processes` > 1 forks workers (cases are generated once, before)."""
    cases = load_cases(pattern)
    rep = Report(total=len(cases))
    todo = []
    for c in cases:
        why = unsupported_reason(c.model)
        if why is None:
            todo.append(c)
        elif unlisted_reason(c.model) is None:
            rep.rejected[c.name] = why
        else:
            rep.unsupported[c.name] = why
    rep.supported = len(todo)
    rep.listed = rep.supported + len(rep.rejected)
    procs = processes or min(os.cpu_count() or 1, 4)
    if procs > 1 and len(todo) > 50:
        import multiprocessing as mp

        global _CASES
        _CASES = todo
        chunks = [list(range(i, len(todo), procs)) for i in range(procs)]
        with mp.get_context("fork").Pool(procs) as pool:
            parts = pool.map(_run_indices, chunks)
        results: list = [None] * len(todo)
        for idx, part in zip(chunks, parts):
            for i, r in zip(idx, part):
                results[i] = r
    else:
        results = _run_many(todo)
    for c, r in zip(todo, results):
        if r.error is None:
            rep.passed += 1
            rep.specialized += r.frozen
        else:
            rep.failures[c.name] = r.error
        rep.reference_ran += r.reference is not None
        rep.reference_agree += bool(r.reference)
        rep.ort_ran += r.ort is not None
        rep.ort_agree += bool(r.ort)
        if r.error is not None and (r.reference or r.ort):
            rep.oracle_agrees[c.name] = " and ".join(
                n for n, ok in (("onnx.reference", r.reference), ("onnxruntime", r.ort)) if ok
            )
    return rep


_CASES: list = []


def _run_indices(idx: list[int]) -> list[CaseResult]:
    return _run_many([_CASES[i] for i in idx])
