"""Issue 14: the kernel cache and shipped binaries trust nothing (recording fake backend, no GPU)."""

from __future__ import annotations

import json
import os

import pytest

from migx_explore.gpu import kernel_cache
from migx_explore.gpu.codegen.common import KernelSource
from migx_explore.gpu.portable import import_kernels
from migx_explore.gpu.runtime.fake import FakeBackend


def _kernel(tag: str) -> KernelSource:
    return KernelSource(
        f"k{tag}_kernel",
        f'#include "migx.hpp"\nMIGX_GLOBAL void k{tag}_kernel(float* p) {{\n'
        "    migx::kernel_entry();\n    p[0] = 1;\n}\n",
        64,
        64,
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(folder))
    kernel_cache.clear_memory_cache()
    yield folder / "kernels"
    kernel_cache.clear_memory_cache()


def test_disk_entries_carry_a_checked_content_hash(cache):
    be, ks = FakeBackend(), _kernel("hash")
    good = kernel_cache.compile_many(be.kernels, [ks])[ks.key]
    bk = kernel_cache.binary_key(ks, be.kernels, be.kernels.compile_flags())
    entry = cache / f"{bk}.bin"
    assert entry.read_bytes().endswith(good) and entry.read_bytes() != good
    entry.write_bytes(b"planted machine code")  # a file put there by someone else
    kernel_cache.clear_memory_cache()
    assert kernel_cache.compile_many(be.kernels, [ks])[ks.key] == good
    assert kernel_cache.last_stats.compiled == 1 and kernel_cache.last_stats.from_disk == 0


def test_an_entry_renamed_to_another_key_fails_its_check(cache):
    be, a, b = FakeBackend(), _kernel("a"), _kernel("b")
    kernel_cache.compile_many(be.kernels, [a, b])
    ka, kb = (kernel_cache.binary_key(k, be.kernels, be.kernels.compile_flags()) for k in (a, b))
    (cache / f"{kb}.bin").write_bytes((cache / f"{ka}.bin").read_bytes())
    kernel_cache.clear_memory_cache()
    kernel_cache.compile_many(be.kernels, [b])
    assert kernel_cache.last_stats.compiled == 1


def test_a_cache_folder_others_can_write_is_refused(cache):
    be, ks = FakeBackend(), _kernel("perm")
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    with pytest.warns(UserWarning, match="other users can write to it"):
        kernel_cache.compile_many(be.kernels, [ks])
    assert not list(cache.iterdir())  # nothing written to, nor read from, that folder
    assert kernel_cache.disk_cache_refusal(cache) is not None
    cache.chmod(0o700)
    assert kernel_cache.disk_cache_refusal(cache) is None


def _shipped(ks: KernelSource, be, binary: bytes, binary_key: str | None = None):
    bk = binary_key or kernel_cache.binary_key(ks, be.kernels, be.kernels.compile_flags())
    rows = [{"key": ks.key, "binaries": [{"arch": be.arch, "binary_key": bk}]}]
    blobs = {
        f"kernels/{ks.key}.json": json.dumps(
            {"name": ks.name, "source": ks.source, "global": 64, "local": 64}
        ).encode(),
        f"kernels/{bk}.bin": binary,
    }
    return rows, blobs


def test_shipped_binaries_serve_only_their_program(cache):
    be, ks = FakeBackend(), _kernel("ship")
    rows, blobs = _shipped(ks, be, b"shipped code")
    usable = import_kernels(rows, blobs, be)
    assert list(usable.values()) == [b"shipped code"]
    with kernel_cache.shipped_binaries(usable):
        assert kernel_cache.compile_many(be.kernels, [ks], use_disk=False)[ks.key] == b"shipped code"
    assert be.kernels.compiles == 0
    # Outside that program's context the process never saw it: the kernel is compiled from source.
    assert kernel_cache.compile_many(be.kernels, [ks], use_disk=False)[ks.key] != b"shipped code"
    assert be.kernels.compiles == 1


def test_shipped_binary_under_a_foreign_key_is_ignored(cache):
    be, ks, other = FakeBackend(), _kernel("mine"), _kernel("other")
    foreign = kernel_cache.binary_key(other, be.kernels, be.kernels.compile_flags())
    rows, blobs = _shipped(ks, be, b"evil", binary_key=foreign)
    assert import_kernels(rows, blobs, be) == {}


def test_shipped_binary_for_another_arch_is_ignored(cache):
    be, ks = FakeBackend(), _kernel("arch")
    there = FakeBackend()
    there.arch = "elsewhere"
    rows, blobs = _shipped(ks, there, b"other arch")
    assert import_kernels(rows, blobs, be) == {}


def test_recompile_ignores_shipped_binaries(tmp_path, monkeypatch, capsys):
    from migx_explore import models
    from migx_explore.cli import main
    from migx_explore.keys import create_key
    from migx_explore.portable import compile_until, load_partial

    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("MIGX_EXPLORE_KEY_DIR", str(tmp_path / "keys"))
    os.makedirs(tmp_path / "c", mode=0o700)
    create_key()  # signed by the user's own key: its binaries are trusted
    part = tmp_path / "p.migx"
    compile_until(models.load("mlp"), "backend.compile_ops", str(part), model="mlp")
    assert load_partial(str(part)).kernels > 0
    assert load_partial(str(part), recompile=True).kernels == 0
    assert main(["compile", str(part), "--resume", "--recompile"]) == 0
    assert "ignored (--recompile)" in capsys.readouterr().out


# ---- issue 26: entries are the user's own and carry an HMAC keyed by a per-user secret -------------
OTHER_UID = 65534  # nobody


