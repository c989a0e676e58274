"""Helpers for pass tests: IR text in, passes, IR text out; and numeric equivalence checks.

check_pass('''
    x = @param:x -> float32, {4}, {1}
    @1 = identity(x) -> float32, {4}, {1}
    @2 = @return(@1)
''', [EliminateIdentity()], '''
    x = @param:x -> float32, {4}, {1}
    @1 = @return(x)
''')
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np

from .inputs import random_inputs
from .ir import Program
from .parser import parse
from .printer import print_program
from .ref import evaluate


def _norm(text: str) -> str:
    return "\n".join(line.strip() for line in textwrap.dedent(text).strip().splitlines() if line.strip())


def run_on_text(text: str, passes: Sequence, *, validate: bool = True) -> Program:
    from .pass_infra import run_passes

    p = parse(textwrap.dedent(text))
    run_passes(p, list(passes), validate=validate)
    return p


def check_pass(
    before: str, passes: Sequence, after: str, *, numeric: bool = True, rtol: float = 1e-5, atol: float = 1e-6
) -> Program:
    """Assert that running `passes` on `before` prints exactly `after` (whitespace-normalised),
    and, unless numeric=False, that outputs agree with the original program on random inputs."""
    original = parse(textwrap.dedent(before))
    p = run_on_text(before, passes)
    got = _norm(print_program(p, full=True))
    want = _norm(print_program(parse(textwrap.dedent(after)), full=True))
    assert got == want, f"IR after passes differs.\n--- got ---\n{got}\n--- want ---\n{want}"
    if numeric:
        assert_same_outputs(original, p, rtol=rtol, atol=atol)
    return p


def assert_same_outputs(
    a: Program,
    b: Program,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
) -> None:
    feeds = dict(inputs) if inputs is not None else random_inputs(a, seed)
    ra, rb = evaluate(a, feeds), evaluate(b, feeds)
    assert len(ra) == len(rb), f"output count {len(ra)} != {len(rb)}"
    for k, (x, y) in enumerate(zip(ra, rb)):
        np.testing.assert_allclose(
            np.asarray(y, np.float64), np.asarray(x, np.float64), rtol=rtol, atol=atol, err_msg=f"output {k} differs"
        )
