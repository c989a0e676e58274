"""Writing outputs without ever losing a user's data.

- An output that is (or links to) one of the command's inputs is refused before any work.
- Files are written to a temporary name in the same folder and renamed into place, so an error
  or an interrupt never leaves a half-written file under the real name.
- An output folder (`trace --out`) is created (its parent must exist), or must be empty, or must
  hold a previous trace of ours: the files that trace wrote (its index.json lists them) are
  replaced, and nothing else there is touched (a user's notes survive).
- Temporaries carry the writer's process id (compiler/tmpfiles.py): the next run removes those
  an interrupted run left.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from migx_explore.compiler import tmpfiles
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.tmpfiles import clean_stale_temporaries

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
    """refuse_clobber over a parsed command line's input and output arguments, and every output
    file checked for being writable where it is (before the verb spends time on the model)."""
    ins = [p for name in INPUT_ARGS for p in _paths(getattr(args, name, None))]
    outs = [p for name in OUTPUT_ARGS for p in _paths(getattr(args, name, None))]
    refuse_clobber(outs, ins)
    for name in OUTPUT_ARGS:
        if name == "out" and getattr(args, "verb", None) == "trace":
            continue  # a folder: check_output_folder
        for path in _paths(getattr(args, name, None)):
            check_output_file(path, f"--{name}")


def check_output_file(path: str, flag: str = "output") -> None:
    """MigxError unless a file can be written at `path`: not a folder, in a folder that exists."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise MigxError(f"{flag} {path!r} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise MigxError(f"{flag} {path!r}: its folder {folder!r} does not exist")


def with_suffix(path: str, suffix: str) -> str:
    """`path` with its file name's extension replaced by `suffix` (added if it has none). Only the
    last component counts: `run.1/study` becomes `run.1/study.csv`, never `run.csv` (a split of the
    whole path at its last dot would write outside the folder the user named)."""
    folder, name = os.path.split(path)
    stem, ext = os.path.splitext(name)
    return os.path.join(folder, (stem if ext else name) + suffix)


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
    clean_stale_temporaries(folder)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=tmpfiles.prefix(), suffix=f".tmp{suffix}")
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
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(index, dict) and (
        index.get("generator") == TRACE_MARKER or ("passes" in index and "launches_before" in index)
    )


def check_output_folder(path: str | os.PathLike) -> None:
    """MigxError unless `path` can take a trace: absent (in a folder that exists), an empty folder,
    or a previous trace of ours. Checked before any work, so a bad --out costs nothing."""
    target = Path(path)
    recover_trace_folder(target)  # a trace interrupted while it replaced an earlier one
    if target.is_symlink():
        raise MigxError(f"--out {str(target)!r} is a link; give the folder itself")
    if target.exists():
        if not target.is_dir():
            raise MigxError(f"--out {str(target)!r} exists and is not a folder; give a new or empty folder")
        if any(target.iterdir()) and not _is_our_trace(target):
            raise MigxError(
                f"--out {str(target)!r} is not empty and holds no previous trace (no index.json of "
                "ours); give a new or empty folder"
            )
        return
    parent = target.absolute().parent
    if not parent.is_dir():
        raise MigxError(
            f"--out {str(target)!r}: its folder {str(parent)!r} does not exist"
            if not parent.exists()
            else f"--out {str(target)!r}: {str(parent)!r} is not a folder"
        )


def _safe_name(name: object) -> str | None:
    """A relative path inside the trace folder, or None (a hostile index cannot point elsewhere)."""
    if not isinstance(name, str) or not name or os.path.isabs(name) or "\0" in name:
        return None
    norm = os.path.normpath(name)
    return None if norm.startswith("..") or norm in (".", "") else norm


def previous_trace_files(folder: Path) -> list[str]:
    """What an earlier trace in `folder` wrote: its index's `files` list, or for an index from before
    that list existed, the IR files its passes name (and their rendered siblings) and 000_input.*."""
    try:
        index = json.loads((folder / "index.json").read_text())
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(index, dict):
        return []
    names = index.get("files")
    if not isinstance(names, list):
        listed = ["000_input.txt"] + [p.get("file") for p in index.get("passes", []) if isinstance(p, dict)]
        stems = {os.path.splitext(n)[0] for n in listed if isinstance(n, str)}
        names = [e.name for e in folder.iterdir() if os.path.splitext(e.name)[0] in stems]
    safe = [n for n in map(_safe_name, names) if n is not None]
    return sorted(set(safe) | {"index.json"})


