"""Kernels that travel with a saved program: generated source (always) plus the compiled binary for
every arch this machine has built (cached), so the target machine either reuses a binary for its
own arch and toolchain or compiles from source (migx_explore.portable writes/reads them)."""

from __future__ import annotations

import json
from typing import Any

from migx_explore.compiler.errors import FormatError
from migx_explore.compiler.ir import Program

from . import kernel_cache
from .codegen.common import KernelSource


def export_kernels(program: Program, target: Any = None) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """(manifest rows, blobs): sources for every kernel the program launches, and binaries for
    `target`'s arch when it has built them (in memory or in the disk cache)."""
    rows, blobs = [], {}
    flags = target.kernels.compile_flags() if target is not None else None
    for key in kernel_cache.kernel_keys(program):
        ks = kernel_cache.source_for(key)
        row: dict[str, Any] = {
            "key": key,
            "name": ks.name,
            "global": ks.global_size,
            "local": ks.local_size,
            "binaries": [],
        }
        blobs[f"kernels/{key}.json"] = json.dumps(
            {"name": ks.name, "source": ks.source, "global": ks.global_size, "local": ks.local_size}
        ).encode()
        if target is not None:
            bk = kernel_cache.binary_key(ks, target.kernels, flags)
            data = kernel_cache.cached_binary(bk)
            if data is not None:
                blobs[f"kernels/{bk}.bin"] = data
                row["binaries"].append(
                    {"arch": target.arch, "compiler": target.kernels.compiler_id(), "binary_key": bk}
                )
        rows.append(row)
    return rows, blobs


def import_kernels(rows: Any, blobs: dict[str, bytes], target: Any = None) -> dict[str, bytes]:
    """Register every shipped kernel source (its key is its content hash, checked) and return the
    shipped binaries usable on `target`, by binary key, for `kernel_cache.shipped_binaries`.

    A binary is used only under the key recomputed here from its own shipped source and this
    machine's target, so it can stand in for nothing else; it is never registered process-wide."""
    if not isinstance(rows, list):
        raise FormatError(f"the kernel table is a {type(rows).__name__}, not a list of rows")
    flags = target.kernels.compile_flags() if target is not None else None
    usable: dict[str, bytes] = {}
    for row in rows:
        key = row.get("key") if isinstance(row, dict) else None
        if not isinstance(key, str):
            raise FormatError(f"kernel row {str(row)[:80]!r} is malformed (no key)")
        try:
            spec = json.loads(blobs[f"kernels/{key}.json"])
            ks = KernelSource(str(spec["name"]), str(spec["source"]), int(spec["global"]), int(spec["local"]))
        except KeyError as e:
            raise FormatError(f"kernel {key!r}: its source blob or field {e} is missing") from None
        except (ValueError, TypeError, RecursionError) as e:
            raise FormatError(f"kernel {key!r} in the saved program is malformed ({e})") from None
        if ks.key != key:
            raise FormatError(f"kernel {key}: its source does not hash to its key (tampered)")
        kernel_cache.register(ks)
        entries = row.get("binaries", [])
        if not isinstance(entries, list) or not all(isinstance(b, dict) for b in entries):
            raise FormatError(f"kernel {key}: its binaries entry is malformed")
        if target is None:
            continue
        mine = kernel_cache.binary_key(ks, target.kernels, flags)
        for b in entries:
            data = blobs.get(f"kernels/{b.get('binary_key')}.bin")
            if b.get("binary_key") == mine and data is not None:
                usable[mine] = data
    return usable
