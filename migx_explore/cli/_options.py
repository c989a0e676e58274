"""One voice for every verb: the shared option names (with the old spellings as hidden aliases),
progress for slow steps, headed output blocks, and the fake-backend note. Option plumbing that
several verbs share lives here, so a verb reads `add_compile_mode(p)` rather than spelling it.

- `--compile-mode eager|balanced|max`: which pipelines run (eager skips optimize_rewrite). Old
  spelling `--mode` on trace, verify, compile, waterfall, passes, report, study.
- `--exec-mode eager,graph`: how the compiled program runs on the GPU. Old spellings: `--mode`
  on perf, run and generate, `--mode-timing` on waterfall.
- `-q/--quiet`: no progress and no per-pass tables, only the result lines."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

COMPILE_MODES = ("eager", "balanced", "max")
EXEC_MODES = ("eager", "graph")
LINE_EVERY_S = 5.0  # off a terminal, a progress line at most this often
SHOW_AFTER_S = 2.0  # a step shorter than this shows no progress at all


def hidden_alias(p: argparse.ArgumentParser | argparse._ArgumentGroup, flag: str, dest: str, **kw) -> None:
    """`flag` sets `dest` too, and is left out of --help (an old spelling kept working)."""
    p.add_argument(flag, dest=dest, help=argparse.SUPPRESS, default=argparse.SUPPRESS, **kw)


def add_compile_mode(p: argparse.ArgumentParser, *, old: tuple[str, ...] = ("--mode",)) -> None:
    p.add_argument(
        "--compile-mode",
        choices=COMPILE_MODES,
        default="balanced",
        help="which pipelines run: eager skips optimize_rewrite, max adds the slow searches (default balanced)",
    )
    for flag in old:
        hidden_alias(p, flag, "compile_mode", choices=COMPILE_MODES)


def add_exec_mode(
    p: argparse.ArgumentParser, *, default: str = "eager,graph", several: bool = True, old: tuple[str, ...] = ()
) -> None:
    what = "comma-separated: eager, graph" if several else "eager or graph"
    p.add_argument(
        "--exec-mode",
        default=default,
        metavar="eager,graph" if several else "{eager,graph}",
        help=f"how the compiled program runs on the GPU ({what}; default {default}): "
        "launch by launch, or replayed from a captured CUDA/HIP graph",
    )
    for flag in old:
        hidden_alias(p, flag, "exec_mode")


def exec_modes(args: argparse.Namespace, *, several: bool = True) -> list[str]:
    """The --exec-mode value as a list, checked (a bad value is one line naming the option)."""
    from migx_explore.compiler.errors import MigxError

    value = args.exec_mode
    modes = [m.strip() for m in str(value).split(",") if m.strip()]
    if not modes or any(m not in EXEC_MODES for m in modes) or (not several and len(modes) != 1):
        allowed = "eager, graph or eager,graph" if several else "eager or graph"
        raise MigxError(f"--exec-mode {value!r}: use {allowed}")
    return modes


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress and no tables: only the result lines")


def quiet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "quiet", False))


# ---- progress ------------------------------------------------------------------------------------
class Progress:
    """Progress of one slow step on stderr: a live line on a terminal, otherwise a line every few
    seconds; nothing for a step done within SHOW_AFTER_S, nothing at all when quiet."""

    def __init__(self, desc: str, *, quiet: bool = False, stream=None) -> None:
        self.desc, self.quiet = desc, quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self._last = 0.0
        self._text = ""
        self._shown = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __call__(self, k: int, n: int, label: str = "") -> None:
        """A sweep or trace callback: k of n done, now at `label`."""
        self.update(f"[{k}/{n}] {label}" if n else label)

    def update(self, text: str) -> None:
        with self._lock:
            self._text = text
        self._emit(force=False)

    def _emit(self, *, force: bool) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        elapsed = now - self.t0
        if elapsed < SHOW_AFTER_S and not force:
            return
        with self._lock:
            text = f"{self.desc}: {self._text}" if self._text else self.desc
            line = f"{text} ({elapsed:.0f} s)"
            if self.tty:
                self.stream.write("\r" + line[:100].ljust(100))
                self._shown = True
            elif force or now - self._last >= LINE_EVERY_S:
                self.stream.write(f"migx-explore: {line}\n")
                self._last = now
            self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(1.0 if self.tty else LINE_EVERY_S):
            self._emit(force=False)

    def __enter__(self) -> Progress:
        if not self.quiet:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        if self._shown and self.tty:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()


@contextmanager
def step(desc: str, args: argparse.Namespace | None = None) -> Iterator[Progress]:
    """`with step("compiling", args):` shows progress if the block runs past SHOW_AFTER_S."""
    with Progress(desc, quiet=quiet(args) if args is not None else False) as p:
        yield p


# ---- output --------------------------------------------------------------------------------------
def heading(title: str) -> None:
    """A blank line and a title before a block of output, so every block says what it is."""
    print(f"\n{title}")


def fake_backend_note() -> str | None:
    """A line for results the fake GPU backend produced (None on a real backend)."""
    if os.environ.get("MIGX_GPU_BACKEND", "").strip().lower() == "fake":
        return (
            "note: MIGX_GPU_BACKEND=fake: nothing ran on a GPU; the fake backend records the launches, "
            "returns the reference evaluator's values and makes up its timings"
        )
    return None


def print_fake_backend_note() -> None:
    note = fake_backend_note()
    if note:
        print(note)


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 worker', '2 workers'."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def on_broken_pipe(fn: Callable[[], int]) -> int:
    """Run fn; a reader that went away (`passes | head`) ends the output quietly, as cat does."""
    try:
        return fn()
    except BrokenPipeError:
        try:  # stdout is gone: point it at devnull so the interpreter's final flush stays quiet
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 0