def _record_files(folder: Path) -> list[str]:
    """List every file written into the fresh trace folder in its index.json (`files`), so a later
    trace into the same --out removes exactly these and nothing a user put there."""
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    index_path = folder / "index.json"
    if index_path.is_file():
        index = json.loads(index_path.read_text())
        index["files"] = names
        index_path.write_text(json.dumps(index, indent=1))
    return names


@contextlib.contextmanager
def replaced_folder(path: str | os.PathLike) -> Iterator[str]:
    """Yield a fresh temporary folder beside `path`; on success its files land in `path`. An
    existing `path` must be an empty folder or a previous trace of ours: the files that trace wrote
    (its index lists them) are removed first; anything else there (a user's notes) stays."""
    recover_trace_folder(path)
    check_output_folder(path)
    target = Path(path)
    parent = target.absolute().parent
    clean_stale_temporaries(parent)  # what an interrupted earlier run left
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=tmpfiles.prefix(), suffix=".tmp"))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would make the trace private to this user
    try:
        yield str(tmp)
        names = _record_files(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not target.exists() or not any(target.iterdir()):
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
        return
    try:
        _swap_in(tmp, target, names)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- replacing a previous trace so that no interruption loses it ----------------------------------
# The previous trace's files move into a backup folder beside the target (index.json first), the
# new files move in (index.json last), then the backup goes. A target without index.json and with a
# backup holding one is therefore mid-swap: recover_trace_folder puts the previous trace back. It
# runs in the except path of an in-process interrupt and, for a killed process, before the next
# trace checks the folder. The backup's name is fixed (not a .tmp name the stale-temporary cleaner
# removes), so a previous trace survives any number of crashes.
INCOMING = ".migx-incoming.json"  # inside the backup: the names the new trace was moving in
MOVING_IN = ".migx-moving-in"  # inside the backup: the previous trace is all out, new files move in


def _backup_of(target: Path) -> Path:
    return target.absolute().parent / f".{target.name}.migx-previous"


def _move(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dst)


def _swap_in(tmp: Path, target: Path, names: list[str]) -> None:
    backup = _backup_of(target)
    recover_trace_folder(target)
    backup.mkdir()
    (backup / INCOMING).write_text(json.dumps(names))
    try:
        old = [n for n in previous_trace_files(target) if (target / n).is_symlink() or (target / n).is_file()]
        for name in sorted(old, key=lambda n: n != "index.json"):  # index.json first
            _move(target / name, backup / name)
        (backup / MOVING_IN).touch()  # every previous file is out: from here on, new ones come in
        for name in sorted(names, key=lambda n: n == "index.json"):  # index.json last
            _move(tmp / name, target / name)
    except BaseException:
        recover_trace_folder(target)
        raise
    shutil.rmtree(backup, ignore_errors=True)


def recover_trace_folder(path: str | os.PathLike) -> bool:
    """Finish or undo an interrupted swap of a trace into `path` (see above); True if the previous
    trace was put back."""
    target = Path(path)
    backup = _backup_of(target)
    if not backup.is_dir() or backup.is_symlink():
        return False
    restore = (backup / "index.json").is_file() and not (target / "index.json").exists()
    if restore:
        try:
            incoming = json.loads((backup / INCOMING).read_text())
        except (OSError, ValueError, RecursionError):
            incoming = []
        if not (backup / MOVING_IN).exists():
            incoming = []  # still moving the previous trace out: what is left in the target is its own
        for name in map(_safe_name, incoming if isinstance(incoming, list) else []):
            if name is not None and ((target / name).is_file() or (target / name).is_symlink()):
                (target / name).unlink()
        for f in sorted(backup.rglob("*"), key=lambda p: p.name == "index.json"):  # index.json last
            rel = f.relative_to(backup)
            if (f.is_file() or f.is_symlink()) and str(rel) not in (INCOMING, MOVING_IN):
                _move(f, target / rel)
    shutil.rmtree(backup, ignore_errors=True)
    return restore
