"""Error types. Every error carries enough context (file, node, pass, module, instruction) to be
shown to a user as one line; the CLI and the explorer print `str(err)` and never a traceback."""

from __future__ import annotations


class MigxError(Exception):
    """Base class for every error migx-explore raises on purpose."""


class ShapeError(MigxError):
    """An op's shape rule rejected its inputs or attributes."""


class AttributeError_(MigxError):
    """A bad attribute name or value for an op (named with a trailing _ to not shadow the builtin)."""


class UnknownOpError(MigxError):
    pass


class IRError(MigxError):
    """Misuse of the mutation API (removing an instruction that still has users, ...)."""


class ValidationError(MigxError):
    def __init__(self, message: str, module: str | None = None, instruction: str | None = None):
        super().__init__(message)
        self.module = module
        self.instruction = instruction


class ParseError(MigxError):
    def __init__(self, message: str, line: int | None = None, text: str | None = None):
        where = f"line {line}: " if line is not None else ""
        snippet = f"\n    {text.strip()}" if text else ""
        super().__init__(f"{where}{message}{snippet}")
        self.line = line


class EvalError(MigxError):
    """The reference evaluator could not run the program (missing input, wrong shape, bad op)."""


class ImportError_(MigxError):
    """A model file could not be imported (bad file, unsupported op, bad attribute)."""


class FormatError(MigxError):
    """A saved program file is malformed, truncated, tampered with or of an unknown version."""


def did_you_mean(name: str, candidates, *, n: int = 3) -> str:
    """'; did you mean a, b?' naming the candidates closest to `name` (by difflib's ratio, also
    against each candidate's last dotted part, so `fusion.fuse_pointwse` finds the full path), or
    '' when nothing is close."""
    import difflib

    names = sorted(set(candidates))
    close = difflib.get_close_matches(name, names, n=n, cutoff=0.6)
    if not close:  # a bare pass name against dotted paths: compare with the last part too
        tail = name.rsplit(".", 1)[-1]
        by_tail: dict[str, list[str]] = {}
        for c in names:
            by_tail.setdefault(c.rsplit(".", 1)[-1].split("#")[0], []).append(c)
        close = [c for t in difflib.get_close_matches(tail, by_tail, n=n, cutoff=0.6) for c in by_tail[t]][:n]
    return f"; did you mean {', '.join(close)}?" if close else ""
