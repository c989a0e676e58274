"""The lossless saved form of a program: a zip holding the printed IR, raw literal bytes, stable
instruction ids and provenance, optional named blobs (e.g. compiled kernels), and a versioned JSON
manifest with a SHA-256 per member.

Loading runs no code: it reads JSON, raw little-endian bytes and our own IR text. Truncated,
tampered or unknown-version files fail with a `FormatError` naming the problem.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from typing import Any

import numpy as np

from . import dtypes
from .errors import FormatError, MigxError
from .ir import Program
from .parser import parse
from .printer import print_program

FORMAT = "migx-explore-program"
VERSION = 1
MAX_MEMBER_BYTES = 8 << 30  # refuse absurd sizes before reading (zip-bomb guard)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_program(program: Program, path: str | os.PathLike, *, metadata: dict[str, Any] | None = None,
                 blobs: dict[str, bytes] | None = None) -> str:
    """Write `program` (plus JSON-able `metadata` and named binary `blobs`) to `path`."""
    literal_keys: dict[int, str] = {}
    literal_data: dict[str, bytes] = {}
    literal_meta: dict[str, dict[str, Any]] = {}

    def ref(lit) -> str:
        key = literal_keys.get(id(lit))
        if key is None:
            key = str(len(literal_keys))
            literal_keys[id(lit)] = key
            arr = np.ascontiguousarray(lit.data)
            raw = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
            literal_data[key] = raw
            literal_meta[key] = {"type": dtypes.dtype(arr.dtype).name, "shape": list(arr.shape),
                                 "member": f"literals/{key}.bin"}
        return key

    text = print_program(program, literal_ref=ref)
    ids = {m.name: [[ins.id, list(ins.origin)] for ins in m] for m in program.get_modules()}
    members: dict[str, bytes] = {"program.txt": text.encode(), "ids.json": json.dumps(ids).encode()}
    for key, raw in literal_data.items():
        members[literal_meta[key]["member"]] = raw
    for name, data in (blobs or {}).items():
        if not name or name.startswith(("/", "..")) or ".." in name.split("/"):
            raise MigxError(f"bad blob name {name!r}")
        members[f"blobs/{name}"] = bytes(data)
    manifest = {
        "format": FORMAT, "version": VERSION, "next_id": program._next_id,
        "literals": literal_meta, "blobs": sorted(blobs or {}),
        "members": {name: {"sha256": _sha(data), "size": len(data)} for name, data in members.items()},
        "metadata": metadata or {},
    }
    tmp = f"{os.fspath(path)}.tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest, indent=1))
        for name, data in members.items():
            z.writestr(name, data)
    os.replace(tmp, path)  # never leave a half-written file under the real name
    return os.fspath(path)


class SavedProgram:
    def __init__(self, program: Program, metadata: dict[str, Any], blobs: dict[str, bytes]):
        self.program = program
        self.metadata = metadata
        self.blobs = blobs


def load_program_file(path: str | os.PathLike) -> SavedProgram:
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise FormatError(f"{where}: cannot read ({e.strerror})") from None
    try:
        z = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:
        raise FormatError(f"{where}: not a migx-explore program file (not a zip archive, or truncated)") from None
    with z:
        manifest = _read_manifest(z, where)
        data = {}
        for name, info in manifest["members"].items():
            data[name] = _read_member(z, name, info, where)
        literals = {}
        for key, meta in manifest["literals"].items():
            try:
                npd = dtypes.np_dtype(meta["type"]).newbyteorder("<")
                arr = np.frombuffer(data[meta["member"]], dtype=npd).astype(npd.newbyteorder("="))
                literals[key] = arr.reshape(meta["shape"])
            except (KeyError, ValueError, TypeError) as e:
                raise FormatError(f"{where}: literal {key} is malformed ({e})") from None
        try:
            program = parse(data["program.txt"].decode(), literals=literals)
            ids = json.loads(data["ids.json"])
            _restore_ids(program, ids, manifest["next_id"])
            program.validate()
        except (MigxError, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise FormatError(f"{where}: program does not load: {e}") from None
        blobs = {name: data[f"blobs/{name}"] for name in manifest["blobs"]}
    return SavedProgram(program, manifest["metadata"], blobs)


def _read_manifest(z: zipfile.ZipFile, where: str) -> dict[str, Any]:
    try:
        manifest = json.loads(z.read("manifest.json"))
    except KeyError:
        raise FormatError(f"{where}: no manifest.json; not a migx-explore program file") from None
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise FormatError(f"{where}: manifest unreadable ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise FormatError(f"{where}: not a migx-explore program file (format {manifest.get('format')!r})"
                          if isinstance(manifest, dict) else f"{where}: manifest is not an object")
    if manifest.get("version") != VERSION:
        raise FormatError(f"{where}: format version {manifest.get('version')} is not supported "
                          f"(this migx-explore reads version {VERSION})")
    for key, kind in (("members", dict), ("literals", dict), ("blobs", list), ("metadata", dict), ("next_id", int)):
        if not isinstance(manifest.get(key), kind):
            raise FormatError(f"{where}: manifest field {key!r} is missing or malformed")
    for req in ("program.txt", "ids.json"):
        if req not in manifest["members"]:
            raise FormatError(f"{where}: manifest does not list {req}")
    return manifest


def _read_member(z: zipfile.ZipFile, name: str, info: Any, where: str) -> bytes:
    if not isinstance(info, dict) or not isinstance(info.get("size"), int) or not isinstance(info.get("sha256"), str):
        raise FormatError(f"{where}: manifest entry for {name} is malformed")
    if info["size"] > MAX_MEMBER_BYTES:
        raise FormatError(f"{where}: member {name} claims {info['size']} bytes; refusing")
    try:
        zi = z.getinfo(name)
        if zi.file_size != info["size"]:
            raise FormatError(f"{where}: member {name} has {zi.file_size} bytes, manifest says {info['size']} "
                              "(tampered or truncated)")
        data = z.read(name)
    except KeyError:
        raise FormatError(f"{where}: member {name} is missing (truncated file?)") from None
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise FormatError(f"{where}: member {name} is corrupt ({e})") from None
    if _sha(data) != info["sha256"]:
        raise FormatError(f"{where}: member {name} fails its SHA-256 check (tampered or corrupt)")
    return data


def _restore_ids(program: Program, ids: dict[str, list], next_id: int) -> None:
    """Give instructions back the stable ids and provenance they had when saved."""
    for m in program.modules.values():
        rows = ids.get(m.name)
        instrs = list(m)
        if rows is None or len(rows) != len(instrs):
            raise FormatError(f"ids.json does not match module {m.name}")
        for ins, (iid, origin) in zip(instrs, rows):
            ins._id = int(iid)
            ins._origin = tuple(int(o) for o in origin)
    program._next_id = max(next_id, program._next_id)
    program._epoch = program._next_id
