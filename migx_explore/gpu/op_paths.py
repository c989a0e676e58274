"""The path of an op end to end: where each piece lives, and which ones are missing.

An op is one declaration, its `defop` (compiler/op.py), plus the code that declaration names.
The pieces (docs/adding_an_op.md is the checklist):
  importer   an ONNX handler in compiler/onnx that emits the op (found by reading the handlers'
             source for the op's name), or the defop's `made_by`: the registered pass that creates
             it, a dotted path to the function that does, or "ir" (IR text and the Python API only).
             Builtins, target ops (gpu::, hip::) and the lowering's buffers need none.
  shape      the shape rule
  reference  the numpy reference compute (builtins have none)
  gpu        the declared GpuCode and what implements it here: a generator for a kernel family,
             elementwise code for a pointwise op, or the reason for a host / no-data op.

`python -m migx_explore.gpu.op_paths [op ...]` prints the path of each op (every op with a missing
piece when no name is given); tests/test_op_paths.py fails on any missing piece, naming it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import pkgutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migx_explore.compiler import onnx as onnx_importer
from migx_explore.compiler.op import STRUCTURAL_OPS, contract_problems, get_spec, registered_ops
from migx_explore.compiler.pass_infra import pass_registry

from .codegen import GENERATORS, LIBRARY_FAMILIES, gpu_code_problems

PIECES = ("importer", "shape", "reference", "gpu")


@dataclass(frozen=True)
class OpPath:
    """Where each piece of one op lives (`found`) and what each missing one needs (`missing`)."""

    name: str
    declared_at: str
    found: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [f"{self.name}  (defop at {self.declared_at or 'unknown'})"]
        for piece in PIECES:
            if piece in self.missing:
                lines.append(f"  {piece:<9} MISSING: {self.missing[piece]}")
            else:
                lines.append(f"  {piece:<9} {self.found.get(piece, '')}")
        return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def importer_sites() -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """Where the ONNX handlers name ops: ({op name: file:line} for string constants, ((prefix,
    file:line), ...) for names built by an f-string such as f"scatter_{reduction}"). A handler
    that returns the op (`return ctx.add("op", ...)`) is preferred to one that only uses it on
    the way (Multinomial's prefix_scan_sum), so the site shown is the one to copy."""
    exact: dict[str, str] = {}
    returned: dict[str, str] = {}
    prefixes: list[tuple[str, str]] = []
    for info in pkgutil.iter_modules(onnx_importer.__path__, onnx_importer.__name__ + "."):
        module = importlib.import_module(info.name)
        short = short_path(inspect.getsourcefile(module) or info.name)
        tree = ast.parse(inspect.getsource(module))
        # ONNX attribute names (ctx.attr("group"), `a.name == "group"`) and docstrings name no op.
        skip = {id(c) for n in ast.walk(tree) if _names_no_op(n) for c in ast.walk(n)}
        results = {id(n.value.args[0]) for n in ast.walk(tree) if _returns_a_call(n)}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                (returned if id(node) in results else exact).setdefault(node.value, f"{short}:{node.lineno}")
            elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                prefixes.append((str(node.values[0].value), f"{short}:{node.lineno}"))
    return {**exact, **returned}, tuple(prefixes)


def _returns_a_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Return) and isinstance(node.value, ast.Call) and bool(node.value.args)


ATTRIBUTE_READS = ("attr", "has_attr", "attr_choice", "bad_attr")  # NodeContext methods taking an attribute name


