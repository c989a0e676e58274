"""Portable programs (MIGraphX PR #4205's idea in our terms): stop the pipelines after any pass,
save the program with everything needed to continue, and resume on another machine.

The saved file is compiler.serialize's container (IR text, raw literals, stable ids, SHA-256
manifest; no pickle, no code on load) plus: the pipeline spec and compile options, the position to
resume from, and the generated kernels as source plus the binaries built here. A program saved
before compile_ops finishes compiling for the resuming machine's arch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
from dataclasses import dataclass
from typing import Any

from migx_explore.compiler.errors import FormatError, MigxError
from migx_explore.compiler.ir import Program
from migx_explore.compiler.pass_infra import PassManager, Trace, build_pipelines, entry_paths
from migx_explore.compiler.serialize import load_program_file, save_program
from migx_explore.gpu.pipelines import CompileOptions, gpu_pipelines

from . import keys
from .keys import Signature

KIND = "migx-explore/partial-compile"


def _position(pipelines, path: str) -> tuple[int, int]:
    """(pipeline, entry) of `path`: a full entry path (`fusion.dead_code_elimination#3`), or one
    without its pipeline or its `#n`, as long as that names exactly one entry."""

    def forms(p: str) -> set[str]:
        name = p.split(".", 1)[1]
        return {p, p.split("#")[0], name, name.split("#")[0]}

    entries = [(pi, k, p) for pi, pl in enumerate(pipelines) for k, p in enumerate(entry_paths(pl))]
    hits = [(pi, k, p) for pi, k, p in entries if path in forms(p)]
    if not hits:
        names = [p for _, _, p in entries]
        close = difflib.get_close_matches(path, sorted({f for p in names for f in forms(p)}), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; e.g. {', '.join(names[:5])} ... {names[-1]}"
        raise MigxError(f"--until {path!r} is not a pass of the pipelines{hint}")
    exact = [h for h in hits if h[2] == path]
    if len(hits) > 1 and not exact:
        shown = [p for _, _, p in hits][:6]
        more = f" (and {len(hits) - len(shown)} more)" if len(hits) > len(shown) else ""
        raise MigxError(
            f"--until {path!r} is ambiguous: it names {len(hits)} passes; pick one of {', '.join(shown)}{more}"
        )
    pi, k, _ = (exact or hits)[0]
    return pi, k


@dataclass
class Partial:
    program: Program
    options: CompileOptions
    spec: str
    after: str | None  # last pass run (None: nothing run yet)
    position: tuple[int, int]  # (pipeline, entry) to run next
    model: str
    binaries: dict[str, bytes] = dataclasses.field(default_factory=dict)  # shipped, usable here (by binary key)
    signature: Signature = Signature("unsigned")
    shipped: int = 0  # binaries the file carries for this machine, used or not

    @property
    def kernels(self) -> int:
        """Kernel binaries that travelled and will be reused on this machine."""
        return len(self.binaries)


def compile_until(
    program: Program,
    until: str | None,
    out: str,
    *,
    options: CompileOptions | None = None,
    spec: str | None = None,
    model: str = "program",
) -> Trace:
    """Run the pipelines up to and including `until` (all of them if None) and save to `out`."""
    opts = options or CompileOptions()
    catalog = gpu_pipelines(opts)
    pipelines = build_pipelines(spec, catalog) if spec else [p.copy() for p in catalog]
    spec_text = spec or ",".join(p.name for p in pipelines)
    if until is None:
        stop = (len(pipelines) - 1, len(pipelines[-1].entries) - 1)
    else:
        stop = _position(pipelines, until)
    head = [
        dataclasses.replace(pl, entries=pl.entries[: stop[1] + 1] if pi == stop[0] else pl.entries)
        for pi, pl in enumerate(pipelines[: stop[0] + 1])
    ]
    target = _target_or_none()
    with _bound(target):
        trace = PassManager().run(program, head)
    after = entry_paths(pipelines[stop[0]])[stop[1]]
    metadata = {
        "kind": KIND,
        "model": model,
        "spec": spec_text,
        "options": dataclasses.asdict(opts),
        "after": after,
        "next": [stop[0], stop[1] + 1],
    }
    from migx_explore.gpu.portable import export_kernels

    rows, blobs = export_kernels(program, target)
    if keys.own_key_id() is None:
        # nothing would vouch for a binary in an unsigned file, and a reader refuses one there
        # (load_partial): ship the kernel sources only
        for row in rows:
            row["binaries"] = []
        blobs = {k: v for k, v in blobs.items() if not k.endswith(".bin")}
    metadata["kernels"] = rows
    save_program(program, out, metadata=metadata, blobs=blobs, sign=keys.sign)
    return trace


def load_partial(path: str, *, recompile: bool = False, trust_binaries: bool = False) -> Partial:
    """A saved partial compile, checked: its resume position must lie inside its own pipelines, and
    a signature, if any, must verify (an edit after signing is refused).

    Shipped kernel binaries are kept for this program only, and only when a key this user trusts
    signed the file (or `trust_binaries` says to use them anyway); none with `recompile`. Otherwise
    every kernel is compiled from its shipped source."""
    saved = load_program_file(path)
    signature = keys.check(saved.manifest_raw, saved.signature, path)
    md = saved.metadata
    if md.get("kind") != KIND:
        raise FormatError(f"{path}: not a partial compile (no resume information); it holds a plain program")
    try:
        opts = CompileOptions(**md["options"])
        nxt = (int(md["next"][0]), int(md["next"][1]))
        spec = str(md["spec"])
        after = md.get("after")
        pipelines = build_pipelines(spec, gpu_pipelines(opts))
    except (KeyError, TypeError, ValueError, IndexError, MigxError) as e:
        raise FormatError(f"{path}: resume information is malformed ({e})") from None
    pi, k = nxt
    if not (0 <= pi < len(pipelines) and 0 <= k <= len(pipelines[pi].entries)):
        raise FormatError(
            f"{path}: resume position {list(nxt)} is outside its pipelines ({spec}); the file is damaged or was edited"
        )
    rows = md.get("kernels", [])
    rows = rows if isinstance(rows, list) else []  # malformed rows: import_kernels names them
    carried = sum(
        len(r["binaries"])
        for r in rows
        if isinstance(rows, list) and isinstance(r, dict) and isinstance(r.get("binaries"), list)
    )
    if signature.status == "unsigned" and carried and not (trust_binaries or recompile):
        raise FormatError(
            f"{path}: unsigned, yet it carries {carried} kernel binaries (GPU code nothing vouches for; "
            "our own unsigned files carry sources only); refusing it: --recompile compiles every kernel "
            "from its source, --trust-binaries uses the binaries anyway"
        )
    from migx_explore.gpu.portable import import_kernels

    try:
        shipped = import_kernels(md.get("kernels", []), saved.blobs, None if recompile else _target_or_none())
    except FormatError as e:
        raise FormatError(f"{path}: {e}") from None
    binaries = shipped if signature.trusted or trust_binaries else {}
    return Partial(
        saved.program,
        opts,
        spec,
        None if after is None else str(after),
        nxt,
        str(md.get("model", "program")),
        binaries,
        signature,
        len(shipped),
    )


def resume(part: Partial) -> Trace:
    """Run the remaining passes of a partial compile (in place on part.program)."""
    pipelines = build_pipelines(part.spec, gpu_pipelines(part.options))
    with _bound(_target_or_none()), part_binaries(part):
        return PassManager().run(part.program, pipelines, start=part.position)


def part_binaries(part: Partial):
    """Make the binaries shipped with `part` usable (for its own kernels) while the context is open."""
    if not part.binaries:
        return contextlib.nullcontext()
    from migx_explore.gpu import kernel_cache

    return kernel_cache.shipped_binaries(part.binaries)


def _target_or_none() -> Any:
    """The GPU backend when one is usable (so compile_ops builds binaries), else None."""
    from .gpu_bridge import unavailable_reason

    if os.environ.get("MIGX_GPU_BACKEND") != "fake" and unavailable_reason():
        return None
    from migx_explore.gpu.runtime import get_backend

    return get_backend()


def _bound(target: Any):
    """Bind the GPU target while passes run (compile_ops then builds binaries), if there is one."""
    if target is None:
        return contextlib.nullcontext()
    from migx_explore.gpu import kernel_cache

    return kernel_cache.bound_target(target)
