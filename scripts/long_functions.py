"""List the functions longer than a limit (default 60 lines, decorators included) in the package.

    python scripts/long_functions.py [--limit 60] [--root migx_explore] [--quiet]

Prints one line per function, longest first (`lines path:line qualified.name`), then the count.
Nested functions count on their own and inside their parent, as a reader meets them.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def long_functions(root: Path, limit: int) -> list[tuple[int, str, int, str]]:
    """(lines, path relative to the checkout, first line, qualified name) of every function over
    `limit` lines below `root`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, qualname in _functions(tree, ""):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = node.end_lineno - first + 1
            if lines > limit:
                out.append((lines, str(path.relative_to(ROOT)), first, qualname))
    return sorted(out, key=lambda r: (-r[0], r[1], r[2]))


def _functions(node: ast.AST, prefix: str):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            yield child, name
            yield from _functions(child, name + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--root", default="migx_explore")
    ap.add_argument("--quiet", action="store_true", help="print the count only")
    args = ap.parse_args(argv)
    root = (ROOT / args.root).resolve()
    if not root.is_dir():
        print(f"long_functions: no folder {args.root} under {ROOT}", file=sys.stderr)
        return 2
    rows = long_functions(root, args.limit)
    if not args.quiet:
        for lines, path, line, name in rows:
            print(f"{lines:4d} {path}:{line} {name}")
    print(f"{len(rows)} functions over {args.limit} lines in {args.root}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