def _entry_for(cache, be, ks):
    good = kernel_cache.compile_many(be.kernels, [ks])[ks.key]
    return good, cache / f"{kernel_cache.binary_key(ks, be.kernels, be.kernels.compile_flags())}.bin"


def test_the_secret_is_created_private_on_first_use(cache):
    kernel_cache.compile_many(FakeBackend().kernels, [_kernel("secret")])
    secret = cache.parent / "hmac.key"
    assert secret.stat().st_mode & 0o777 == 0o600 and len(secret.read_bytes()) == 32


def test_a_forged_entry_never_validates(cache):
    """A self-consistent entry made without the secret (the old unkeyed SHA-256 form, or an HMAC
    under another key) is recompiled."""
    import hashlib
    import hmac

    be, ks = FakeBackend(), _kernel("forge")
    good, entry = _entry_for(cache, be, ks)
    bk = entry.stem
    for mac in (
        hashlib.sha256(bk.encode() + b"\0" + b"evil").hexdigest(),
        hmac.new(b"x" * 32, bk.encode() + b"\0" + b"evil", hashlib.sha256).hexdigest(),
    ):
        entry.write_bytes(kernel_cache._ENTRY_MAGIC + mac.encode() + b"\nevil")
        kernel_cache.clear_memory_cache()
        assert kernel_cache.compile_many(be.kernels, [ks])[ks.key] == good
        assert kernel_cache.last_stats.compiled == 1


@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0, reason="needs root to chown to another uid")
def test_an_entry_another_user_owns_is_refused_once_even_with_a_valid_mac(cache):
    be, ks = FakeBackend(), _kernel("owner")
    good, entry = _entry_for(cache, be, ks)
    os.chown(entry, OTHER_UID, OTHER_UID)
    entry.chmod(0o666)
    kernel_cache.clear_memory_cache()
    kernel_cache._WARNED.clear()
    with pytest.warns(UserWarning, match="belongs to another user"):
        assert kernel_cache.compile_many(be.kernels, [ks])[ks.key] == good
    assert kernel_cache.last_stats.compiled == 1 and kernel_cache.last_stats.from_disk == 0
    assert entry.stat().st_uid == os.getuid()  # replaced by the user's own entry


def test_an_entry_others_can_write_is_refused(cache):
    be, ks = FakeBackend(), _kernel("mode")
    _, entry = _entry_for(cache, be, ks)
    entry.chmod(0o646)
    kernel_cache.clear_memory_cache()
    kernel_cache._WARNED.clear()
    with pytest.warns(UserWarning, match="other users can write to it"):
        kernel_cache.compile_many(be.kernels, [ks])
    assert kernel_cache.last_stats.compiled == 1


def test_kernels_as_a_symlink_is_refused(cache, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    cache.symlink_to(elsewhere)
    assert "symbolic link" in kernel_cache.disk_cache_refusal(cache)
    kernel_cache._WARNED.clear()
    with pytest.warns(UserWarning, match="symbolic link"):
        kernel_cache.compile_many(FakeBackend().kernels, [_kernel("link")])
    assert not list(elsewhere.iterdir())


def test_an_entry_that_is_a_symlink_is_refused(cache, tmp_path):
    be, ks = FakeBackend(), _kernel("elink")
    _, entry = _entry_for(cache, be, ks)
    real = tmp_path / "real.bin"
    real.write_bytes(entry.read_bytes())
    real.chmod(0o600)
    entry.unlink()
    entry.symlink_to(real)
    kernel_cache.clear_memory_cache()
    kernel_cache._WARNED.clear()
    with pytest.warns(UserWarning, match="symbolic link"):
        kernel_cache.compile_many(be.kernels, [ks])
    assert kernel_cache.last_stats.compiled == 1


def test_an_ancestor_others_can_write_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # world-writable without the sticky bit: anyone can swap the cache root
    (shared / "cache").mkdir(mode=0o700)
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(shared / "cache"))
    assert "other users can write to the folder" in kernel_cache.disk_cache_refusal(kernel_cache.cache_dir())
    shared.chmod(0o1777)  # sticky, as /tmp: others cannot replace what is in it
    assert kernel_cache.disk_cache_refusal(kernel_cache.cache_dir()) is None


@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0, reason="needs root to chown to another uid")
def test_an_ancestor_another_user_owns_is_refused(tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    (theirs / "cache").mkdir(parents=True, mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(theirs / "cache"))
    assert "belongs to another user" in kernel_cache.disk_cache_refusal(kernel_cache.cache_dir())


def test_a_symlinked_cache_root_is_refused(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path / "link"))
    assert "symbolic link" in kernel_cache.disk_cache_refusal(kernel_cache.cache_dir())


@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0, reason="needs root to chown to another uid")
def test_a_secret_another_user_owns_or_can_read_disables_the_cache(cache):
    cache.parent.joinpath("hmac.key").write_bytes(b"k" * 32)
    cache.parent.joinpath("hmac.key").chmod(0o644)
    kernel_cache._WARNED.clear()
    with pytest.warns(UserWarning, match="readable by other users"):
        kernel_cache.compile_many(FakeBackend().kernels, [_kernel("s1")])
    os.chown(cache.parent / "hmac.key", OTHER_UID, OTHER_UID)
    cache.parent.joinpath("hmac.key").chmod(0o600)
    kernel_cache._WARNED.clear()
    with pytest.warns(UserWarning, match="belongs to another user"):
        kernel_cache.compile_many(FakeBackend().kernels, [_kernel("s2")])
