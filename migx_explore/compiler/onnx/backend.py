"""An `onnx.backend.base.Backend` over the numpy reference evaluator, so ONNX's own backend test
cases (and any tool written against that API) can run imported programs.

The importer is a static-shape compiler, so a prepared model is specialized when it runs: graph
inputs take the shapes of the arrays fed, and an input that feeds a shape-like operand (axes,
pads, a target shape; the importer raises ConstantInputRequired) is frozen to the value fed, the
way a static compiler needs such values at compile time. Programs are cached per specialization.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

from ..ir import Program
from ..ref import evaluate
from .context import ConstantInputRequired, param_name
from .importer import parse_onnx


def _array(v: Any) -> Any:
    """A fed tensor as an array; a sequence (list) or an absent optional (None) stays as it is, so
    the importer's own message names the non-tensor input (the IR has tensor values only)."""
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    return v if v is None or isinstance(v, (list, tuple)) else np.asarray(v)


def _is_tensor(v: Any) -> bool:
    return isinstance(v, np.ndarray)


class ReferenceBackendRep(BackendRep):
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in inits]
        # (input shapes, frozen (name, value) pairs) -> (program, frozen names); values are arrays,
        # so this is a list searched linearly (a prepared model sees few specializations).
        self._cache: list[tuple[tuple, tuple, Program, tuple[str, ...]]] = []
        self.program: Program | None = None  # the program of the last run
        self.frozen: tuple[str, ...] = ()  # inputs frozen to their values in the last run

    def specialize(self, feed: Mapping[str, np.ndarray]) -> tuple[Program, tuple[str, ...]]:
        shapes = tuple((n, getattr(feed[n], "shape", None)) for n in self.input_names)
        frozen: dict[str, np.ndarray] = {}
        for key_shapes, key_values, prog, names in self._cache:
            if key_shapes == shapes and all(np.array_equal(feed[n], v) for n, v in key_values):
                return prog, names
        while True:
            dims = {n: list(feed[n].shape) for n in self.input_names if n not in frozen and _is_tensor(feed[n])}
            try:
                prog = parse_onnx(self.model, input_dims=dims, constant_inputs=frozen)
                break
            except ConstantInputRequired as e:
                new = [n for n in self.input_names if param_name(n) in e.params and n not in frozen]
                if not new:
                    raise
                frozen.update({n: feed[n] for n in new})
        self._cache.append((shapes, tuple((n, v.copy()) for n, v in frozen.items()), prog, tuple(frozen)))
        return prog, tuple(frozen)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, Mapping):
            feed = {k: _array(v) for k, v in inputs.items()}
        else:
            if isinstance(inputs, (np.ndarray, onnx.TensorProto)):
                inputs = [inputs]
            feed = {n: _array(v) for n, v in zip(self.input_names, inputs)}
        missing = [n for n in self.input_names if n not in feed]
        if missing:
            raise ValueError(f"missing input(s) {', '.join(missing)}")
        self.program, self.frozen = self.specialize(feed)
        params = {param_name(n): feed[n] for n in self.program.input_names}
        return tuple(evaluate(self.program, params))


class ReferenceBackend(Backend):
    """prepare() checks and keeps the model; run() imports (specialized) and evaluates it."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> ReferenceBackendRep:
        super().prepare(model, device, **kwargs)
        return ReferenceBackendRep(model)

    @classmethod
    def run_model(
        cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"
