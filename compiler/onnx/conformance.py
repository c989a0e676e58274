"""ONNX node conformance: run onnx.backend.test's node cases through ReferenceBackend.

Counted honestly, by rule rather than by hand:
- a case is *listed* when every node's op type is one `supported_ops()` names (default domain);
  the headline rate is passed / listed;
- a listed case whose graph values we cannot represent (string, complex, float8 e8m0, sequence or
  optional values) is *rejected*: it counts as a failure of the listed rate, not as out of scope;
- the rate over all cases (passed / total) is reported too.
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


def run_case(case) -> tuple[str | None, bool]:
    """(None if every data set of the case matches else a one-line failure, whether an input had
    to be frozen to its value)."""
    from onnx.backend.test.runner import Runner

    frozen = False
    try:
        rep = ReferenceBackend.prepare(case.model)
        for inputs, expected in case.data_sets:
            outputs = rep.run(inputs)
            frozen = frozen or bool(rep.frozen)
            expected = [numpy_helper.to_array(e) if isinstance(e, onnx.TensorProto) else e for e in expected]
            Runner.assert_similar_outputs(expected, outputs, rtol=case.rtol, atol=case.atol)
    except MigxError as e:
        return f"{type(e).__name__}: {e}", frozen
    except AssertionError as e:
        return "mismatch: " + " ".join(str(e).split())[:300], frozen
    except Exception as e:  # noqa: BLE001 - a crash is a failure of this case, reported, not raised
        return f"crash {type(e).__name__}: {e}", frozen
    return None, frozen


def load_cases(pattern: str | None = None) -> list:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return [c for c in cases if pattern is None or pattern in c.name]


def _run_many(cases) -> list[tuple[str | None, bool]]:
    with warnings.catch_warnings():
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
    for c, (err, frozen) in zip(todo, results):
        if err is None:
            rep.passed += 1
            rep.specialized += frozen
        else:
            rep.failures[c.name] = err
    return rep


_CASES: list = []


def _run_indices(idx: list[int]) -> list[tuple[str | None, bool]]:
    return _run_many([_CASES[i] for i in idx])
