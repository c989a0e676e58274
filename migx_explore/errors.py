"""One error boundary for the CLI and the explorer: every exception becomes one line for the user.

Errors migx-explore raises on purpose (MigxError) and the operating system's refusals (a missing
file, a full disk, no permission) are *known*: their message is the whole story. Anything else is
a bug in migx-explore, shown as one line naming the internal error, with `--debug` (or
MIGX_EXPLORE_DEBUG=1) for the traceback. The CLI exits 2 for known errors and 3 for internal ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from migx_explore.compiler.errors import MigxError


class GpuUnavailable(MigxError):
    """A GPU feature was asked for where no GPU stack is usable (the message says why)."""


class UserInputError(MigxError, ValueError):
    """The user's input was refused (a file that is not an ONNX model, a form left empty): shown
    as the user's mistake with what to do, never as an internal error."""


def is_bad_file_error(exc: BaseException) -> bool:
    """Whether `exc`, raised while reading a user's model file, means the file is bad (not that
    migx-explore has a bug): our own refusals, OS errors, and protobuf's and onnx's parse and
    check errors."""
    if isinstance(exc, (MigxError, OSError, UnicodeDecodeError)):
        return True
    mod = type(exc).__module__ or ""
    return mod.startswith(("google.protobuf", "onnx.checker", "onnx.onnx_cpp2py_export"))


EXIT_KNOWN = 2
EXIT_INTERNAL = 3


@dataclass(frozen=True)
class UserMessage:
    """What to show for an exception: one line, and whether it is a known error or a bug."""

    text: str
    known: bool

    @property
    def exit_code(self) -> int:
        return EXIT_KNOWN if self.known else EXIT_INTERNAL


def debug_enabled() -> bool:
    return os.environ.get("MIGX_EXPLORE_DEBUG", "").lower() not in ("", "0", "false", "no")


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def describe_error(exc: BaseException) -> UserMessage:
    """The one-line message for `exc` (no verb prefix): known errors as they are, OS errors with
    the file they concern, anything else as an internal error pointing at --debug."""
    if isinstance(exc, MigxError):
        return UserMessage(_one_line(str(exc)) or type(exc).__name__, True)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        if isinstance(exc, FileNotFoundError):
            return UserMessage(f"{where}file not found", True)
        return UserMessage(f"{where}{exc.strerror or _one_line(str(exc))}", True)
    if isinstance(exc, MemoryError):
        return UserMessage(
            "out of memory; lower the sizes involved or raise MIGX_EXPLORE_MEMORY_BUDGET only if "
            "the machine has the memory",
            True,
        )
    detail = _one_line(str(exc))
    return UserMessage(
        f"internal error {type(exc).__name__}{': ' + detail[:300] if detail else ''} "
        "(a bug in migx-explore; run with --debug for the traceback)",
        False,
    )


def format_error(exc: BaseException, verb: str | None = None) -> str:
    """`migx-explore VERB: error: ...` (the CLI's line; the explorer shows it in its status area)."""
    prefix = f"migx-explore {verb}" if verb else "migx-explore"
    return f"{prefix}: error: {describe_error(exc).text}"
