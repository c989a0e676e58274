"""One runtime compile (nvrtc / hiprtc), written so it also runs as a bare worker process.

`compile_with` is the compile itself: rtc.RuntimeCompiler calls it in-process, and this file run
as a script (`python rtc_worker.py MODULE PREFIX SUFFIX BINARY BUFFER`) serves the same call to a parent
over its stdin/stdout, for rtc_pool. Why processes: nvrtc serializes compiles inside one process
(on the H200 we measure, 16 threads compiled YOLOv10n's 130 kernels in the same 1.9 s as one
thread, with the GIL released), so only processes compile in parallel. Run as a script, this file
imports nothing from the package (a worker would otherwise pay the compiler's import, seconds),
only the vendor's bindings.

Protocol: each message is an 8-byte little-endian length and a pickle. Request: (name, source,
headers, flags); reply: (True, binary) or (False, message). The parent spawned the worker and is
the only writer of its stdin, so the pickles come from our own process.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # Run as a script, this file's folder comes first on sys.path, and its cuda.py and hip.py
    # would shadow the vendors' `cuda` and `hip` packages: every worker then died importing
    # cuda.bindings.nvrtc and the pool compiled nothing (the parent fell back in-process).
    del sys.path[0]

import importlib  # noqa: E402 - after the path fix above
import pickle  # noqa: E402
import struct  # noqa: E402
from collections.abc import Callable
from typing import Any


class CompileFailed(Exception):
    """The source did not compile; the message has the compiler's log and the source."""


def compile_with(
    module: Any,
    prefix: str,
    suffix: str,
    binary: str,
    buffer: Callable[[int], Any],
    check: Callable[[Any, str], Any],
    name: str,
    source: str,
    headers: dict[str, str],
    flags: list[str],
) -> bytes:
    """`source` (with `headers` as include-name -> text) compiled to a loadable binary by the
    runtime compiler `module` (calls named `prefix` + CreateProgram, ...); a compile error raises
    CompileFailed with the log and the source, a failed call whatever `check` raises."""

    def fn(call: str) -> Callable[..., Any]:
        return getattr(module, f"{prefix}{call}")

    def checked(call: str, *args: Any) -> Any:
        return check(fn(call)(*args), f"{prefix}{call}")

    prog = checked(
        "CreateProgram",
        source.encode(),
        f"{name}{suffix}".encode(),
        len(headers),
        [h.encode() for h in headers.values()],
        [n.encode() for n in headers],
    )
    try:
        opts = [f.encode() for f in flags]
        (err,) = fn("CompileProgram")(prog, len(opts), opts)
        if err:
            log = buffer(checked("GetProgramLogSize", prog))
            fn("GetProgramLog")(prog, log)
            text = bytes(log).decode(errors="replace").strip()
            raise CompileFailed(f"{prefix} failed to compile {name}:\n{text}\n--- source ---\n{source}")
        code = buffer(checked(f"Get{binary}Size", prog))
        checked(f"Get{binary}", prog, code)
        return bytes(code)
    finally:
        fn("DestroyProgram")(prog)


def tuple_status(result: Any, call: str) -> Any:
    """The bindings' (status, value...) convention, for a worker that has no backend: a nonzero
    status raises, naming the call; otherwise the value (or values)."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if status:
        raise RuntimeError(f"{call} failed: {status}")
    return values[0] if len(values) == 1 else tuple(values)


def send(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream: Any) -> Any:
    """The next message, or None at end of stream (the other side closed it)."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(size))


_WARMUP = 'extern "C" __global__ void warmup(float* x) { x[0] = 1.0f; }\n'


def serve(module_name: str, prefix: str, suffix: str, binary: str, buffer_kind: str) -> None:
    """Answer compile requests on stdin until it closes."""
    module = importlib.import_module(module_name)
    buffer = bytearray if buffer_kind == "bytearray" else (lambda n: b" " * n)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    # The first compile of a process loads the compiler's builtins (tens of ms); pay it here,
    # while the parent is still running its passes, not on the first kernel it hands over.
    try:
        compile_with(module, prefix, suffix, binary, buffer, tuple_status, "warmup", _WARMUP, {}, [])
    except Exception:  # noqa: BLE001 - a warm-up that fails costs nothing; real requests report
        pass
    send(out, (True, b"ready"))
    while (request := receive(inp)) is not None:
        name, source, headers, flags = request
        try:
            code = compile_with(module, prefix, suffix, binary, buffer, tuple_status, name, source, headers, flags)
            reply = (True, code)
        except Exception as e:  # noqa: BLE001 - every failure goes back to the parent, which raises it
            reply = (False, str(e) if isinstance(e, CompileFailed) else f"{type(e).__name__}: {e}")
        send(out, reply)


if __name__ == "__main__":
    serve(*sys.argv[1:6])