def _names_no_op(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ATTRIBUTE_READS


def _importer(name: str) -> tuple[str | None, str | None]:
    """(where it is found, what is missing) for the importer piece."""
    spec = get_spec(name)
    if spec.has("builtin") or "::" in name or name in STRUCTURAL_OPS:
        return "none needed (a builtin, a target op or a buffer the lowering makes)", None
    if spec.made_by:
        problem = _made_by_problem(spec.made_by)
        return (None, f"made_by={spec.made_by!r}: {problem}") if problem else (f"made by {spec.made_by}", None)
    exact, prefixes = importer_sites()
    if name in exact:
        return f"ONNX handler at {exact[name]}", None
    for prefix, where in prefixes:
        if len(prefix) > 1 and name.startswith(prefix):
            return f'ONNX handler at {where} (f"{prefix}...")', None
    return None, (
        "no ONNX handler in compiler/onnx emits it: add one (@register('<OnnxOp>') in "
        "migx_explore/compiler/onnx/parse_<family>.py, calling ctx.add('" + name + "', ...)), or give its defop "
        "made_by='<the pass that creates it>' (or 'ir' when only IR text and the API make it)"
    )


def _made_by_problem(made_by: str) -> str | None:
    if made_by == "ir" or made_by in pass_registry():
        return None
    if "." in made_by:  # a dotted path to the function that creates it
        module, _, attr = made_by.rpartition(".")
        try:
            if callable(getattr(importlib.import_module(module), attr, None)):
                return None
        except ImportError:
            pass
        return "names no importable function"
    return f"not a registered pass; known passes: {', '.join(sorted(pass_registry()))}"


def short_path(path: str) -> str:
    """A source path from the project's top folders on (compiler/..., gpu/...), else as given."""
    for top in ("/compiler/", "/gpu/", "/migx_explore/", "/tests/"):
        if top in path:
            return top[1:] + path.rsplit(top, 1)[1]
    return path


def _where(fn: Any) -> str:
    fn = inspect.unwrap(fn)
    try:
        path = inspect.getsourcefile(fn) or "?"
        line = inspect.getsourcelines(fn)[1]
    except (TypeError, OSError):
        return getattr(fn, "__qualname__", repr(fn))
    return f"{short_path(path)}:{line} ({getattr(fn, '__qualname__', '')})"


def _called_generator(gen: Any) -> Any:
    """The function a table row `lambda r: lrn_kernel(r.inner, r.shapes)` calls (the generator a
    reader wants to open), or `gen` itself when it is a named function."""
    if getattr(gen, "__name__", "") != "<lambda>":
        return gen
    scope = getattr(gen, "__globals__", {})
    called = (scope.get(n) for n in gen.__code__.co_names)
    return next((f for f in called if inspect.isfunction(f)), gen)


def _gpu(name: str) -> str:
    code = get_spec(name).gpu
    if code is None:
        return ""
    if code.kind == "kernel":
        if code.detail in LIBRARY_FAMILIES:
            return f"kernel family {code.detail!r}: {LIBRARY_FAMILIES[code.detail]}"
        gen = GENERATORS.get(code.detail)
        real = _called_generator(gen) if gen is not None else None
        return f"kernel family {code.detail!r}, generator {_where(real) if real else '?'}"
    if code.kind == "pointwise":
        return f"pointwise {code.detail!r}" if code.detail else "pointwise (row in gpu/codegen/expr.py ROWS)"
    return f"{code.kind}: {code.detail}"


def op_path(name: str) -> OpPath:
    """Every piece of op `name`: where it lives, or what to add."""
    spec = get_spec(name)
    path = OpPath(name, short_path(spec.origin))
    found, missing = path.found, path.missing
    imp, imp_missing = _importer(name)
    if imp_missing:
        missing["importer"] = imp_missing
    else:
        found["importer"] = imp or ""
    contract = contract_problems(spec)
    for piece, marker, where in (
        ("shape", "no shape rule", spec.shape),
        ("reference", "no reference compute", spec.compute),
    ):
        problem = next((p for p in contract if p.startswith(marker)), None)
        if problem:
            missing[piece] = problem
        else:
            found[piece] = _where(where) if where is not None else "none needed (a builtin)"
    gpu_problems = [p for p in contract if not p.startswith(("no shape rule", "no reference compute"))]
    gpu_problems += gpu_code_problems(spec)
    if gpu_problems:
        missing["gpu"] = "; ".join(gpu_problems)
    else:
        found["gpu"] = _gpu(name)
    return path


def project_ops() -> list[str]:
    """Registered ops defined in the compiler's or the GPU target's source (not by a notebook cell or a test)."""
    import migx_explore.compiler
    import migx_explore.gpu

    roots = tuple(str(Path(m.__file__).parent) + os.sep for m in (migx_explore.compiler, migx_explore.gpu))
    return [n for n in registered_ops() if not get_spec(n).origin or get_spec(n).origin.startswith(roots)]


def incomplete_ops(names: list[str] | None = None) -> list[OpPath]:
    """The path of every op (of `names`, default the project's own) that misses a piece."""
    return [p for p in map(op_path, project_ops() if names is None else names) if p.missing]


def main(argv: list[str]) -> int:
    from migx_explore.compiler.errors import MigxError

    try:
        paths = [op_path(n) for n in argv] if argv else incomplete_ops()
    except MigxError as e:  # an unknown op name: one line, with the close names
        print(f"op_paths: error: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p.describe())
    if not argv:
        print(f"{len(paths)} of {len(project_ops())} ops miss a piece")
    return 1 if any(p.missing for p in paths) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
