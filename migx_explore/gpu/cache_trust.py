"""Who may have written a kernel-cache file: the checks that stand between a file on disk and a
binary handed to the GPU.

A cache entry is machine code. It is used only when (1) every folder on the way to it is
controlled by this user or root (no folder another user can write to, no symbolic link this user
or another could repoint), (2) the entry file itself is this user's and writable by nobody else,
and (3) its HMAC, keyed by a per-user secret created 0600 on first use, checks out. (1) and (2)
keep other users out; (3) makes a planted or edited entry fail even where (1) or (2) were fooled.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

SECRET_NAME = "hmac.key"
SECRET_BYTES = 32
MAX_ENTRY_BYTES = 256 << 20  # a compiled kernel is far smaller; a bigger file is not ours


def _uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None  # no uids (Windows): ownership is not checked


def _ancestor_refusal(path: Path, uid: int | None) -> str | None:
    """Why a folder above the cache cannot be trusted: another user owns it, or may write to it
    (a world-writable folder with the sticky bit, such as /tmp, is fine: nobody can replace what
    is in it but its owner), or it is a symbolic link that is not a system one (root's, in a folder
    only root controls)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot inspect {str(path)!r} ({e.strerror})"
    owners = {0} if uid is None else {0, uid}
    if stat.S_ISLNK(st.st_mode):
        try:
            parent = path.parent.lstat()
        except OSError as e:
            return f"cannot inspect {str(path.parent)!r} ({e.strerror})"
        if st.st_uid != 0 or parent.st_uid != 0 or parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return (
                f"{str(path)!r} above it is a symbolic link (set MIGX_EXPLORE_CACHE_DIR to the real "
                f"folder, {os.path.realpath(path)!r})"
            )
        return None
    if uid is not None and st.st_uid not in owners:
        return f"the folder {str(path)!r} above it belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return f"other users can write to the folder {str(path)!r} above it"
    return None


def own_folder_refusal(folder: Path) -> str | None:
    """Why `folder` itself is not this user's private folder (None if it is, or does not exist yet)."""
    try:
        st = folder.lstat()
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot inspect it ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link (set MIGX_EXPLORE_CACHE_DIR to a real folder)"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    uid = _uid()
    if uid is not None and st.st_uid != uid:
        return "it belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "other users can write to it (chmod go-w it, or set MIGX_EXPLORE_CACHE_DIR)"
    return None


def folder_refusal(folder: Path) -> str | None:
    """Why the kernel folder `folder` must not be used (None if it may): it and the cache root
    above it must be this user's own folders, and every folder further up one that only this user
    or root controls."""
    folder = Path(os.path.abspath(folder))
    why = own_folder_refusal(folder)
    if why is not None:
        return why
    why = own_folder_refusal(folder.parent)
    if why is not None:
        return f"its cache root {str(folder.parent)!r}: {why}"
    uid = _uid()
    for up in folder.parent.parents:
        why = _ancestor_refusal(up, uid)
        if why is not None:
            return why
    return None


def read_own_file(path: Path, limit: int = MAX_ENTRY_BYTES) -> tuple[bytes | None, str | None]:
    """(contents, None) for a regular file this user owns that nobody else may write; (None, why)
    for any other file; (None, None) when there is no file. The checks are made on the open
    descriptor (fstat), so the file cannot be swapped between check and read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, ("it is a symbolic link" if e.errno == errno.ELOOP else f"cannot read it ({e.strerror})")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        uid = _uid()
        if not stat.S_ISREG(st.st_mode):
            return None, "it is not a regular file"
        if uid is not None and st.st_uid != uid:
            return None, f"it belongs to another user (uid {st.st_uid})"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None, "other users can write to it"
        if st.st_size > limit:
            return None, f"it is {st.st_size} bytes, more than any entry this cache writes"
        return f.read(limit + 1), None


def user_secret(root: Path) -> tuple[bytes | None, str | None]:
    """(the per-user HMAC secret, None), created 0600 under `root` on first use; (None, why) when
    it cannot be created or the file there is not one this user alone can read. The secret is
    written whole to a temporary and linked into place, so a full disk or a crash never leaves a
    short one; a short one this user owns (what earlier versions could leave) is replaced: nothing
    was ever signed with it, since the cache refuses to run on it."""
    path = root / SECRET_NAME
    # Create, then read back; one more try when another process created it between our read and create.
    for _ in range(3):
        data, why = read_own_file(path, limit=SECRET_BYTES)
        if data is not None:
            mode = os.stat(path).st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                return None, f"its secret {str(path)!r} is readable by other users (chmod 600 it)"
            if len(data) == SECRET_BYTES:
                return data, None
            if len(data) > SECRET_BYTES:
                return None, f"its secret {str(path)!r} is not {SECRET_BYTES} bytes (delete it to make a new one)"
            why = _write_secret(root, path, replace=True)  # a partial secret: make a whole one
        else:
            if why is not None:
                return None, f"its secret {str(path)!r}: {why}"
            why = _write_secret(root, path, replace=False)
        if why is not None:
            return None, why
    return None, f"cannot read its secret {str(path)!r}"


def _write_secret(root: Path, path: Path, *, replace: bool) -> str | None:
    """Write a new secret to a temporary beside `path`, then link it into place (or replace a
    partial one). None on success or when another process won the race; else why not."""
    from migx_explore.compiler import tmpfiles

    tmp = root / f"{tmpfiles.prefix()}{secrets.token_hex(4)}.tmp"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(SECRET_BYTES))
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process made one first: the caller reads theirs
    except OSError as e:
        return f"cannot create its secret {str(path)!r} ({e.strerror})"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return None
