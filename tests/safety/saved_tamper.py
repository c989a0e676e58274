"""Tampering with saved programs the way an attacker with a text editor would: change members and
the manifest, then recompute every SHA-256 and size so the file is self-consistent."""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path


def read_members(path: Path) -> tuple[dict, dict[str, bytes]]:
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    return json.loads(members.pop("manifest.json")), members


def write_members(path: Path, manifest: dict, members: dict[str, bytes], *, rehash: bool = True) -> None:
    if rehash:
        for name, data in members.items():
            if name in manifest.get("members", {}):
                manifest["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            z.writestr(name, data)


def tamper(src: Path, dst: Path, edit: Callable[[dict, dict[str, bytes]], None]) -> Path:
    manifest, members = read_members(src)
    edit(manifest, members)
    write_members(dst, manifest, members)
    return dst


def claim_size(path: Path, member: str, size: int) -> None:
    """Make the zip directory claim `member` decompresses to `size` bytes (a zip bomb's header)
    without writing that much: patch the local and central headers' uncompressed-size fields."""
    raw = bytearray(path.read_bytes())
    name = member.encode()
    local = raw.find(b"PK\x03\x04" + b"")
    while local != -1:
        n = struct.unpack_from("<H", raw, local + 26)[0]
        if raw[local + 30 : local + 30 + n] == name:
            struct.pack_into("<I", raw, local + 22, size)
        local = raw.find(b"PK\x03\x04", local + 4)
    central = raw.find(b"PK\x01\x02")
    while central != -1:
        n = struct.unpack_from("<H", raw, central + 28)[0]
        if raw[central + 46 : central + 46 + n] == name:
            struct.pack_into("<I", raw, central + 24, size)
        central = raw.find(b"PK\x01\x02", central + 4)
    path.write_bytes(bytes(raw))
