"""Run one transcribed MIGraphX pass test and classify our result against MIGraphX's expected
program:

    MATCH  our program equals MIGraphX's up to instruction names and order (dead code ignored)
    EQUIV  both made the same decision (both rewrote, or both left the program alone) and the
           results compute the same values, in a different but equivalent form
    DIFF   a different decision or different values; the case file records why (with evidence)

Shared by the test files in this folder and scripts/migraphx_conformance.py (the docs table).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import signal
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from migx_explore.compiler.inputs import random_inputs
from migx_explore.compiler.ir import Instruction, Module, Program
from migx_explore.compiler.parser import parse
from migx_explore.compiler.pass_infra import PassManager, make_pass
from migx_explore.compiler.printer import print_program
from migx_explore.compiler.ref import evaluate
from migx_explore.gpu import passes as _gpu_passes  # noqa: F401 - registers the target passes cases use

STATUSES = ("MATCH", "EQUIV", "DIFF")


@dataclass(frozen=True)
class Case:
    name: str  # MIGraphX's TEST_CASE name (#k when one test checks several programs)
    passes: str  # comma-separated pass names, as the test file's run_pass runs them
    before: str
    expected: str
    status: str = "MATCH"
    reason: str = ""  # why a DIFF (or a notable EQUIV) differs, with the evidence
    options: dict = field(default_factory=dict)  # per-pass options, {pass: {option: value}}
    # where MIGraphX's test checks only how many instructions main keeps (`expected` is then "")
    expected_count: int | None = None
    # large literals, printed `@literal{#key}`: key -> ("generate", type, lens, seed) | ("fill", type, lens, value)
    literals: dict = field(default_factory=dict)
    # where MIGraphX's test checks properties of the result instead of a program (check_resize):
    # "removes:<op>" (none left), "has:<op>" (one at least), "same_values" (as before the passes),
    # "count:<op>=N" (exactly N such instructions), "first_user:<op>==<user>" (or !=: the first <op>'s
    # first user)
    checks: tuple = ()


def case(
    name: str,
    passes: str,
    before: str,
    expected: str,
    status: str = "MATCH",
    reason: str = "",
    options: dict | None = None,
    expected_count: int | None = None,
    literals: dict | None = None,
    checks: tuple = (),
) -> Case:
    return Case(
        name, passes, before, expected, status, reason, options or {}, expected_count, literals or {}, tuple(checks)
    )


def generated_literal(type_: str, lens, seed: int) -> np.ndarray:
    """Our stand-in for MIGraphX's generate_literal: deterministic data per (shape, seed). The values
    differ from MIGraphX's; transcribed cases compare structure, and values only between our runs."""
    from migx_explore.compiler import dtypes

    rng = np.random.default_rng(1000 + int(seed))
    lens = tuple(int(n) for n in lens)
    data = rng.uniform(-1, 1, lens) if dtypes.dtype(type_).is_float else rng.integers(0, 4, lens)
    return np.asarray(data).astype(dtypes.np_dtype(type_))


def literal_table(c: Case) -> dict[str, np.ndarray]:
    from migx_explore.compiler import dtypes

    out = {}
    for key, (kind, type_, lens, arg) in c.literals.items():
        if kind == "generate":
            out[key] = generated_literal(type_, lens, arg)
        else:
            out[key] = np.full(tuple(lens), arg, dtypes.np_dtype(type_))
    return out


def parse_case_text(c: Case, text: str) -> Program:
    return parse(text, literals=literal_table(c)) if c.literals else parse(text)


def run_passes(c: Case) -> Program:
    program = parse_case_text(c, c.before)
    passes = [make_pass(n, **c.options.get(n, {})) for n in c.passes.split(",") if n]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        PassManager(validate=True).run(program, passes)
    return program


def canonical(program: Program) -> str:
    """A digest of what main computes, independent of instruction ids, names and order."""
    memo: dict[int, str] = {}

    def key(ins: Instruction) -> str:
        got = memo.get(ins.id)
        if got is not None:
            return got
        parts = [ins.name, str(ins.shape)]
        if ins.is_param():
            parts.append(ins.param_name)
        elif ins.is_literal():
            data = np.ascontiguousarray(np.asarray(ins.literal.data))
            parts.append(hashlib.sha256(data.tobytes()).hexdigest()[:16])
        else:
            parts.append(repr(sorted(ins.op.attrs.items(), key=lambda kv: kv[0])))
            parts.extend(key(i) for i in ins.inputs)
            parts.extend(module_key(m) for m in ins.module_inputs)
        out = hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]
        memo[ins.id] = out
        return out

    def module_key(m: Module) -> str:
        return "(" + ",".join(key(o) for o in m.output_instructions()) + ")"

    return module_key(program.main)


MAX_NUMERIC_COST = 1 << 26  # element operations; costlier programs are compared structurally only (time)


