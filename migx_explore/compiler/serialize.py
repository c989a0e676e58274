"""The lossless saved form of a program: a zip holding the printed IR, raw literal bytes, stable
instruction ids and provenance, optional named blobs (e.g. compiled kernels), and a versioned JSON
manifest with a SHA-256 per member.

Loading runs no code: it reads JSON, raw little-endian bytes and our own IR text. Truncated,
tampered or unknown-version files fail with a `FormatError` naming the problem.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from . import dtypes, tmpfiles
from .errors import FormatError, MigxError
from .ir import Program
from .limits import check_bytes, human_bytes, memory_budget
from .parser import parse
from .printer import print_program

FORMAT = "migx-explore-program"
VERSION = 1
# Limits checked on the zip directory before decompressing anything (zip-bomb guard); literals are
# bounded by the memory budget and by their declared shape.
MAX_TEXT_BYTES = 256 << 20  # manifest.json, program.txt, ids.json
MAX_BLOB_BYTES = 256 << 20  # one kernel source or binary
MAX_SIGNATURE_BYTES = 4096
# Beside manifest.json and outside it (it signs the manifest's bytes); migx_explore.keys makes it.
SIGNATURE_MEMBER = "signature.json"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_program(
    program: Program,
    path: str | os.PathLike,
    *,
    metadata: dict[str, Any] | None = None,
    blobs: dict[str, bytes] | None = None,
    sign: Callable[[bytes], bytes | None] | None = None,
) -> str:
    """Write `program` (plus JSON-able `metadata` and named binary `blobs`) to `path`. `sign`, given
    the manifest's bytes, returns a signature member (SIGNATURE_MEMBER) or None: the manifest holds
    every member's SHA-256, so signing it covers the whole file."""
    members, literal_meta = _program_members(program)
    for name, data in (blobs or {}).items():
        if not name or name.startswith(("/", "..")) or ".." in name.split("/"):
            raise MigxError(f"bad blob name {name!r}")
        members[f"blobs/{name}"] = bytes(data)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "next_id": program._next_id,
        "literals": literal_meta,
        "blobs": sorted(blobs or {}),
        "members": {name: {"sha256": _sha(data), "size": len(data)} for name, data in members.items()},
        "metadata": metadata or {},
    }
    names = _io_names(program)
    if names:  # the model's own feed and output names, so a saved program runs on the model's feed
        manifest["io_names"] = names
    manifest_raw = json.dumps(manifest, indent=1).encode()
    signature = sign(manifest_raw) if sign is not None else None
    target = os.fspath(path)
    if os.path.isdir(target):
        raise MigxError(f"cannot write {target!r}: it is a folder")
    _write_zip(target, manifest_raw, members, signature)
    return os.fspath(path)


def _program_members(program: Program) -> tuple[dict[str, bytes], dict[str, dict[str, Any]]]:
    """(members, literal metadata): the program's text with literals as references, the
    instruction ids and origins, and each distinct literal's little-endian bytes."""
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
            literal_meta[key] = {
                "type": dtypes.dtype(arr.dtype).name,
                "shape": list(arr.shape),
                "member": f"literals/{key}.bin",
            }
        return key

    text = print_program(program, literal_ref=ref)
    ids = {m.name: [[ins.id, list(ins.origin)] for ins in m] for m in program.get_modules()}
    members: dict[str, bytes] = {"program.txt": text.encode(), "ids.json": json.dumps(ids).encode()}
    for key, raw in literal_data.items():
        members[literal_meta[key]["member"]] = raw
    return members, literal_meta


def _write_zip(target: str, manifest_raw: bytes, members: dict[str, bytes], signature: bytes | None) -> None:
    # A unique temporary name beside the target, renamed into place: an error or interrupt never
    # leaves a half-written file under the real name, nor clobbers an unrelated `<path>.tmp`.
    folder = os.path.dirname(os.path.abspath(target))
    tmpfiles.clean_stale_temporaries(folder)  # an interrupted earlier save's leftovers
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=tmpfiles.prefix(), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("manifest.json", manifest_raw)
            for name, data in members.items():
                z.writestr(name, data)
            if signature is not None:
                z.writestr(SIGNATURE_MEMBER, signature)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class SavedProgram:
    def __init__(
        self,
        program: Program,
        metadata: dict[str, Any],
        blobs: dict[str, bytes],
        manifest_raw: bytes = b"",
        signature: bytes | None = None,
    ):
        self.program = program
        self.metadata = metadata
        self.blobs = blobs
        self.manifest_raw = manifest_raw  # the exact bytes a signature covers
        self.signature = signature  # the SIGNATURE_MEMBER's bytes, unverified (None: unsigned)


