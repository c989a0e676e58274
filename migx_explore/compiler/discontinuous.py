"""Outputs that differ only because a discontinuous op chose differently among near-ties.

TopK, ArgMax/ArgMin and NonMaxSuppression are discontinuous: a reassociation that moves their
input by 1e-7 may flip two near-equal scores, and everything downstream that consumes the chosen
indices (the gathers that sort boxes into output rows) then permutes rows or swaps the row at the
k boundary. Comparing such outputs elementwise reports a huge error although both programs are
right. YOLO-style detectors hit this with real images (many sigmoid scores saturate near 1).

`explain_selection_change` decides whether that is what happened, without trusting the pass:

1. every discontinuous op of the reference program is located in the candidate (same stable id,
   or an instruction whose provenance names it, e.g. the two stages rewrite_topk splits it into),
   and the candidate's value of each of its inputs is read;
2. those inputs must agree with the reference's within the tolerance (else the pass really broke
   the numbers upstream, and the failure stands);
3. the reference program is re-run with each discontinuous op computed on the candidate's inputs
   (the reference's own op, so it makes the candidate's choice among the ties) and its own values
   everywhere else; the selection must keep the selected values within tolerance (a near-tie, not
   a different answer);
4. the candidate's outputs must then match that re-run within tolerance: the only difference left
   was which of the tied elements was selected. A sign flip before a TopK fails step 2; a bug after
   it fails step 4.

The result is a one-line explanation ("TopK tie order differs at 3 of 300 positions; inputs within
tolerance") and the re-run's outputs, which the caller compares with instead of the reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import MigxError
from .ir import Instruction, Program
from .verify import Tolerance, check_outputs, check_value

# IR op name -> the name users know it by (ONNX's).
DISCONTINUOUS_OPS: dict[str, str] = {
    "topk": "TopK",
    "argmax": "ArgMax",
    "argmin": "ArgMin",
    "nonmaxsuppression": "NonMaxSuppression",
}


@dataclass(frozen=True)
class SelectionChange:
    """Why the outputs differ, and the reference outputs re-run with the candidate's choices."""

    note: str
    outputs: list[np.ndarray]


def has_discontinuous_ops(program: Program) -> bool:
    return any(ins.name in DISCONTINUOUS_OPS for ins in program.main)


def reference_values(program: Program, feeds: Mapping[str, np.ndarray]) -> dict[int, Any]:
    """The values explain_selection_change needs from the reference program: each discontinuous
    op's inputs and outputs (not every activation, so a caller can keep them across passes)."""
    from .ref import evaluate_all, with_buffer_params

    wanted = {i.id for op in program.main if op.name in DISCONTINUOUS_OPS for i in (op, *op.inputs)}
    values = evaluate_all(program, with_buffer_params(program, feeds))
    return {k: v for k, v in values.items() if k in wanted}


def _selection(value: Any, op_name: str) -> np.ndarray:
    """The index part of a discontinuous op's output (TopK's is the tuple's second element)."""
    return np.asarray(value[1] if op_name == "topk" else value)


def _candidate_inputs(
    ref_op: Instruction,
    ref_args: Sequence[np.ndarray],
    candidate: Program,
    cand_values: Mapping[int, Any],
    tol: Tolerance,
    compute: str,
) -> list[np.ndarray] | None:
    """The candidate's value of each input of `ref_op`: the same instruction id where it survived;
    else the input (same element count) of a candidate instruction that came from `ref_op`; else
    (provenance does not chain across passes, so a twice-lowered op names only its last
    ancestor) the candidate value of that size nearest the reference's, if within tolerance.
    None when an input cannot be found or moved beyond tolerance: a divergence upstream."""
    heirs = [c for c in candidate.main if c.id == ref_op.id or ref_op.id in c.origin]
    found: list[np.ndarray] = []
    for p, i in enumerate(ref_op.inputs):
        want = ref_args[p]
        value = cand_values.get(i.id)
        if value is None or isinstance(value, tuple) or np.size(value) != want.size:
            # Lowering wraps the op (gpu::precompile_op, its buffers as extra inputs): any
            # instruction that came from it qualifies; the element count picks the right input.
            value = next(
                (
                    cand_values[c.inputs[p].id]
                    for c in heirs
                    if p < len(c.inputs)
                    and c.inputs[p].id in cand_values
                    and np.size(cand_values[c.inputs[p].id]) == want.size
                ),
                None,
            )
        if value is None:
            value = _nearest_value(want, cand_values, tol, compute)
        if value is None:
            return None
        value = np.asarray(value).reshape(want.shape)
        if not check_value(value, want, tol, compute=compute).ok:
            return None
        found.append(value)
    return found


