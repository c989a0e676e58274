"""`verify` as data: run a session's pipelines with the per-pass numeric check on given (or random)
inputs and a tolerance (compiler/verify.py), and summarise: how many passes were checked, which
came closest to the limit, the first that broke it, and (optionally) the bisect result.

    report = verify_session(Session.from_onnx("bert.onnx", inputs="feed.npz"))
    print(report)            # the lines the CLI prints
    report.ok, report.failure.path, report.divergence
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from migx_explore.compiler.pass_infra import PassRecord, make_numeric_config
from migx_explore.compiler.verify import program_compute_type

if TYPE_CHECKING:
    from .session import Session


@dataclass
class VerifyReport:
    model: str
    tolerance: str  # e.g. "relative RMS <= 9.54e-06 (float32)"
    inputs: str  # where the inputs came from
    checked: int  # passes that changed the IR and were checked
    closest: PassRecord | None  # the checked pass nearest its threshold
    failure: PassRecord | None  # the first pass that broke tolerance
    unavailable: PassRecord | None  # where the reference evaluator stopped (GPU-only ops)
    error: str | None = None  # a pass that failed outright
    divergence: Any = None  # migx_explore.bisect.Divergence when bisect was asked for
    # The first pass after which a discontinuous op (TopK, ArgMax, NMS) chose differently among
    # near-ties, its outputs then compared with the reference re-run on that choice.
    selection: PassRecord | None = None
    # The pass that added the most error up to the failure (or the closest pass): (record, rms
    # before, rms after); the error of a later pass that changed nothing numerically came from it.
    source: Any = None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.error is None

    def lines(self) -> list[str]:
        out = [
            f"{self.model}: {self.checked} passes changed the IR and were checked on {self.inputs}; "
            f"tolerance: {self.tolerance}"
        ]
        if self.closest is not None:
            out.append(f"closest to the limit: {self.closest.path}: {self.closest.numeric.describe()}")
        if self.source is not None and (self.failure is not None or self.source[0] is not self.closest):
            rec, before, after = self.source
            out.append(f"the error came from {rec.path}: rms {before:.3e} -> {after:.3e}")
        if self.unavailable is not None:
            out.append(f"numeric checks stopped at {self.unavailable.path}: {self.unavailable.numeric.note}")
        if self.selection is not None:
            out.append(f"from {self.selection.path} on: {self.selection.numeric.selection} (not a failure)")
        if self.error:
            out.append(f"error: {self.error}")
        elif self.failure is not None:
            out.append(f"FAIL: pass {self.failure.path} breaks the tolerance: {self.failure.numeric.describe()}")
            if self.divergence is not None:
                out.append(self.divergence.describe())
        else:
            out.append("OK: every pass keeps the outputs within tolerance (reference evaluator)")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _margin(rec: PassRecord) -> float:
    n = rec.numeric
    if n.threshold == n.threshold:  # rms mode
        return n.rms / n.threshold if n.threshold > 0 else (0.0 if n.rms == 0 else float("inf"))
    return n.max_rel


def _tolerance_summary(initial: str, checked: list[PassRecord]) -> str:
    """The rule, plus where a precision change (the quantize stage) switched the threshold."""
    out, current = [initial], initial
    for r in checked:
        if r.numeric.tolerance and r.numeric.tolerance != current:
            current = r.numeric.tolerance
            out.append(f"{current.removeprefix('relative RMS ')} from {r.path} on")
    return "; ".join(out)


# A pass whose outputs' error is within this factor of the previous checked pass's changed
# nothing numerically: it is not blamed for an error that came before it (a threshold is per
# compute type, and the error of an int8 program is the quantizer's, whichever pass is looked at).
_UNCHANGED = 1.01


def _grew(prev: PassRecord | None, rec: PassRecord) -> bool:
    if prev is None or rec.numeric.rms != rec.numeric.rms or prev.numeric.rms != prev.numeric.rms:
        return True
    return rec.numeric.rms > prev.numeric.rms * _UNCHANGED + 1e-30


def _first_failure_that_added_error(checked: list[PassRecord]) -> PassRecord | None:
    """The first pass over its threshold that made the error larger than the pass before left it."""
    for k, r in enumerate(checked):
        if not r.numeric.ok and _grew(checked[k - 1] if k else None, r):
            return r
    return None


def _error_source(checked: list[PassRecord], upto: PassRecord | None) -> tuple[PassRecord, float, float] | None:
    """The pass (up to `upto`) whose change added the most error, with the rms before and after."""
    if upto is None or upto not in checked:
        return None
    best, prev_rms = None, 0.0
    for r in checked[: checked.index(upto) + 1]:
        rms = r.numeric.rms
        if rms == rms and (best is None or rms - prev_rms > best[2] - best[1]):
            best = (r, prev_rms, rms)
        prev_rms = rms if rms == rms else prev_rms
    return best if best is not None and best[2] > 0 else None


def verify_session(
    session: Session,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    rms: float | None = None,
    seed: int = 0,
    bisect: bool = False,
    inputs_label: str | None = None,
) -> VerifyReport:
    """Re-trace `session` with numeric checks on `inputs` (default: the session's, else random
    inputs that respect the model) under the given tolerance (default: MIGraphX's relative RMS
    per compute type). Runs the check inline even where the session defers it (the report needs
    every pass's result)."""
    traces = session.traces
    if inputs is None:
        inputs = traces.numeric_inputs
    program = session.initial.to_program()
    traces.numeric = True
    traces.numeric_inputs = None if inputs is None else dict(inputs)
    cfg = make_numeric_config(program, traces.numeric_inputs, rtol=rtol, atol=atol, rms=rms, seed=seed)
    traces.set_numeric_config(cfg)
    session.invalidate()
    deferred, traces.defer_numeric = traces.defer_numeric, False
    try:
        trace = session.run()
    finally:
        traces.defer_numeric = deferred
    checked = [r for r in trace if r.numeric is not None and not r.numeric.note]
    report = VerifyReport(
        model=session.name,
        tolerance=_tolerance_summary(cfg.tolerance.describe(program_compute_type(program)), checked),
        inputs=inputs_label or ("the given inputs" if inputs is not None else f"random inputs (seed {seed})"),
        checked=len(checked),
        closest=max(checked, key=_margin, default=None),
        failure=_first_failure_that_added_error(checked),
        unavailable=next((r for r in trace if r.numeric is not None and r.numeric.note), None),
        error=trace.error,
        selection=next((r for r in checked if r.numeric.selection), None),
    )
    report.source = _error_source(checked, report.failure or report.closest)
    if bisect and report.failure is not None and report.error is None:
        from .bisect import numeric_bisect

        report.divergence = numeric_bisect(session)
    return report


__all__ = ["VerifyReport", "verify_session"]
