"""Issue 26: kernel binaries in a saved program run only when a key the user trusts signed the
file; an edit after signing (IR, weights, kernels, hashes recomputed) is refused; `--trust-binaries`
keeps the old behaviour explicitly. Recording fake backend: no GPU needed."""

from __future__ import annotations

import os
import stat

import pytest

from migx_explore import keys, models
from migx_explore.cli import main as cli
from migx_explore.compiler.errors import FormatError
from migx_explore.portable import compile_until, load_partial

from .saved_tamper import read_members, tamper

pytest.importorskip("cryptography", reason="signing needs the cryptography package (a declared dependency)")


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    monkeypatch.setenv("MIGX_EXPLORE_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("MIGX_EXPLORE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _save(path) -> str:
    compile_until(models.load("mlp"), "backend.compile_ops", str(path), model="mlp")
    return str(path)


def test_keys_create_list_export_trust(env, capsys):
    assert cli(["keys", "create"]) == 0
    kid = keys.own_key_id()
    key_file = env / "keys" / "signing.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert cli(["keys", "create"]) == 2  # never overwritten silently
    assert cli(["keys", "list"]) == 0
    assert f"{kid}  own key (this user's signing key)" in capsys.readouterr().out
    assert cli(["keys", "export"]) == 0
    assert keys.key_id(bytes.fromhex(capsys.readouterr().out.strip())) == kid
    assert cli(["keys", "trust", "zz"]) == 2
    assert "not an ed25519 public key" in capsys.readouterr().err


def test_signed_by_own_key_reuses_binaries_and_names_the_key(env, capsys):
    keys.create_key()
    part = _save(env / "p.migx")
    loaded = load_partial(part)
    assert loaded.signature.trusted and loaded.kernels == loaded.shipped > 0
    assert cli(["compile", part, "--resume"]) == 0
    out = capsys.readouterr().out
    assert f"signed by key {keys.own_key_id()} (trusted)" in out and "kernel binaries reused" in out


def test_an_unsigned_file_ships_sources_only_and_resumes(env, capsys):
    part = _save(env / "p.migx")
    loaded = load_partial(part)
    assert loaded.signature.status == "unsigned" and loaded.kernels == 0 and loaded.shipped == 0
    assert cli(["compile", part, "--resume"]) == 0
    assert "no kernel binaries for this machine" in capsys.readouterr().out


def test_an_unsigned_file_with_binaries_is_refused_unless_trust_binaries(env, capsys):
    """Issue 40 item 11: a file whose signature was stripped (or that never had one) yet carries
    binaries, even with every hash recomputed, is refused, as an edit after signing is."""
    keys.create_key()
    signed = _save(env / "p.migx")

    def strip(manifest, members):
        del members["signature.json"]
        _binary(manifest, members)

    bad = str(tamper(env / "p.migx", env / "bad.migx", strip))
    assert load_partial(signed).kernels > 0
    with pytest.raises(FormatError, match="unsigned, yet it carries .* kernel binaries.*--trust-binaries"):
        load_partial(bad)
    assert cli(["compile", bad, "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--trust-binaries" in err[0]
    assert load_partial(bad, recompile=True).kernels == 0
    assert load_partial(bad, trust_binaries=True).kernels > 0
    assert cli(["compile", bad, "--resume", "--trust-binaries"]) == 0
    assert "without a trusted signature (--trust-binaries)" in capsys.readouterr().out


def test_a_key_not_trusted_here_until_keys_trust(env, monkeypatch, capsys):
    keys.create_key()
    public = keys.own_public_hex()
    part = _save(env / "p.migx")
    monkeypatch.setenv("MIGX_EXPLORE_KEY_DIR", str(env / "other-user-keys"))  # the receiving machine
    loaded = load_partial(part)
    assert loaded.signature.status == "untrusted" and loaded.kernels == 0
    assert cli(["compile", part, "--resume"]) == 0
    assert "trust its key with `migx-explore keys trust`" in capsys.readouterr().out
    assert cli(["keys", "trust", public, "--name", "build box"]) == 0
    assert load_partial(part).signature.trusted and load_partial(part).kernels > 0


def _relu_to_tanh(manifest, members):
    text = members["program.txt"].decode()
    assert "relu" in text
    members["program.txt"] = text.replace("relu", "tanh").encode()


def _weight(manifest, members):
    name = next(n for n in members if n.startswith("literals/"))
    members[name] = bytes(len(members[name]))


def _binary(manifest, members):
    name = next(n for n in members if n.endswith(".bin") and n.startswith("blobs/"))
    members[name] = b"\x90" * len(members[name])


@pytest.mark.parametrize("edit", [_relu_to_tanh, _weight, _binary], ids=["ir", "weight", "binary"])
def test_an_edit_after_signing_is_refused_even_with_hashes_recomputed(env, edit, capsys):
    keys.create_key()
    part = _save(env / "p.migx")
    bad = tamper(env / "p.migx", env / "bad.migx", edit)
    assert "signature.json" in read_members(bad)[1]
    with pytest.raises(FormatError, match="edited after it was signed by key"):
        load_partial(str(bad))
    assert cli(["compile", str(bad), "--resume", "--run", "--trust-binaries"]) == 2
    assert "edited after it was signed" in capsys.readouterr().err
    assert load_partial(part).signature.trusted  # the original still verifies


def test_a_signing_key_others_can_read_is_refused(env):
    keys.create_key()
    os.chmod(env / "keys" / "signing.key", 0o644)
    with pytest.raises(keys.KeyError_, match="readable by other users"):
        keys.own_key_id()


@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0, reason="needs root to chown to another uid")
def test_a_trusted_key_file_another_user_wrote_is_ignored(env):
    keys.create_key()
    kid = keys.own_key_id()
    os.chown(env / "keys" / "trusted" / f"{kid}.pub", 65534, 65534)
    assert kid not in keys.trusted_keys()
