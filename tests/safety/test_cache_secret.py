"""Issue 40 item 5: the kernel cache's hmac.key is created atomically (a full disk leaves none, not a
short one), and a short one this user owns is replaced rather than turning the cache off for good."""

from __future__ import annotations

import errno
import os

from migx_explore.gpu import cache_trust
from migx_explore.gpu.cache_trust import SECRET_BYTES, SECRET_NAME, user_secret


def _root(tmp_path):
    root = tmp_path / "kernels"
    root.mkdir(mode=0o700)
    return root


def test_a_full_disk_leaves_no_partial_secret_and_the_next_run_makes_one(tmp_path, monkeypatch):
    root = _root(tmp_path)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache_trust.os, "fsync", full)
    secret, why = user_secret(root)
    assert secret is None and "No space left" in why
    assert list(root.iterdir()) == []  # neither a short hmac.key nor a temporary
    monkeypatch.undo()
    secret, why = user_secret(root)
    assert why is None and len(secret) == SECRET_BYTES
    assert (root / SECRET_NAME).read_bytes() == secret
    assert user_secret(root) == (secret, None)  # stable from then on


def test_a_partial_secret_of_ours_is_replaced(tmp_path):
    root = _root(tmp_path)
    for size in (0, 7, SECRET_BYTES - 1):
        path = root / SECRET_NAME
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"x" * size)
        os.close(fd)
        secret, why = user_secret(root)
        assert why is None and len(secret) == SECRET_BYTES
        assert path.read_bytes() == secret and (path.stat().st_mode & 0o777) == 0o600
        assert sorted(p.name for p in root.iterdir()) == [SECRET_NAME]


def test_a_secret_others_can_read_is_still_refused(tmp_path):
    root = _root(tmp_path)
    path = root / SECRET_NAME
    path.write_bytes(b"\0" * SECRET_BYTES)
    path.chmod(0o644)
    secret, why = user_secret(root)
    assert secret is None and "readable by other users" in why
