"""The numeric check: after each pass that changed the IR, the program's outputs against the
reference outputs of the unoptimized program (MIGraphX's relative RMS per type, or allclose).
`NumericChecks` is the instrumentation; `NumericConfig` what it checks against."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MigxError
from ..inputs import REAL_INPUTS_HINT
from ..ir import Program

# At import, not at the first check: a check is what a user waits for (and where Python keeps
# no bytecode cache, compiling the evaluator there cost the first check of a small model as
# much as two forwards).
from ..ref_incremental import IncrementalEvaluator
from ..snapshot import ProgramSnapshot, snapshot
from ..verify import OutputsCheck, Tolerance, check_outputs, program_compute_type
from .instrumentation import PassInstrumentation, PassRun
from .trace import NumericCheck


@dataclass
class NumericConfig:
    """Inputs, reference outputs and tolerance of the per-pass numeric check. With rtol/atol unset
    the check is MIGraphX's relative RMS with a per-type threshold (`rms` overrides it); setting
    either selects elementwise allclose (compiler/verify.py)."""

    inputs: dict[str, np.ndarray]
    reference: list[np.ndarray]
    rtol: float | None = None
    atol: float | None = None
    nested: bool = False  # also check nested passes (slower)
    disabled_reason: str = ""
    rms: float | None = None
    random_inputs: bool = False  # the inputs were generated (errors then say how to pass real ones)
    # The program the reference outputs came from (discontinuous ops re-run it on a candidate's
    # near-tie choice, compiler/discontinuous.py) and a cache of its values shared by the copies
    # dataclasses.replace makes.
    reference_program: ProgramSnapshot | None = None
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def tolerance(self) -> Tolerance:
        return Tolerance(rms=self.rms, rtol=self.rtol, atol=self.atol)

    def __getstate__(self) -> dict[str, Any]:
        # `cache` is a per-process memo: its incremental evaluator holds a lock and a whole
        # version's values, neither of which should travel (a sweep ships this config to Dask
        # workers). Each process rebuilds what it needs on first use (reference_evaluator).
        state = dict(self.__dict__)
        state["cache"] = {}
        return state


class NumericChecks(PassInstrumentation):
    """`record.numeric` after each pass that changed the IR: top-level passes, and nested ones
    too with `config.nested`. An evaluation error turns the check off for the rest of the run,
    saying why in every later record."""

    def __init__(self, config: NumericConfig):
        self.config = config

    def after_pass(self, run: PassRun) -> None:
        if run.record.changed and (run.parent is None or self.config.nested):
            run.record.numeric = self.check(run.program)

    def check(self, program: Program) -> NumericCheck:
        cfg = self.config
        if cfg.disabled_reason:
            return NumericCheck(float("nan"), float("nan"), True, cfg.disabled_reason)
        try:
            outs, names = reference_evaluator(cfg).evaluate(program, named=True)
        except MigxError as e:
            hint = f" (on random inputs: {REAL_INPUTS_HINT})" if cfg.random_inputs else ""
            cfg.disabled_reason = f"unavailable from here on: {e}{hint}"
            return NumericCheck(float("nan"), float("nan"), True, cfg.disabled_reason)
        return compare_program_outputs(program, outs, cfg, names)


def compare_program_outputs(
    program: Program | ProgramSnapshot,
    outs: Sequence[np.ndarray],
    cfg: NumericConfig,
    names: Sequence | None = None,
) -> NumericCheck:
    """`program`'s outputs (a Program or a snapshot of one) against the reference under cfg's
    tolerance. Outputs that differ only
    because a TopK / ArgMax / NMS chose differently among near-ties (inputs within tolerance) pass,
    compared with the reference re-run on that choice, and the check says so in `selection`.
    `names`: the outputs' names from the incremental evaluator (`evaluate(..., named=True)`),
    where they come from there: an output named as one compared before holds its bits."""
    compute = program_compute_type(program)
    how = (compute, cfg.tolerance)
    # Most passes leave the outputs as the check before found them (the incremental evaluator
    # hands back the very arrays): the comparison is then the one made before.
    last = cfg.cache.get("last_compared")
    known: list = []
    if last is not None and last[0] == how and len(last[1]) == len(outs):
        # ... and so do new arrays of the same bits (a pass that fused the ops computing them)
        before = last[4] if names is not None and last[4] is not None and len(last[4]) == len(names) else None
        same = [a is b or (before is not None and names[k] == before[k]) for k, (a, b) in enumerate(zip(outs, last[1]))]
        if all(same):
            return dataclasses.replace(last[2])
        # the outputs a pass left as they were keep their comparison (a decoder's caches)
        known = [c if s else None for s, c in zip(same, last[3])]
    res, checks = _compare_program_outputs(program, outs, cfg, compute, known)
    cfg.cache["last_compared"] = (how, list(outs), res, checks, None if names is None else tuple(names))
    return dataclasses.replace(res)


def _compare_program_outputs(
    program: Program | ProgramSnapshot, outs: Sequence[np.ndarray], cfg: NumericConfig, compute: str, known: list
) -> tuple[NumericCheck, list]:
    """The check, and the per-output comparisons against the reference (empty where the answer
    came from elsewhere: a near-tie selection)."""
    vres = check_outputs(outs, cfg.reference, cfg.tolerance, compute=compute, known=known)
    res = _summary(vres, cfg.tolerance, compute)
    checks = vres.outputs if len(vres.outputs) == len(outs) else []
    alt = _explained(program, outs, cfg, compute, res)
    return (res, checks) if alt is None else (alt, [])


def _explained(
    program: Program | ProgramSnapshot, outs: Sequence[np.ndarray], cfg: NumericConfig, compute: str, res: NumericCheck
) -> NumericCheck | None:
    """The check against the reference re-run on the program's near-tie choice, where outputs
    that failed differ only by such a choice; None otherwise."""
    if res.ok or res.note or cfg.reference_program is None:
        return None
    from ..discontinuous import explain_selection_change, has_discontinuous_ops, reference_values

    if isinstance(program, ProgramSnapshot):  # rebuilt only here, where a check failed
        program = program.to_program()
    if "reference_program" not in cfg.cache:
        cfg.cache["reference_program"] = cfg.reference_program.to_program()
    reference = cfg.cache["reference_program"]
    if not has_discontinuous_ops(reference):
        return None
    if "reference_values" not in cfg.cache:
        try:
            cfg.cache["reference_values"] = reference_values(reference, cfg.inputs)
        except MigxError:
            return None
    # After a flip, the following passes usually produce the very same outputs: reuse the answer.
    digest = _digest(outs)
    last = cfg.cache.get("last_explained")
    if last is not None and last[0] == digest:
        change = last[1]
    else:
        change = explain_selection_change(
            reference,
            program,
            cfg.inputs,
            outs,
            cfg.tolerance,
            compute=compute,
            ref_values=cfg.cache["reference_values"],
        )
        cfg.cache["last_explained"] = (digest, change)
    if change is None:
        return None
    alt = compare_outputs(outs, change.outputs, cfg.tolerance, compute=compute)
    alt.selection = change.note
    return alt


def _digest(outs: Sequence[np.ndarray]) -> str:
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for o in outs:
        a = np.ascontiguousarray(o)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def compare_outputs(
    outs: Sequence[np.ndarray],
    ref: Sequence[np.ndarray],
    tol: Tolerance | None = None,
    atol: float | None = None,
    *,
    compute: str = "float32",
) -> NumericCheck:
    """Outputs against reference outputs, summarised for the trace: the worst output's figures.
    `compare_outputs(outs, ref, rtol, atol)` (two floats) is the allclose form."""
    if not isinstance(tol, Tolerance):
        tol = Tolerance(rtol=tol, atol=atol) if tol is not None or atol is not None else Tolerance()
    return _summary(check_outputs(outs, ref, tol, compute=compute), tol, compute)


def _summary(res: OutputsCheck, tol: Tolerance, compute: str) -> NumericCheck:
    """An OutputsCheck as the trace shows it: the worst output's figures."""
    if not res.outputs:
        return NumericCheck(float("inf"), float("inf"), False, res.note, tolerance=tol.describe(compute))
    k = res.worst
    w = res.outputs[k]
    return NumericCheck(
        max(c.max_abs for c in res.outputs),
        max(c.max_rel for c in res.outputs),
        res.ok,
        w.note,
        rms=w.rms,
        threshold=w.threshold,
        output=k,
        tolerance=tol.describe(compute),
    )


