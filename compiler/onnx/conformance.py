"""ONNX node conformance: run onnx.backend.test's node cases through ReferenceBackend.

A case counts as *supported* by rule, not by hand: every node's op type is in supported_ops()
(default domain, no subgraphs), and every graph input, output and initializer is a tensor of an
element type the IR has (no string, complex, float8, int4/uint4, sequence or optional values).
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
    supported: int = 0
    passed: int = 0
    specialized: int = 0  # passed cases that needed an input frozen to its value (see backend.py)
    failures: dict[str, str] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float:
        return self.passed / self.supported if self.supported else 0.0


def unsupported_reason(model: onnx.ModelProto, ops: Iterable[str] | None = None) -> str | None:
    """Why a case is outside what we claim to support, or None if it is inside."""
    known = set(supported_ops() if ops is None else ops)
    for n in model.graph.node:
        if n.domain not in ("", "ai.onnx"):
            return f"domain {n.domain}"
        if n.op_type not in known:
            return f"op {n.op_type}"
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
        else:
            rep.unsupported[c.name] = why
    rep.supported = len(todo)
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