def _too_big(p: Program) -> bool:
    """Roughly how many element operations evaluating the program takes: every result's elements,
    times the reduction length for convolutions and dots."""
    cost = 0
    for ins in p.main:
        if ins.shape.is_tuple or ins.shape.dyn_dims is not None:
            continue
        n = ins.shape.elements()
        if ins.name in ("convolution", "quant_convolution", "dot", "quant_dot") and len(ins.inputs) > 1:
            w = ins.inputs[1].shape
            n *= int(np.prod(w.lens[1:])) if ins.name.endswith("convolution") else w.lens[-2]
        cost += n
    return cost > MAX_NUMERIC_COST


def same_values(a: Program, b: Program, seed: int = 0) -> bool:
    if _too_big(a) or _too_big(b):
        return False
    try:
        feeds = random_inputs(a, seed)
        ra, rb = evaluate(a, feeds), evaluate(b, feeds)
    except Exception:  # noqa: BLE001 - a program we cannot evaluate is not shown equivalent
        return False
    if len(ra) != len(rb):
        return False
    for x, y in zip(ra, rb):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape or not np.allclose(x, y, rtol=1e-4, atol=1e-5, equal_nan=True):
            return False
    return True


PASS_TIME_LIMIT_S = 20


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: int):
    """SIGALRM-based limit (main thread, POSIX); elsewhere no limit is applied."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def classify(c: Case) -> tuple[str, str]:
    """(status, detail) of our passes on this case."""
    before = parse_case_text(c, c.before)
    try:
        with _time_limit(PASS_TIME_LIMIT_S):
            ours = run_passes(c)
    except _Timeout:
        return "DIFF", f"our passes did not finish within {PASS_TIME_LIMIT_S} s"
    except Exception as e:  # noqa: BLE001 - a pass failure is a difference, reported as such
        return "DIFF", f"our passes failed: {type(e).__name__}: {e}"
    if c.checks:
        return _check_properties(c, before, ours)
    if c.expected_count is not None:
        n = len(list(ours.main))
        if n == c.expected_count:
            return "MATCH", ""
        return "DIFF", f"MIGraphX keeps {c.expected_count} instructions in main, we keep {n}"
    expected = parse_case_text(c, c.expected)
    k_ours, k_exp, k_before = canonical(ours), canonical(expected), canonical(before)
    if k_ours == k_exp:
        return "MATCH", ""
    we_change, they_change = k_ours != k_before, k_exp != k_before
    if we_change != they_change:
        return "DIFF", (
            "we rewrite, MIGraphX leaves the program" if we_change else "MIGraphX rewrites, we leave the program"
        )
    if _too_big(expected) or _too_big(ours):
        return "DIFF", "both rewrite, differently; too large to compare values here"
    if not same_values(expected, ours):
        return "DIFF", "both rewrite, but the results compute different values"
    return "EQUIV", "both rewrite; equivalent form"


def _check_properties(c: Case, before: Program, ours: Program) -> tuple[str, str]:
    names = {ins.name for ins in ours.main}
    for check in c.checks:
        kind, _, op = check.partition(":")
        if kind == "removes" and op in names:
            return "DIFF", f"MIGraphX's pass leaves no {op}, ours keeps one"
        if kind == "has" and op not in names:
            return "DIFF", f"MIGraphX's pass writes a {op}, ours does not"
        if kind == "same_values" and not same_values(before, ours):
            return "DIFF", "our rewrite changes the values"
        if kind == "first_user":  # "first_user:convolution!=mul": the first conv's first user
            name, cmp, user = re.match(r"(\w+)(==|!=)(\w+)$", op).groups()
            first = next((ins for ins in ours.main if ins.name == name), None)
            got = first.outputs[0].name if first is not None and first.outputs else None
            if (got == user) != (cmp == "=="):
                neg = " not" if cmp == "!=" else ""
                return "DIFF", f"MIGraphX's first {name} is{neg} used by {user}, ours by {got}"
        if kind == "count":  # "count:convolution=1": how many such instructions main keeps
            name, _, want = op.partition("=")
            n = sum(ins.name == name for ins in ours.main)
            if n != int(want):
                return "DIFF", f"MIGraphX keeps {want} {name} in main, we keep {n}"
    return "MATCH", ""


def ours_text(c: Case) -> str:
    return print_program(run_passes(c), full=True)


def check(c: Case) -> None:
    """The test body of every transcribed case: our status is still the recorded one, and a
    case that is not a MATCH says why."""
    status, detail = classify(c)
    assert c.status in STATUSES
    if c.status != "MATCH":
        assert c.reason, f"{c.name}: a {c.status} case must say why"
    assert status == c.status, (
        f"{c.name}: recorded {c.status}, now {status} ({detail}).\n--- ours ---\n"
        f"{ours_text(c)}\n--- MIGraphX expects ---\n"
        f"{c.expected or f'{c.expected_count} instructions'}"
    )