def make_numeric_config(
    program: Program | ProgramSnapshot,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    rms: float | None = None,
    nested: bool = False,
) -> NumericConfig:
    """Reference outputs of `program` on `inputs` (default: random inputs that respect the model,
    compiler/inputs.py). An evaluation error on random inputs says so and how to pass real ones.
    `program` may be a snapshot (a session's initial one): it is evaluated as it is, and the
    first check after a pass then patches the evaluator's program from it, nothing rebuilt."""
    from ..inputs import explain_random_failure, model_inputs

    generated = inputs is None
    snap = program if isinstance(program, ProgramSnapshot) else None
    if generated:
        feeds = model_inputs(program if snap is None else snap.to_program(), seed)
    else:
        feeds = dict(inputs)
    evaluator = IncrementalEvaluator(feeds)
    try:
        reference = evaluator.evaluate(program) if snap is None else evaluator.evaluate_snapshot(snap)
    except MigxError as e:
        if generated:
            raise explain_random_failure(e) from None
        raise
    cfg = NumericConfig(
        feeds,
        reference,
        rtol,
        atol,
        nested,
        rms=rms,
        random_inputs=generated,
        reference_program=snapshot(program) if snap is None else snap,
    )
    cfg.cache["evaluator"] = evaluator  # holds the reference's values: the first check reuses them
    return cfg


def reference_evaluator(cfg: NumericConfig) -> Any:
    """The incremental evaluator of cfg's inputs, shared by its copies (compiler/ref_incremental.py):
    each check re-runs only what the pass changed since the check before."""
    ev = cfg.cache.get("evaluator")
    if ev is None or ev.inputs is not cfg.inputs:
        ev = cfg.cache["evaluator"] = IncrementalEvaluator(cfg.inputs)
    return ev
