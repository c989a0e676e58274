"""Rewrite relative imports that cross from one layer into another as absolute imports.

A relative `from ...compiler.errors import X` in migx_explore/gpu/ hides which layer it reaches
into; the layering rules (tests/test_layers.py) want that visible. This script turns every relative
import whose target lies in another part (compiler, gpu, or the explorer package itself) into
`from migx_explore.<part>... import X`; imports inside one part stay relative.

Usage: python scripts/absolute_imports.py [--check]   (--check: list what would change, exit 1 if any)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the three layers; folders are import paths, so a file's module name is its path from ROOT
PARTS = ("migx_explore.compiler", "migx_explore.gpu", "migx_explore")


def part_of(module: str) -> str:
    """The top-level part a dotted module name belongs to (the longest matching package)."""
    for name in sorted(PARTS, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return name
    raise ValueError(f"{module} is outside the project")


def module_name(path: Path) -> tuple[str, bool]:
    """(dotted module name, whether the file is a package __init__)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
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
    for path in sorted((ROOT / "migx_explore").rglob("*.py")):
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