def load_program_file(path: str | os.PathLike) -> SavedProgram:
    """Read a saved program. Every size is checked before anything is decompressed, every
    structure before it is used; any problem is one FormatError naming the file and the part."""
    where = os.fspath(path)
    try:
        st = os.stat(where)
    except OSError as e:
        raise FormatError(f"{where}: cannot read ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise FormatError(f"{where}: not a regular file")
    try:
        z = zipfile.ZipFile(where)
    except (zipfile.BadZipFile, EOFError):
        raise FormatError(f"{where}: not a migx-explore program file (not a zip archive, or truncated)") from None
    except OSError as e:
        raise FormatError(f"{where}: cannot read ({e.strerror})") from None
    with z:
        manifest, manifest_raw = _read_manifest(z, where)
        signature = _read_signature(z, where)
        _check_sizes(z, manifest, where)
        data = {name: _read_member(z, name, info, where) for name, info in manifest["members"].items()}
        literals = {key: _literal(key, meta, data, where) for key, meta in manifest["literals"].items()}
        try:
            text = data["program.txt"].decode()
            ids = json.loads(data["ids.json"])
        except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep
            raise FormatError(
                f"{where}: program text or ids.json is not valid ({str(e)[:200] or type(e).__name__})"
            ) from None
        try:
            program = parse(text, literals=literals)
            _restore_ids(program, ids, manifest["next_id"])
            program.validate()
        except MigxError as e:
            raise FormatError(f"{where}: program does not load: {e}") from None
        blobs = {}
        for name in manifest["blobs"]:
            member = f"blobs/{name}" if isinstance(name, str) else None
            if member not in data:
                raise FormatError(f"{where}: blob {name!r} is listed but its member is missing from the manifest")
            blobs[name] = data[member]
    _restore_io_names(program, manifest.get("io_names"), where)
    return SavedProgram(program, manifest["metadata"], blobs, manifest_raw, signature)


def _io_names(program: Program) -> dict[str, list[str]]:
    out = {}
    for key in ("input_names", "output_names"):
        names = getattr(program, key, None)
        if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names):
            out[key] = list(names)
    return out


def _restore_io_names(program: Program, names: Any, where: str) -> None:
    """Put the model's input / output names back on the loaded program (what `run` keys by)."""
    if names is None:
        return
    ok = isinstance(names, dict) and all(
        k in ("input_names", "output_names")
        and isinstance(v, list)
        and len(v) <= 100_000
        and all(isinstance(n, str) and len(n) <= 4096 for n in v)
        for k, v in names.items()
    )
    if not ok:
        raise FormatError(f"{where}: io_names in the manifest is malformed")
    for key, value in names.items():
        setattr(program, key, list(value))


def _read_signature(z: zipfile.ZipFile, where: str) -> bytes | None:
    try:
        info = z.getinfo(SIGNATURE_MEMBER)
    except KeyError:
        return None
    if info.file_size > MAX_SIGNATURE_BYTES:
        raise FormatError(f"{where}: {SIGNATURE_MEMBER} is {human_bytes(info.file_size)}; refusing")
    try:
        return z.read(SIGNATURE_MEMBER)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise FormatError(f"{where}: {SIGNATURE_MEMBER} is corrupt ({e})") from None


def _limit_for(name: str, manifest: dict[str, Any]) -> int:
    if name in ("program.txt", "ids.json"):
        return MAX_TEXT_BYTES
    if name.startswith("blobs/"):
        return MAX_BLOB_BYTES
    return memory_budget()  # literals: their exact size is checked against their shape as well