def _nearest_value(want: np.ndarray, cand_values: Mapping[int, Any], tol: Tolerance, compute: str) -> np.ndarray | None:
    best, best_rms = None, float("inf")
    for v in cand_values.values():
        if isinstance(v, tuple) or np.size(v) != want.size or np.asarray(v).dtype != want.dtype:
            continue
        c = check_value(np.asarray(v).reshape(want.shape), want, tol, compute=compute)
        if c.ok and c.rms < best_rms:
            best, best_rms = v, c.rms
    return best


def _changed_positions(ref_sel: np.ndarray, alt_sel: np.ndarray, op_name: str) -> tuple[int, int]:
    """(positions whose choice differs, positions); NMS counts rows of (batch, class, box)."""
    if op_name == "nonmaxsuppression":
        return int(np.any(ref_sel != alt_sel, axis=-1).sum()), int(ref_sel.shape[0])
    return int(np.sum(ref_sel != alt_sel)), int(ref_sel.size)


def _boundary_swaps(ref_idx: np.ndarray, alt_idx: np.ndarray, axis: int) -> int:
    """How many selected elements are new (were not selected at all), over every slice."""
    a = np.moveaxis(ref_idx, axis, -1).reshape(-1, ref_idx.shape[axis])
    b = np.moveaxis(alt_idx, axis, -1).reshape(-1, alt_idx.shape[axis])
    return int(sum(len(set(y.tolist()) - set(x.tolist())) for x, y in zip(a, b)))


def _near_tie(
    op: Instruction, ref_args: Sequence[np.ndarray], ref_out: Any, alt_out: Any, tol: Tolerance, compute: str
) -> bool:
    """The alternative choice selects values within tolerance of the reference's choice."""
    if op.name == "topk":
        return check_value(alt_out[0], ref_out[0], tol, compute=compute).ok
    if op.name in ("argmax", "argmin"):
        axis = int(op.op["axis"])
        x = np.asarray(ref_args[0])
        return check_value(
            np.take_along_axis(x, np.asarray(alt_out), axis),
            np.take_along_axis(x, np.asarray(ref_out), axis),
            tol,
            compute=compute,
        ).ok
    return True  # NMS: its inputs agreeing within tolerance is the whole condition


def explain_selection_change(
    reference: Program,
    candidate: Program,
    feeds: Mapping[str, np.ndarray],
    cand_outputs: Sequence[np.ndarray],
    tol: Tolerance,
    *,
    compute: str = "float32",
    ref_values: Mapping[int, Any] | None = None,
) -> SelectionChange | None:
    """A SelectionChange when the candidate's outputs differ from the reference's only through
    near-tie choices of discontinuous ops (see the module docstring); None otherwise.
    `ref_values` (reference_values() of the reference) may be passed in to reuse it across passes."""
    from .ref import evaluate_all, run_instruction, with_buffer_params

    ref_ops = [i for i in reference.main if i.name in DISCONTINUOUS_OPS]
    if not ref_ops:
        return None
    try:
        vr = ref_values if ref_values is not None else reference_values(reference, feeds)
        vc = evaluate_all(candidate, with_buffer_params(candidate, feeds))
    except MigxError:
        return None
    pinned: dict[int, list[np.ndarray]] = {}
    for op in ref_ops:
        if op.id not in vr:
            continue
        args = _candidate_inputs(op, [np.asarray(vr[i.id]) for i in op.inputs], candidate, vc, tol, compute)
        if args is None:
            return None  # the op's inputs moved (or are nowhere): a real divergence upstream
        pinned[op.id] = args
    alt: dict[int, Any] = {}
    try:
        outs = _evaluate_pinned(reference, with_buffer_params(reference, feeds), pinned, alt, run_instruction)
    except MigxError:
        return None
    notes = _selection_notes(ref_ops, vr, alt, tol, compute)
    if not notes:
        return None
    if not check_outputs(cand_outputs, outs, tol, compute=compute).ok:
        return None
    return SelectionChange(
        "; ".join(notes) + "; inputs within tolerance (outputs compared with the reference "
        "re-run on the same choice among near-ties)",
        outs,
    )


