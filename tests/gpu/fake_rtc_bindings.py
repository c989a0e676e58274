"""A stand-in for a runtime compiler's bindings (cuda.bindings.nvrtc's call shapes), importable by
an rtc_pool worker process: the "binary" names the process that made it, so a test can tell a
worker's compile from an in-process one. A source containing `#error` fails to compile; one
containing `KILL_WORKER` ends the process mid-compile (a crashing compiler)."""

from __future__ import annotations

import os

_PROGRAMS: dict[int, str] = {}


def fakeCreateProgram(src: bytes, name: bytes, n: int, headers: list, names: list):  # noqa: N802 - nvrtc's names
    handle = len(_PROGRAMS) + 1
    _PROGRAMS[handle] = src.decode()
    return (0, handle)


def fakeCompileProgram(prog: int, n: int, opts: list):  # noqa: N802
    src = _PROGRAMS[prog]
    if "KILL_WORKER" in src:
        os._exit(3)
    return (1,) if "#error" in src else (0,)


def _log(prog: int) -> bytes:
    return b"fake.cu(1): error: #error directive"


def fakeGetProgramLogSize(prog: int):  # noqa: N802
    return (0, len(_log(prog)))


def fakeGetProgramLog(prog: int, buf: bytearray):  # noqa: N802
    buf[:] = _log(prog)
    return (0,)


def _binary(prog: int) -> bytes:
    return f"pid={os.getpid()};len={len(_PROGRAMS[prog])}".encode()


def fakeGetCUBINSize(prog: int):  # noqa: N802
    return (0, len(_binary(prog)))


def fakeGetCUBIN(prog: int, buf: bytearray):  # noqa: N802
    buf[:] = _binary(prog)
    return (0,)


def fakeDestroyProgram(prog: int):  # noqa: N802
    _PROGRAMS.pop(prog, None)
    return (0,)
