"""Writing outputs without ever losing a user's data.

- An output that is (or links to) one of the command's inputs is refused before any work.
- Files are written to a temporary name in the same folder and renamed into place, so an error
  or an interrupt never leaves a half-written file under the real name.
- An output folder (`trace --out`) is created, or must be empty, or must hold a previous trace of
  ours, which is then replaced whole (no stale files from an earlier model survive).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .compiler.errors import MigxError

# Argument names (argparse dests) that name files a verb reads or writes. New verbs and options
# get the clobber check by using these names.
INPUT_ARGS = ("model", "inputs", "feed", "reference", "calibration")
OUTPUT_ARGS = ("out", "png", "json")
TRACE_MARKER = "migx-explore trace"  # index.json's "generator": a folder we may replace


def _paths(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [os.fspath(v) for v in value if isinstance(v, (str, os.PathLike))]
    return [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else []


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def refuse_clobber(outputs: Iterable[str], inputs: Iterable[str]) -> None:
    """MigxError if an output path is an input file (also through links), or a folder holding one."""
    existing = [p for p in inputs if os.path.exists(p)]
    for out in outputs:
        for src in existing:
            if _same_file(out, src):
                raise MigxError(f"output {out!r} is the input {src!r}; refusing to overwrite it (choose another path)")
            if os.path.isdir(out) or not os.path.exists(out):
                folder = os.path.realpath(out)
                if os.path.realpath(src).startswith(folder.rstrip(os.sep) + os.sep):
                    raise MigxError(f"output folder {out!r} holds the input {src!r}; refusing to replace it")


def check_args(args) -> None:
    """refuse_clobber over a parsed command line's input and output arguments."""
    ins = [p for name in INPUT_ARGS for p in _paths(getattr(args, name, None))]
    outs = [p for name in OUTPUT_ARGS for p in _paths(getattr(args, name, None))]
    refuse_clobber(outs, ins)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, suffix: str = "") -> Iterator[str]:
    """Yield a temporary path beside `path`; on success rename it to `path`, else delete it.
    `suffix` keeps an extension that a writer insists on (np.savez appends .npz otherwise)."""
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    if os.path.isdir(target):
        raise MigxError(f"output {target!r} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise MigxError(f"cannot write {target!r}: folder {folder!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=f".tmp{suffix}")
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _is_our_trace(folder: Path) -> bool:
    try:
        index = json.loads((folder / "index.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(index, dict) and (index.get("generator") == TRACE_MARKER or
                                        ("passes" in index and "launches_before" in index))


def check_output_folder(path: str | os.PathLike) -> None:
    """MigxError unless `path` is absent, an empty folder, or a previous trace of ours."""
    target = Path(path)
    if target.exists() or target.is_symlink():
        if target.is_symlink():
            raise MigxError(f"--out {str(target)!r} is a link; give the folder itself (it is replaced whole)")
        if not target.is_dir():
            raise MigxError(f"--out {str(target)!r} exists and is not a folder; give a new or empty folder")
        if any(target.iterdir()) and not _is_our_trace(target):
            raise MigxError(f"--out {str(target)!r} is not empty and holds no previous trace (no index.json of "
                            "ours); give a new or empty folder")


@contextlib.contextmanager
def replaced_folder(path: str | os.PathLike) -> Iterator[str]:
    """Yield a fresh temporary folder beside `path`; on success it becomes `path`. An existing
    `path` must be an empty folder or a previous trace of ours (index.json says so)."""
    check_output_folder(path)
    target = Path(path)
    parent = target.absolute().parent
    if not parent.is_dir():
        parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp"))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would make the trace private to this user
    try:
        yield str(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.", suffix=".old"))
        os.replace(target, old / "trace")
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
