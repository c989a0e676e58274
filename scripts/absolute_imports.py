"""Rewrite relative imports that cross a mapped package boundary as absolute imports.

setup.py installs compiler/ as migx_explore.compiler and gpu/ as migx_explore.gpu, so a relative
`from ...compiler.errors import X` in gpu/ resolves only once installed, and a reader (or a tool)
cannot follow it from the source tree. This script turns every relative import whose target lies
in another top-level part (compiler, gpu, or the explorer package itself) into
`from migx_explore.<part>... import X`; imports inside one part stay relative.

Usage: python scripts/absolute_imports.py [--check]   (--check: list what would change, exit 1 if any)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# source folder -> installed package (setup.py's MAPPED plus the explorer package itself)
PARTS = {"compiler": "migx_explore.compiler", "gpu": "migx_explore.gpu", "migx_explore": "migx_explore"}


def part_of(module: str) -> str:
    """The top-level part a dotted module name belongs to (the longest matching package)."""
    for name in sorted(PARTS.values(), key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return name
    raise ValueError(f"{module} is outside the project")


def module_name(path: Path) -> tuple[str, bool]:
    """(installed dotted name, whether the file is a package __init__)."""
    rel = path.relative_to(ROOT).with_suffix("")
    top, *rest = rel.parts
    parts = PARTS[top].split(".") + rest
    is_init = parts[-1] == "__init__"
    if is_init:
        parts = parts[:-1]
    return ".".join(parts), is_init


def rewrites(path: Path) -> list[tuple[int, str, str]]:
    """(line, old text, new text) for each boundary-crossing relative import in `path`."""
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    me, is_init = module_name(path)
    package = me.split(".") if is_init else me.split(".")[:-1]
    lines = source.splitlines()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        if node.level - 1 > len(package):
            raise SystemExit(f"{path}:{node.lineno}: relative import climbs above the project")
        base = package[: len(package) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
        if part_of(target) == part_of(me):
            continue
        line = lines[node.lineno - 1]
        old = "from " + "." * node.level + (node.module or "") + " import"
        if old not in line:
            raise SystemExit(f"{path}:{node.lineno}: cannot find {old!r} on the import's first line")
        out.append((node.lineno, old, f"from {target} import"))
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = 0
    for top in PARTS:
        for path in sorted((ROOT / top).rglob("*.py")):
            found = rewrites(path)
            if not found:
                continue
            lines = path.read_text().splitlines(keepends=True)
            for lineno, old, new in found:
                print(f"{path.relative_to(ROOT)}:{lineno}: {old} -> {new}")
                lines[lineno - 1] = lines[lineno - 1].replace(old, new, 1)
            changed += len(found)
            if not check:
                path.write_text("".join(lines))
    print(f"{changed} import(s) {'to rewrite' if check else 'rewritten'}")
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
