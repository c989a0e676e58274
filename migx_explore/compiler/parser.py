"""Parser for the text form written by `printer` (see its docstring for the grammar).

Shapes of ordinary instructions are recomputed from the op's shape rule and checked against the
printed shape, so a hand-written IR test that gets a shape wrong fails with the line number.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from . import dtypes
from .errors import MigxError, ParseError
from .ir import Literal, Module, Program
from .limits import check_lens
from .op import Op, get_spec
from .shape import DynDim, Shape

_HEADER = re.compile(r'^module:\s*"([^"]+)"\s*(bypass)?\s*$')
_MOD_REF = re.compile(r"\),\s*\[([^\]]*)\]\s*->")


class ValueReader:
    """Generic nested-value reader: {a, b} and (a, b) -> tuples, "x" -> str, atoms -> str."""

    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def peek(self) -> str:
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise ValueError(f"expected {ch!r} at column {self.i + 1}, found {self.peek() or 'end of line'!r}")
        self.i += 1

    def value(self) -> Any:
        c = self.peek()
        if c in "{(":
            close = "}" if c == "{" else ")"
            self.i += 1
            items = []
            if self.peek() == close:
                self.i += 1
                return tuple(items)
            while True:
                items.append(self.value())
                c2 = self.peek()
                if c2 == ",":
                    self.i += 1
                    continue
                self.expect(close)
                return tuple(items)
        if c == '"':
            self.i += 1
            out = []
            while self.i < len(self.s) and self.s[self.i] != '"':
                if self.s[self.i] == "\\":
                    self.i += 1
                out.append(self.s[self.i])
                self.i += 1
            self.expect('"')
            return _Quoted("".join(out))
        start = self.i
        depth = 0
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch == "[":
                depth += 1
            elif ch == "]":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (ch in ",{}()=" or ch.isspace()):
                break
            self.i += 1
        tok = self.s[start : self.i]
        if not tok:
            raise ValueError(f"expected a value at column {start + 1}")
        return tok


class _Quoted(str):
    """A string that was quoted in the source (never converted to a number)."""


def atom_value(tok: Any) -> Any:
    if isinstance(tok, tuple):
        return tuple(atom_value(t) for t in tok)
    if isinstance(tok, _Quoted):
        return str(tok)
    if tok == "true":
        return True
    if tok == "false":
        return False
    if tok == "none":
        return None
    try:
        return int(tok)
    except ValueError:
        pass
    try:
        return float(tok)
    except ValueError:
        return tok


def _shape_from(v: tuple) -> Shape:
    if not v:
        raise ValueError("empty shape")
    if v[0] == "tuple_type":
        return Shape.tuple_of([_shape_from(s) for s in v[1]])
    if v[0] == "dynamic":
        dims = []
        for d in v[2]:
            if isinstance(d, str) and d.startswith("["):
                body = d[1:-1]
                rng, _, opt = body.partition(":")
                lo, hi = rng.split("..")
                opts = tuple(int(x) for x in opt.split(",")) if opt else ()
                dims.append(DynDim(int(lo), int(hi), opts))
            else:
                dims.append(DynDim(int(d), int(d)))
        return Shape.dynamic(dtypes.dtype(v[1]).name, dims)
    t = dtypes.dtype(v[0]).name
    lens = tuple(int(x) for x in v[1]) if len(v) > 1 else ()
    strides = tuple(int(x) for x in v[2]) if len(v) > 2 else None
    return Shape.of(t, lens, strides)


def parse_shape(text: str) -> Shape:
    r = ValueReader("{" + text + "}")
    return _shape_from(atom_value(r.value()))


def _split_top(text: str, sep: str = ",") -> list[str]:
    out, depth, cur, quote = [], 0, [], False
    for ch in text:
        if ch == '"':
            quote = not quote
        elif not quote and ch in "{([":
            depth += 1
        elif not quote and ch in "})]":
            depth -= 1
        if ch == sep and depth == 0 and not quote:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur or out:
        out.append("".join(cur))
    return [x.strip() for x in out]


def _matching(text: str, start: int) -> int:
    """Index of the bracket closing the one at `start` (quotes respected)."""
    pairs = {"[": "]", "(": ")", "{": "}"}
    stack, quote = [], False
    for k in range(start, len(text)):
        ch = text[k]
        if ch == '"':
            quote = not quote
        if quote:
            continue
        if ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return k
    raise ValueError(f"unbalanced {text[start]!r}")


def parse_attrs(op_name: str, text: str) -> dict[str, Any]:
    spec = get_spec(op_name)
    attrs: dict[str, Any] = {}
    for part in _split_top(text):
        if not part:
            continue
        key, eq, raw = part.partition("=")
        key = key.strip()
        if not eq:
            raise ValueError(f"attribute {part!r} has no '='")
        a = spec.attr_index.get(key)
        val = atom_value(ValueReader(raw.strip()).value())
        if a is not None and a.kind == "shape" and isinstance(val, tuple):
            val = _shape_from(val)
        attrs[key] = val
    return attrs


def _literal_values(body: str, shape: Shape, allow_elided: bool, literals=None) -> np.ndarray:
    inner = body.strip()[1:-1].strip()
    npd = dtypes.np_dtype(shape.type)
    if inner.startswith("#"):
        key = inner[1:]
        if literals is None or key not in literals:
            raise ValueError(f"literal reference #{key} has no data (saved-file form needs its literal table)")
        arr = np.asarray(literals[key])
        if arr.dtype != npd or arr.size != shape.elements():
            raise ValueError(f"literal #{key} holds {arr.size} x {arr.dtype}, but its shape is {shape}")
        return arr.reshape(shape.lens)
    if inner == "...":
        if not allow_elided:
            raise ValueError(
                "literal values are elided ('{ ... }'); print with full=True to round-trip, "
                "or parse with allow_elided=True to fill zeros"
            )
        check_lens(shape.lens, npd.itemsize, "an elided literal")
        return np.zeros(shape.lens, npd)
    fast = _plain_values(inner, shape, npd)
    if fast is not None:
        return fast
    toks = [t for t in _split_top(inner)] if inner else []
    vals = [atom_value(t) for t in toks]
    if shape.type == "bool":
        arr = np.array([bool(v) for v in vals], dtype=np.bool_)
    else:
        arr = np.array(
            [float(v) if isinstance(v, str) else v for v in vals],
            dtype=np.float64 if dtypes.dtype(shape.type).is_float else None,
        )
        arr = arr.astype(npd)
    n = shape.elements()
    if arr.size != n:
        raise ValueError(f"literal has {arr.size} values but its shape {shape} holds {n}")
    return arr.reshape(shape.lens)


def _plain_values(inner: str, shape: Shape, npd: np.dtype) -> np.ndarray | None:
    """A flat comma-separated list of numbers / true / false converted by numpy in one go (the
    general path below tokenizes character by character); None to fall back to it."""
    if not inner or any(c in inner for c in '"{}()[]#'):
        return None
    toks = [t.strip() for t in inner.split(",")]
    try:
        if shape.type == "bool":
            if not set(toks) <= {"true", "false"}:
                return None
            arr = np.array([t == "true" for t in toks], dtype=np.bool_)
        else:
            # ml_dtypes' narrow types (int4, float8, ...) do not parse strings: go through a wide type.
            wide = (
                np.float64
                if dtypes.dtype(shape.type).is_float
                else (np.int64 if shape.type in dtypes.LOW_PRECISION else npd)
            )
            arr = np.array(toks).astype(wide).astype(npd)
    except (ValueError, OverflowError, TypeError):
        return None
    if arr.size != shape.elements():
        raise ValueError(f"literal has {arr.size} values but its shape {shape} holds {shape.elements()}")
    return arr.reshape(shape.lens)


def parse(text: str, *, allow_elided: bool = False, literals=None) -> Program:
    """Parse a printed program (one or more `module:` blocks; a headerless text is module main).

    `literals` maps keys to arrays for the saved-file form, where literals print as `{#key}`."""
    lines = text.splitlines()
    blocks: list[tuple[str, bool, list[tuple[int, str]]]] = []
    for no, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _HEADER.match(s)
        if m:
            blocks.append((m.group(1), bool(m.group(2)), []))
            continue
        if not blocks:
            blocks.append(("main", False, []))
        blocks[-1][2].append((no, s))
    if not blocks:
        raise ParseError("empty program text")
    names = [b[0] for b in blocks]
    if len(set(names)) != len(names):
        raise ParseError(f"module defined twice: {sorted(n for n in names if names.count(n) > 1)}")
    if "main" not in names:
        raise ParseError('no module: "main" in program text')

    p = Program()
    for name, _, _ in blocks:
        if name != "main":
            p.create_module(name)
    by_name = {b[0]: b for b in blocks}
    deps = {
        b[0]: [r.strip() for _, s in b[2] for m in _MOD_REF.finditer(s) for r in m.group(1).split(",")] for b in blocks
    }
    done: set[str] = set()
    visiting: set[str] = set()

    def build(name: str) -> None:
        if name in done:
            return
        if name in visiting:
            raise ParseError(f"module {name!r} refers to itself through its submodules")
        visiting.add(name)
        for d in deps[name]:
            if d not in by_name:
                line = next(no for no, s in by_name[name][2] if d in s)
                raise ParseError(f"reference to undefined module {d!r}", line)
            build(d)
        _, bypass, body = by_name[name]
        mod = p.modules[name]
        mod.bypass = bypass
        _parse_module(mod, body, allow_elided, literals)
        visiting.discard(name)
        done.add(name)

    try:
        for name in names:
            build(name)
    except RecursionError:
        raise ParseError("submodules are nested too deeply") from None
    return p


def _parse_module(mod: Module, body: list[tuple[int, str]], allow_elided: bool, literals=None) -> None:
    env: dict[str, Any] = {}
    for no, s in body:
        try:
            var, eq, rhs = s.partition(" = ")
            if not eq:
                raise ValueError("expected '<name> = <instruction>'")
            var = var.strip()
            if var in env:
                raise ValueError(f"name {var} is defined twice")
            env[var] = _parse_instruction(mod, rhs.strip(), env, allow_elided, literals)
        except ParseError:
            raise
        except (MigxError, ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
            raise ParseError(f"module {mod.name}: {e}", no, s) from None
        except RecursionError:
            raise ParseError(f"module {mod.name}: nested too deeply", no, s[:200]) from None


def _parse_instruction(mod: Module, rhs: str, env: dict, allow_elided: bool, literals=None):
    def lookup(arg: str):
        if arg not in env:
            raise ValueError(f"unknown name {arg!r} (names must be defined before use)")
        return env[arg]

    if rhs.startswith("@param:"):
        return _parse_param(mod, rhs)
    if rhs.startswith("@literal"):
        return _parse_literal(mod, rhs, allow_elided, literals)
    if rhs.startswith("@return"):
        inner = rhs[rhs.index("(") + 1 : _matching(rhs, rhs.index("("))]
        args = [lookup(a) for a in _split_top(inner) if a]
        return mod.add_return(args)
    return _parse_op(mod, rhs, lookup)


def _parse_param(mod: Module, rhs: str):
    pname, _, shape_txt = rhs[len("@param:") :].partition(" -> ")
    pname = pname.strip()
    if pname in mod.param_names():
        raise ValueError(f"parameter {pname!r} is declared twice")
    # Linked at the end (not via add_parameter) so the text order is kept exactly.
    return mod._link_before(mod._new(Op("@param", name=pname), (), (), parse_shape(shape_txt)), mod.end())


def _parse_literal(mod: Module, rhs: str, allow_elided: bool, literals):
    # Fast path: a literal body holds only numbers, so the last "->" starts the shape; this
    # avoids a per-character bracket scan of multi-megabyte weight literals.
    body, arrow, shape_txt = rhs[len("@literal") :].rpartition("->")
    if not (body.strip().startswith("{") and body.strip().endswith("}")):
        end = _matching(rhs, len("@literal"))
        body = rhs[len("@literal") : end + 1]
        _, arrow, shape_txt = rhs[end + 1 :].partition("->")
    if not arrow:
        raise ValueError("literal needs '-> <shape>'")
    shape = parse_shape(shape_txt.strip())
    data = _literal_values(body, shape, allow_elided, literals)
    return mod._link_before(mod._new(Op("@literal"), (), (), shape, Literal(data, shape)), mod.end())


def _parse_op(mod: Module, rhs: str, lookup):
    """`name[attrs](args)[, {modules}] -> shape`; the printed shape must be the computed one."""
    k = 0
    while k < len(rhs) and rhs[k] not in "[(":
        k += 1
    op_name = rhs[:k].strip()
    attrs: dict[str, Any] = {}
    if k < len(rhs) and rhs[k] == "[":
        end = _matching(rhs, k)
        attrs = parse_attrs(op_name, rhs[k + 1 : end])
        k = end + 1
    if k >= len(rhs) or rhs[k] != "(":
        raise ValueError(f"expected '(' after {op_name}")
    end = _matching(rhs, k)
    args = [lookup(a) for a in _split_top(rhs[k + 1 : end]) if a]
    rest = rhs[end + 1 :].strip()
    mods = []
    if rest.startswith(","):
        rest = rest[1:].strip()
        close = _matching(rest, 0)
        for ref in _split_top(rest[1:close]):
            if ref not in mod.program.modules:
                raise ValueError(f"unknown module {ref!r}")
            mods.append(mod.program.modules[ref])
        rest = rest[close + 1 :].strip()
    if not rest.startswith("->"):
        raise ValueError("expected '-> <shape>' after the arguments")
    printed = parse_shape(rest[2:].strip())
    ins = mod._link_before(mod._new(Op(op_name, attrs), args, mods), mod.end())
    if ins.shape != printed:
        mod.remove_instruction(ins)
        raise ValueError(f"printed shape {printed} differs from computed {ins.shape}")
    return ins


# The bracket and value helpers, for readers of other text forms (compiler/migraphx_text.py).
split_top = _split_top
matching_bracket = _matching
literal_values = _literal_values
