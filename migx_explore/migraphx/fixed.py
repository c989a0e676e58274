"""A TraceCache over a trace read from elsewhere (a MIGraphX log): the trace is the same for every
configuration, nothing re-runs, and the numeric check is off (said once, by the reader)."""

from __future__ import annotations

import threading

from migx_explore.compiler.pass_infra import Trace
from migx_explore.session_config import PipelineConfig, SessionError
from migx_explore.session_trace import TraceCache


class FixedTraceCache(TraceCache):
    def __init__(self, trace: Trace, lock: threading.RLock | None = None):
        super().__init__(trace.initial, validate=False, numeric=False, lock=lock)
        self.fixed = trace
        self._partial = trace

    def _prepare(self, config: PipelineConfig) -> None:
        self._partial, self._version = self.fixed, config.version

    def _complete(self) -> bool:
        return True

    def _advance(self, config: PipelineConfig) -> None:  # pragma: no cover - _complete is always true
        raise SessionError("a trace read from a MIGraphX log cannot be re-run")

    def variant(self) -> TraceCache:
        raise SessionError(
            "a trace read from a MIGraphX log cannot be re-run under another configuration; "
            "load the model itself (Session.from_onnx) to compare configurations"
        )

    def invalidate(self) -> None:
        self._partial = self.fixed


__all__ = ["FixedTraceCache"]
