"""The memory budget: sizes are checked against it up front, before anything is allocated, so a
model that declares a 4 TiB input gets one line with the byte count instead of a MemoryError.

The budget is per allocation (one tensor, one set of random inputs, one archive member). It
defaults to half of this machine's memory; MIGX_EXPLORE_MEMORY_BUDGET overrides it (bytes, or
with a K/M/G/T suffix: `MIGX_EXPLORE_MEMORY_BUDGET=32G`). The work budget (below) bounds the
instructions one evaluation runs (MIGX_EXPLORE_WORK_BUDGET, or the CLI's --work-budget).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
from collections.abc import Callable, Iterable, Iterator

from .errors import MigxError

ENV = "MIGX_EXPLORE_MEMORY_BUDGET"
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_FALLBACK = 8 << 30


class BudgetError(MigxError):
    """A size over the memory budget (or an impossible one), refused before allocating."""


@functools.cache
def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2 * _FALLBACK


def memory_budget() -> int:
    """Bytes one allocation may take (MIGX_EXPLORE_MEMORY_BUDGET, else half the machine's memory)."""
    return _budget(os.environ.get(ENV, ""))


@functools.lru_cache(maxsize=8)
def _budget(setting: str) -> int:
    # cached by the setting's text: the importer asks once per node (100,000 times on a big graph)
    text = setting.strip().upper().removesuffix("B").removesuffix("I")
    if text:
        num, unit = (text[:-1], text[-1]) if text[-1] in _SUFFIX else (text, "")
        try:
            value = int(float(num) * _SUFFIX[unit])
        except (ValueError, OverflowError):  # nan, inf
            raise BudgetError(f"{ENV}={os.environ[ENV]!r} is not a size (e.g. 8G, 512M or a byte count)") from None
        if value <= 0:
            raise BudgetError(f"{ENV}={os.environ[ENV]!r}: the memory budget must be a positive size (e.g. 8G)")
        return value
    return max(_physical_memory() // 2, 1 << 30)


def human_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n:,} bytes ({n / size:.1f} {unit})"
    return f"{n:,} bytes"


def check_bytes(nbytes: int, what: str) -> int:
    """`nbytes` if within the budget, else a BudgetError naming `what` and the byte count."""
    budget = memory_budget()
    if nbytes > budget:
        raise BudgetError(
            f"{what} needs {human_bytes(nbytes)}, over the memory budget of {human_bytes(budget)} "
            f"(set {ENV} to change it)"
        )
    return nbytes


def check_lens(lens: Iterable[int], itemsize: int, what: str) -> int:
    """check_bytes for a tensor of `lens` (negative dims refused too); returns the byte count."""
    dims = [int(d) for d in lens]
    if any(d < 0 for d in dims):
        raise BudgetError(f"{what}: negative dimension in {dims}")
    if len(dims) > 64:  # numpy's NPY_MAXDIMS (shape.MAX_RANK): no array of that rank can exist
        raise BudgetError(f"{what}: rank {len(dims)} is more than the 64 dims migx-explore (and numpy) supports")
    return check_bytes(math.prod(dims) * int(itemsize), f"{what} {dims}")


# ---- the work budget ------------------------------------------------------------------------------
# Memory is checked per allocation; time needs its own bound: a Loop with a constant trip count of
# 10^12 allocates nothing, yet never finishes. The reference evaluator counts the instructions it
# runs (loop and If bodies included) against this budget, per top-level evaluation.
WORK_ENV = "MIGX_EXPLORE_WORK_BUDGET"
# Instructions. The evaluator runs ~100k small instructions a second, so the default stops a runaway
# loop within about a minute; a real model's evaluation runs thousands (a decoder loop, ~10^5).
DEFAULT_WORK = 10_000_000
_WORK_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_METER: contextvars.ContextVar[WorkMeter | None] = contextvars.ContextVar("migx_work_meter", default=None)


class WorkBudgetError(BudgetError):
    """An evaluation ran more instructions than the work budget allows."""


def work_budget() -> int:
    """Instructions one evaluation may run (MIGX_EXPLORE_WORK_BUDGET, e.g. 500M; default 10M)."""
    text = os.environ.get(WORK_ENV, "").strip().upper()
    if not text:
        return DEFAULT_WORK
    num, unit = (text[:-1], text[-1]) if text[-1] in _WORK_SUFFIX else (text, "")
    try:
        value = int(float(num) * _WORK_SUFFIX[unit])
    except (ValueError, OverflowError):
        raise BudgetError(f"{WORK_ENV}={os.environ[WORK_ENV]!r} is not a count (e.g. 500M, 2G or a number)") from None
    if value <= 0:
        raise BudgetError(f"{WORK_ENV}={os.environ[WORK_ENV]!r} must be positive")
    return value


# Arithmetic per unit of the work budget: an instruction count alone lets a Loop doing a large MatMul
# each iteration run for minutes within it. Each instruction also spends its arithmetic (output
# elements, times the reduction length for dot and convolution) against work budget x this: the
# default 10M allows 10^12 multiply-adds, minutes of numpy at most.
ARITHMETIC_PER_WORK = 100_000


class WorkMeter:
    __slots__ = ("spent", "limit", "arithmetic", "arithmetic_limit")

    def __init__(self, limit: int):
        self.spent = 0
        self.limit = limit
        self.arithmetic = 0
        self.arithmetic_limit = limit * ARITHMETIC_PER_WORK

    def spend(self, where: str | Callable[[], str], arithmetic: int = 0) -> None:
        """Count one instruction and its arithmetic; `where` (or what it returns: formatted only on
        failure) names it."""
        self.spent += 1
        self.arithmetic += arithmetic
        if self.arithmetic > self.arithmetic_limit:
            self._stop(
                where,
                f"{self.arithmetic:.3g} arithmetic operations",
                f"({self.limit:,} x {ARITHMETIC_PER_WORK:,}; a loop with a large product in its body?)",
            )
        if self.spent > self.limit:
            self._stop(where, f"{self.limit:,} instructions", "(a loop with a huge trip count?)")

    def _stop(self, where: str | Callable[[], str], spent: str, why: str) -> None:
        where = where() if callable(where) else where
        raise WorkBudgetError(
            f"evaluation stopped after {spent}, at {where}: over the work budget {why}; raise it "
            f"with --work-budget N or {WORK_ENV}=N"
        )


@contextlib.contextmanager
def work_meter() -> Iterator[WorkMeter]:
    """The meter of the evaluation in progress, or a new one (for the outermost evaluation)."""
    meter = _METER.get()
    if meter is not None:
        yield meter
        return
    meter = WorkMeter(work_budget())
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)
