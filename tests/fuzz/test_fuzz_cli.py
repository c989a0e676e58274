"""Fuzzing the CLI (issue 14): 1,200 malformed models through `run` (and some through `trace`), 300
malformed saved programs through `read` (and some through `compile --resume`). Every case must end
in exit 0 or one error line with exit 2: no traceback, no internal error (exit 3), no hang (each
case runs under a timeout). Seeded: a failure names its case, which `model_case(seed, i)` rebuilds.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
from pathlib import Path

import pytest

from migx_explore.cli import main

from .malformed import model_case, saved_program_case

SEED = 14
MODELS, MODEL_BATCH = 1200, 50
SAVED, SAVED_BATCH = 300, 50
CASE_TIMEOUT_S = 20
TRACE_EVERY = 40  # also trace every 40th model case that imports (the pipelines see odd shapes too)

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="per-case timeouts need SIGALRM")


@pytest.fixture(autouse=True)
def small_budget(monkeypatch):
    """A 64 MiB memory budget: a case declaring big tensors is refused up front (that path is under
    test too) instead of spending the suite's time computing on them."""
    monkeypatch.setenv("MIGX_EXPLORE_MEMORY_BUDGET", "64M")


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException so the CLI's error boundary cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float):
    def on_alarm(signum, frame):
        raise CaseTimeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv: list[str]) -> tuple[int | str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        with time_limit(CASE_TIMEOUT_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc: int | str = main(argv)
    except CaseTimeout:
        rc = "hang"
    except BaseException as e:  # noqa: BLE001 - anything escaping main() is a failure to report
        rc = f"escaped {type(e).__name__}: {e}"
    return rc, err.getvalue()


def problem(argv: list[str], rc: int | str, err: str) -> str | None:
    """What is wrong with one CLI outcome, or None."""
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("migx-explore: warning:")]
    verb = argv[0]
    if rc not in (0, 1, 2) or "Traceback" in err:
        return f"exit {rc}: {err.strip()[-400:]}"
    if rc == 2 and (len(lines) != 1 or not lines[0].startswith(f"migx-explore {verb}: error: ")):
        return f"exit 2 without exactly one error line: {err.strip()[-400:]}"
    return None


@pytest.mark.parametrize("start", range(0, MODELS, MODEL_BATCH))
def test_malformed_models(tmp_path, start):
    failures = []
    for i in range(start, start + MODEL_BATCH):
        case = model_case(SEED, i)
        folder = tmp_path / str(i)
        folder.mkdir()
        path = case.write(folder)
        argv = ["run", str(path)]
        rc, err = run_cli(argv)
        why = problem(argv, rc, err)
        if why is None and rc == 0 and i % TRACE_EVERY == 0:
            argv = ["trace", str(path), "--out", str(folder / "trace"), "-q"]
            rc, err = run_cli(argv)
            why = problem(argv, rc, err)
        if why:
            failures.append(f"{case.name} ({' '.join(argv[:1])}): {why}")
    assert not failures, "\n".join(failures)


@pytest.fixture(scope="module")
def saved_partial(tmp_path_factory) -> bytes:
    from migx_explore import models
    from migx_explore.portable import compile_until

    path = tmp_path_factory.mktemp("fuzz_saved") / "part.migx"
    compile_until(models.load("mlp"), "backend.lowering", str(path), model="mlp")
    return path.read_bytes()


@pytest.mark.parametrize("start", range(0, SAVED, SAVED_BATCH))
def test_malformed_saved_programs(tmp_path, saved_partial, start):
    failures = []
    for i in range(start, start + SAVED_BATCH):
        path = Path(tmp_path) / f"{i}.migx"
        path.write_bytes(saved_program_case(saved_partial, SEED, i))
        verbs = [["read", str(path)]]
        if i % 10 == 0:
            verbs.append(["compile", str(path), "--resume"])
        for argv in verbs:
            rc, err = run_cli(argv)
            why = problem(argv, rc, err)
            if why:
                failures.append(f"saved[{SEED}:{i}] ({argv[0]}): {why}")
        os.unlink(path)
    assert not failures, "\n".join(failures)