def _check_sizes(z: zipfile.ZipFile, manifest: dict[str, Any], where: str) -> None:
    """Refuse oversized members from the zip directory alone: a zip bomb never gets decompressed."""
    total = 0
    for name, info in manifest["members"].items():
        if (
            not isinstance(info, dict)
            or not isinstance(info.get("size"), int)
            or info["size"] < 0
            or not isinstance(info.get("sha256"), str)
        ):
            raise FormatError(f"{where}: manifest entry for {name} is malformed")
        try:
            zi = z.getinfo(name)
        except KeyError:
            raise FormatError(f"{where}: member {name} is missing (truncated file?)") from None
        if zi.file_size != info["size"]:
            raise FormatError(
                f"{where}: member {name} has {zi.file_size} bytes, manifest says {info['size']} (tampered or truncated)"
            )
        limit = _limit_for(name, manifest)
        if zi.file_size > limit:
            raise FormatError(
                f"{where}: member {name} would decompress to {human_bytes(zi.file_size)}, over the "
                f"limit of {human_bytes(limit)}; refusing"
            )
        total += zi.file_size
    try:
        check_bytes(total, f"{where}: the members together")
    except MigxError as e:
        raise FormatError(str(e)) from None
    for key, meta in manifest["literals"].items():
        member = meta.get("member") if isinstance(meta, dict) else None
        if member not in manifest["members"]:
            raise FormatError(f"{where}: literal {key} names no member of the manifest")
        try:
            want = math.prod(int(d) for d in meta["shape"]) * dtypes.np_dtype(meta["type"]).itemsize
        except (KeyError, TypeError, ValueError, MigxError) as e:
            raise FormatError(f"{where}: literal {key} is malformed ({e})") from None
        if want != manifest["members"][member]["size"]:
            raise FormatError(
                f"{where}: literal {key} is {manifest['members'][member]['size']} bytes but its "
                f"shape {meta['shape']} {meta['type']} needs {want} (tampered)"
            )


def _literal(key: str, meta: dict[str, Any], data: dict[str, bytes], where: str) -> np.ndarray:
    try:
        npd = dtypes.np_dtype(meta["type"]).newbyteorder("<")
        arr = np.frombuffer(data[meta["member"]], dtype=npd).astype(npd.newbyteorder("="))
        return arr.reshape([int(d) for d in meta["shape"]])
    except (KeyError, ValueError, TypeError, MigxError) as e:
        raise FormatError(f"{where}: literal {key} is malformed ({e})") from None


def _read_manifest(z: zipfile.ZipFile, where: str) -> tuple[dict[str, Any], bytes]:
    try:
        size = z.getinfo("manifest.json").file_size
    except KeyError:
        raise FormatError(f"{where}: no manifest.json; not a migx-explore program file") from None
    if size > MAX_TEXT_BYTES:
        raise FormatError(f"{where}: manifest.json would decompress to {human_bytes(size)}; refusing")
    try:
        raw = z.read("manifest.json")
        manifest = json.loads(raw)
    except (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError, RecursionError) as e:
        raise FormatError(f"{where}: manifest unreadable ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise FormatError(
            f"{where}: not a migx-explore program file (format {manifest.get('format')!r})"
            if isinstance(manifest, dict)
            else f"{where}: manifest is not an object"
        )
    if manifest.get("version") != VERSION:
        raise FormatError(
            f"{where}: format version {manifest.get('version')!r} is not supported "
            f"(this migx-explore reads version {VERSION})"
        )
    for key, kind in (("members", dict), ("literals", dict), ("blobs", list), ("metadata", dict), ("next_id", int)):
        if not isinstance(manifest.get(key), kind):
            raise FormatError(f"{where}: manifest field {key!r} is missing or malformed")
    for req in ("program.txt", "ids.json"):
        if req not in manifest["members"]:
            raise FormatError(f"{where}: manifest does not list {req}")
    return manifest, raw


def _read_member(z: zipfile.ZipFile, name: str, info: dict[str, Any], where: str) -> bytes:
    try:
        data = z.read(name)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise FormatError(f"{where}: member {name} is corrupt ({e})") from None
    if _sha(data) != info["sha256"]:
        raise FormatError(f"{where}: member {name} fails its SHA-256 check (tampered or corrupt)")
    return data


def _restore_ids(program: Program, ids: Any, next_id: Any) -> None:
    """Give instructions back the stable ids and provenance they had when saved."""
    if not isinstance(ids, dict):
        raise FormatError(f"ids.json must map module names to rows, not a {type(ids).__name__}")
    for m in program.modules.values():
        rows = ids.get(m.name)
        instrs = list(m)
        if not isinstance(rows, list) or len(rows) != len(instrs):
            raise FormatError(f"ids.json does not match module {m.name}")
        for ins, row in zip(instrs, rows):
            try:
                iid, origin = row
                ins._id = int(iid)
                ins._origin = tuple(int(o) for o in origin)
            except (TypeError, ValueError):
                raise FormatError(f"ids.json row {row!r} of module {m.name} is not [id, [origin ids]]") from None
    program._next_id = max(next_id, program._next_id)
    program._epoch = program._next_id


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
