"""Temporary files beside an output, and cleaning up after interrupted writes.

Every writer (saved programs, kernel-cache entries, `run --out`, `trace --out`) writes to a
temporary name in the target's folder and renames it into place. The temporary name carries the
writing process's id, `.migx-<pid>-<random>.tmp[...]`, so that a later run can tell an
interrupted write (its process is gone) from one in progress (its process lives) and remove only
the former.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from pathlib import Path

PREFIX = ".migx-"
_NAME = re.compile(r"^\.migx-(?:(\d+)-)?[^/]*\.(?:tmp|old)(?:\.\w+)?$")
# A temporary without a process id (written by an older version) is stale after this long.
_STALE_S = 24 * 3600


def prefix() -> str:
    """The prefix for this process's temporaries (pass to mkstemp / mkdtemp with suffix .tmp)."""
    return f"{PREFIX}{os.getpid()}-"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # another user's live process (or no way to tell): leave its file alone
    return True


def stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """This folder's temporaries left by writes whose process is gone."""
    out = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    now = time.time()
    for e in entries:
        m = _NAME.match(e.name)
        if not m:
            continue
        pid = m.group(1)
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            continue  # never someone else's
        if (pid is not None and not _alive(int(pid))) or (pid is None and now - st.st_mtime > _STALE_S):
            out.append(Path(e.path))
    return out


def clean_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Remove what stale_temporaries finds (files, or folders a trace was being written into)."""
    removed = []
    for p in stale_temporaries(folder):
        with contextlib.suppress(OSError):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
    return removed
