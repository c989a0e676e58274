"""Kernels that travel with a saved program: generated source (always) plus the compiled binary for
every arch this machine has built (cached), so the target machine either reuses a binary for its
own arch and toolchain or compiles from source (migx_explore.portable writes/reads them)."""

from __future__ import annotations

import json
from typing import Any

from ..compiler.errors import FormatError
from ..compiler.ir import Program
from . import kernel_cache
from .codegen.common import KernelSource


def export_kernels(program: Program, target: Any = None) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """(manifest rows, blobs): sources for every kernel the program launches, and binaries for
    `target`'s arch when it has built them (in memory or in the disk cache)."""
    rows, blobs = [], {}
    flags = target.compile_flags() if target is not None else None
    for key in kernel_cache.kernel_keys(program):
        ks = kernel_cache.source_for(key)
        row: dict[str, Any] = {"key": key, "name": ks.name, "global": ks.global_size, "local": ks.local_size,
                               "binaries": []}
        blobs[f"kernels/{key}.json"] = json.dumps({"name": ks.name, "source": ks.source, "global": ks.global_size,
                                                   "local": ks.local_size}).encode()
        if target is not None:
            bk = kernel_cache.binary_key(ks, target, flags)
            data = kernel_cache.cached_binary(bk)
            if data is not None:
                blobs[f"kernels/{bk}.bin"] = data
                row["binaries"].append({"arch": target.arch, "compiler": target.compiler_id(), "binary_key": bk})
        rows.append(row)
    return rows, blobs


def import_kernels(rows: list[dict[str, Any]], blobs: dict[str, bytes]) -> int:
    """Register every kernel source and pre-seed the binary cache; returns binaries seeded."""
    seeded = 0
    for row in rows:
        try:
            spec = json.loads(blobs[f"kernels/{row['key']}.json"])
            ks = KernelSource(spec["name"], spec["source"], int(spec["global"]), int(spec["local"]))
        except (KeyError, ValueError, TypeError) as e:
            raise FormatError(f"kernel {row.get('key')!r} in the saved program is malformed ({e})") from None
        if ks.key != row["key"]:
            raise FormatError(f"kernel {row['key']}: its source does not hash to its key (tampered)")
        kernel_cache.register(ks)
        for b in row.get("binaries", []):
            data = blobs.get(f"kernels/{b['binary_key']}.bin")
            if data is not None:
                kernel_cache.seed_binary(b["binary_key"], data)
                seeded += 1
    return seeded