def _selection_notes(ref_ops, vr: Mapping[int, Any], alt: Mapping[int, Any], tol: Tolerance, compute: str):
    """One note per op whose choice changed when re-run on the candidate's inputs, or None when
    some change is not a near tie (a real divergence)."""
    notes = []
    for op in ref_ops:
        if op.id not in alt:
            continue
        ref_out, alt_out = vr[op.id], alt[op.id]
        changed, total = _changed_positions(_selection(ref_out, op.name), _selection(alt_out, op.name), op.name)
        if not changed:
            continue
        if not _near_tie(op, [np.asarray(vr[i.id]) for i in op.inputs], ref_out, alt_out, tol, compute):
            return None
        notes.append(_change_note(op, ref_out, alt_out, changed, total))
    return notes


def _change_note(op, ref_out, alt_out, changed: int, total: int) -> str:
    what = "selection" if op.name == "nonmaxsuppression" else "tie order"
    # A detector's TopK picks one output row per position (indices [1, k]): say rows there.
    single = sum(d > 1 for d in np.shape(_selection(ref_out, op.name))) <= 1
    unit = "rows" if op.name == "nonmaxsuppression" or single else "positions"
    note = f"{DISCONTINUOUS_OPS[op.name]} {what} differs at {changed} of {total} {unit}"
    if op.name == "topk":
        swapped = _boundary_swaps(_selection(ref_out, op.name), _selection(alt_out, op.name), int(op.op["axis"]))
        note += f" ({swapped} swapped across the k boundary)" if swapped else ""
    return note


def _evaluate_pinned(
    program: Program,
    feeds: Mapping[str, Any],
    pinned: Mapping[int, list[np.ndarray]],
    alt: dict[int, Any],
    run_instruction: Any,
) -> list[np.ndarray]:
    """Evaluate main with the ops in `pinned` run on the given arguments (their results go to
    `alt`). The reference evaluator has no per-instruction override, hence this small loop."""
    instrs = list(program.main)
    keep = {o.id for o in program.main.output_instructions()}
    last_use = {i.id: k for k, ins in enumerate(instrs) for i in ins.inputs}
    env: dict[int, Any] = {}
    for k, ins in enumerate(instrs):
        if ins.is_param():
            env[ins.id] = np.asarray(feeds[ins.param_name])
        elif ins.is_return():
            break
        elif ins.is_literal():
            env[ins.id] = ins.literal.data
        else:
            args = pinned.get(ins.id) or [env[i.id] for i in ins.inputs]
            with np.errstate(all="ignore"):
                env[ins.id] = run_instruction(ins, list(args), True)
            if ins.id in pinned:
                alt[ins.id] = env[ins.id]
            for i in ins.inputs:  # values die after their last use, as in the reference evaluator
                if last_use.get(i.id) == k and i.id not in keep:
                    env.pop(i.id, None)
    return [env[o.id] for o in program.main.output_instructions()]


__all__ = [
    "DISCONTINUOUS_OPS",
    "SelectionChange",
    "explain_selection_change",
    "has_discontinuous_ops",
    "reference_values",
]
