"""Signing keys for saved programs (ed25519, through the `cryptography` package).

A saved program carries compiled kernel binaries; they run on the GPU, so they are used only when
the file is signed by a key this user trusts. The signature covers the file's manifest, which
holds the SHA-256 of every member (IR text, ids, literals, kernel sources and binaries): any edit
to the IR, a weight or a kernel after signing is detected, even with the hashes recomputed.

Keys live in `$MIGX_EXPLORE_KEY_DIR` (default ~/.config/migx-explore/keys):
    signing.key          this user's private key (PEM, mode 0600)
    trusted/<id>.pub     trusted public keys, hex (this user's own is trusted when created)
A key id is the first 16 hex digits of the SHA-256 of the raw public key.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from migx_explore.compiler.errors import FormatError, MigxError
from migx_explore.gpu.cache_trust import own_folder_refusal, read_own_file


class KeyError_(MigxError):
    """A key cannot be created, read or trusted (the message says why)."""


def key_dir() -> Path:
    root = os.environ.get("MIGX_EXPLORE_KEY_DIR") or os.path.join(
        os.path.expanduser("~"), ".config", "migx-explore", "keys"
    )
    return Path(root)


def key_id(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:16]


def _ed25519():
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:  # a declared dependency; this only helps a broken install say so
        raise KeyError_("signing needs the `cryptography` package (pip install cryptography)") from None
    return ed25519


def _raw_public(private) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    why = own_folder_refusal(folder)
    if why is not None:
        raise KeyError_(f"key folder {str(folder)!r} cannot be trusted: {why}")


def create_key(*, replace: bool = False) -> str:
    """Create this user's signing key (0600) and trust it; returns its id."""
    ed25519 = _ed25519()
    from cryptography.hazmat.primitives import serialization

    folder = key_dir()
    _private_folder(folder)
    path = folder / "signing.key"
    if path.exists() and not replace:
        raise KeyError_(
            f"a signing key already exists ({str(path)!r}, id {own_key_id()}); pass --replace to make "
            "a new one (files signed with the old key stay trusted only if you keep trusting it)"
        )
    private = ed25519.Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    tmp = folder / ".signing.key.tmp"
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    os.replace(tmp, path)
    return trust_key(_raw_public(private).hex(), name="own key")


def _own_private():
    """This user's private key, or None when none was created (then `cryptography` is not even
    imported: unsigned use works where it is not installed)."""
    path = key_dir() / "signing.key"
    data, why = read_own_file(path, limit=4096)
    if data is None:
        if why is None:
            return None
        raise KeyError_(f"signing key {str(path)!r} not used: {why}")
    if os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyError_(f"signing key {str(path)!r} is readable by other users; chmod 600 it")
    _ed25519()  # a clear error where cryptography is missing
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise KeyError_(f"signing key {str(path)!r} is not an ed25519 PEM key ({e})") from None


def own_key_id() -> str | None:
    private = _own_private()
    return None if private is None else key_id(_raw_public(private))


def own_public_hex() -> str:
    private = _own_private()
    if private is None:
        raise KeyError_("no signing key yet; create one with `migx-explore keys create`")
    return _raw_public(private).hex()


def _parse_public(text: str) -> bytes:
    try:
        raw = bytes.fromhex(text.strip())
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise KeyError_(
            f"{text.strip()[:80]!r} is not an ed25519 public key (64 hex digits, as `migx-explore keys export` prints)"
        )
    return raw


def trust_key(public_hex: str, *, name: str = "") -> str:
    """Trust a public key (hex); returns its id."""
    raw = _parse_public(public_hex)
    folder = key_dir() / "trusted"
    _private_folder(key_dir())
    _private_folder(folder)
    kid = key_id(raw)
    path = folder / f"{kid}.pub"
    fd = os.open(folder / f".{kid}.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps({"public_key": raw.hex(), "name": name}) + "\n")
    os.replace(folder / f".{kid}.tmp", path)
    return kid


def trusted_keys() -> dict[str, dict[str, str]]:
    """Trusted keys by id: {"public_key": hex, "name": ...}. Files another user could have written
    are skipped: they would let that user vouch for binaries."""
    folder = key_dir() / "trusted"
    if own_folder_refusal(key_dir()) or own_folder_refusal(folder) or not folder.is_dir():
        return {}
    out = {}
    for path in sorted(folder.glob("*.pub")):
        data, _ = read_own_file(path, limit=4096)
        try:
            entry = json.loads(data) if data is not None else None
            raw = _parse_public(entry["public_key"])
        except (ValueError, TypeError, KeyError, RecursionError, MigxError):
            continue
        if key_id(raw) == path.stem:
            out[path.stem] = {"public_key": raw.hex(), "name": str(entry.get("name", ""))}
    return out


def sign(manifest: bytes) -> bytes | None:
    """The signature member for a manifest, by this user's key (None when there is no key)."""
    private = _own_private()
    if private is None:
        return None
    return json.dumps(
        {
            "algorithm": "ed25519",
            "key_id": key_id(_raw_public(private)),
            "public_key": _raw_public(private).hex(),
            "signature": private.sign(manifest).hex(),
        }
    ).encode()


@dataclass(frozen=True)
class Signature:
    """Who signed a saved program: status is 'unsigned', 'untrusted' (valid, by a key not trusted
    here) or 'trusted'."""

    status: str
    key_id: str | None = None

    @property
    def trusted(self) -> bool:
        return self.status == "trusted"

    def describe(self) -> str:
        if self.status == "unsigned":
            return "unsigned"
        return f"signed by key {self.key_id} ({'trusted' if self.trusted else 'not trusted here'})"


def check(manifest: bytes, member: bytes | None, where: str) -> Signature:
    """Verify a saved program's signature over its manifest. A signature that does not verify
    means the file was edited after signing: FormatError, whoever signed it."""
    if member is None:
        return Signature("unsigned")
    ed25519 = _ed25519()
    from cryptography.exceptions import InvalidSignature

    try:
        sig = json.loads(member)
        raw = _parse_public(sig["public_key"])
        signature = bytes.fromhex(sig["signature"])
        if sig.get("algorithm") != "ed25519":
            raise ValueError(f"algorithm {sig.get('algorithm')!r}")
    except (ValueError, TypeError, KeyError, RecursionError, MigxError) as e:
        raise FormatError(f"{where}: its signature is malformed ({str(e)[:120]})") from None
    kid = key_id(raw)
    try:
        ed25519.Ed25519PublicKey.from_public_bytes(raw).verify(signature, manifest)
    except InvalidSignature:
        raise FormatError(
            f"{where}: edited after it was signed by key {kid}: its IR, weights or kernels no "
            "longer match the signature; refusing it"
        ) from None
    trusted = trusted_keys().get(kid)
    return Signature("trusted" if trusted and trusted["public_key"] == raw.hex() else "untrusted", kid)
