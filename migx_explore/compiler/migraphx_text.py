"""Reader for the programs MIGraphX prints (`migraphx-driver read/compile`, `std::cout << program`,
and the module dumps of MIGRAPHX_TRACE_COMPILE), every period since 2018, into our IR.

The grammar (docs/migraphx_traces.md, from MIGraphX's src/program.cpp, module.cpp, instruction.cpp,
shape.cpp):

    module: "<name>"                                   (absent before 2021: the text is module main)
    <name> = <op>[<attrs>][{<literal>}][(<in>,<in>)][, [<mod>, <mod>]][ -> <shape>][, target_id=<n>][ # <sym>, <sym>]

Instructions keep MIGraphX's op names. An op we implement, with attributes we know, whose printed
shape our shape rule reproduces, becomes our op; anything else (gpu::code_object, hip::*, an op
of a newer MIGraphX, an attribute we lack) becomes an `OpaqueOp`: it prints back as MIGraphX wrote
it, draws, diffs and counts, and does not evaluate. What the reader cannot read is a `Problem`
with its line number, never an exception: the instruction is skipped (or an undefined input
becomes a placeholder parameter of that name) and reading goes on.

Our IR keeps every input inside its own module, while MIGraphX's If/Loop bodies read values of
the module around them (`If_0_if:@0 = identity(main:@3)`): such a value becomes a parameter of
the submodule named as MIGraphX printed it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtypes
from .errors import MigxError
from .instruction import Literal
from .ir import Instruction, Module, Program
from .migraphx_shape import parse_migraphx_shape
from .op import Op, OpSpec, compute_shape, get_spec
from .parser import literal_values, matching_bracket, parse_attrs, split_top
from .shape import Shape

_HEADER = re.compile(r'^module:\s*"(.*)"\s*(bypass)?\s*$')
_INSTR = re.compile(r"^(\S+) = (.+)$")
_PARAM = re.compile(r"^(.+?) = (@param:.*)$")  # parameter names are printed verbatim, spaces too
_TARGET_ID = re.compile(r",\s*target_id=(\d+)\s*$")
_PERF = re.compile(r":\s*[-+0-9.eE]+\s*ms,\s*[-+0-9.eE]+\s*%\s*$")  # a perf report's `: 0.01ms, 1%`
# shape::type_t in enum order: convert[target_type=N] prints the index (src/include/migraphx/shape.hpp)
TYPE_ENUM = (
    "bool_type half_type float_type double_type uint8_type int8_type uint16_type int16_type int32_type "
    "int64_type uint32_type uint64_type fp8e4m3fnuz_type fp8e4m3fn_type fp8e5m2_type bf16_type "
    "fp8e5m2fnuz_type tuple_type fp4x2_type"
).split()


# A literal whose values cannot be held (a tuple or dynamic shape, a payload not in {...}).
OPAQUE_LITERAL = "migraphx::literal"


def _no_shape_rule(op: Op, inputs: list[Shape], mods: list) -> Shape:
    raise MigxError(f"{op.name} was read from MIGraphX text; its shape is the printed one (no shape rule)")


# Not registered: an opaque op is no op of ours, so the op contract and the op list never see it.
OPAQUE_SPEC = OpSpec(
    "migraphx::opaque",
    _no_shape_rule,
    None,
    traits=frozenset({"not_context_free"}),
    doc="an instruction read from MIGraphX text that migx-explore does not evaluate",
)


class OpaqueOp(Op):
    """A MIGraphX op kept as printed: its name, its attribute text, no compute."""

    __slots__ = ("printed",)

    def __init__(self, name: str, attr_text: str = ""):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "spec", OPAQUE_SPEC)
        attrs = []
        for part in split_top(attr_text) if attr_text else ():
            key, eq, raw = part.partition("=")
            if part:
                attrs.append((key.strip(), raw.strip() if eq else ""))
        object.__setattr__(self, "_attrs", tuple(attrs))
        object.__setattr__(self, "printed", name + (f"[{attr_text}]" if attr_text else ""))
        object.__setattr__(self, "_hash", hash(("opaque", self.printed)))

    def non_default_attrs(self) -> list[tuple[str, Any]]:
        return list(self._attrs)

    def with_(self, **kw: Any) -> Op:
        raise MigxError(f"{self.name} was read from MIGraphX text and cannot be rewritten")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueOp) and self.printed == other.printed

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        text = self.printed[len(self.name) + 1 : -1] if self.printed != self.name else ""
        return (OpaqueOp, (self.name, text))


def is_opaque(op: Op) -> bool:
    return isinstance(op, OpaqueOp)


@dataclass
class Problem:
    """A line the reader could not read as MIGraphX wrote it, and what it did instead."""

    line: int
    message: str
    text: str = ""

    def __str__(self) -> str:
        shown = self.text if len(self.text) <= 100 else self.text[:97] + "..."
        return f"line {self.line}: {self.message}" + (f": {shown}" if shown else "")


@dataclass
class ReadProgram:
    """A program read from MIGraphX text, with what could not be read."""

    program: Program
    problems: list[Problem] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)  # instruction id -> the name MIGraphX printed
    symbols: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id -> debug symbols
    opaque: Counter = field(default_factory=Counter)  # op name -> instructions kept opaque
    unnamed: int = 0  # inputs printed `?` (values of an outer module in a module printed alone)
    first_line: int = 0
    last_line: int = 0


def read_program(text: str | Sequence[tuple[int, str]], *, cache: dict | None = None) -> ReadProgram:
    """Read a printed program: a text, or (line number, line) pairs cut from a log. Never raises
    on bad text; what it could not read is in `.problems`. `cache`: a dict kept across the
    programs of one log (literals, shapes and ops read once)."""
    lines = list(enumerate(text.splitlines(), 1)) if isinstance(text, str) else list(text)
    return _Reader(cache if cache is not None else {}).read(lines)


def is_instruction_line(line: str) -> bool:
    m = _INSTR.match(line.strip())
    if m is None:
        return _PARAM.match(line.strip()) is not None
    rhs = m.group(2)
    return rhs.startswith("@") or bool(re.match(r"[A-Za-z_][\w:]*[\[(]|[A-Za-z_][\w:]* ->|[A-Za-z_][\w:]*$", rhs))


def header_name(line: str) -> str | None:
    m = _HEADER.match(line.strip())
    return m.group(1) if m else None


class _Reader:
    def __init__(self, cache: dict):
        # Shared by the reads of one log: its passes print the same lines again and again.
        self.literals = cache.setdefault("literals", {})
        self.shapes: dict[str, Shape] = cache.setdefault("shapes", {})
        self.ops: dict[tuple, Op | None] = cache.setdefault("ops", {})
        self.parts: dict[str, tuple] = cache.setdefault("parts", {})  # line right of ` = ` -> its pieces
        self.p = Program(empty=True)
        self.out = ReadProgram(self.p)
        self.env: dict[str, dict[str, Instruction]] = {}  # module -> printed name -> instruction
        self.everywhere: dict[str, Instruction] = {}  # printed name -> instruction, all modules
        self.scopes: dict[int, str] = {}

    def read(self, lines: list[tuple[int, str]]) -> ReadProgram:
        blocks: list[tuple[str, list[tuple[int, str]]]] = []
        for no, raw in lines:
            s = raw.strip()
            if not s:
                continue
            name = header_name(s)
            if name is not None:
                if any(b[0] == name for b in blocks):
                    self.problem(no, f"module {name!r} is printed twice; the second copy is skipped")
                    blocks.append(("", []))
                else:
                    blocks.append((name, []))
                continue
            if not blocks:
                blocks.append(("main", []))
            blocks[-1][1].append((no, s))
        if lines:
            self.out.first_line, self.out.last_line = lines[0][0], lines[-1][0]
        blocks = [b for b in blocks if b[0]]
        if not any(b[0] == "main" for b in blocks):
            blocks.insert(0, ("main", []))
        for name, _ in blocks:
            self.p.modules[name] = Module(name, self.p)
            self.env[name] = {}
        for name, body in blocks:
            mod = self.p.modules[name]
            for no, s in body:
                try:
                    self.line(mod, no, s)
                except (MigxError, ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
                    self.problem(no, f"module {name}: {e}; line skipped", s)
                except RecursionError:
                    self.problem(no, f"module {name}: nested too deeply; line skipped", s[:200])
        self.p.scopes = self.scopes
        return self.out

    def problem(self, no: int, message: str, text: str = "") -> None:
        self.out.problems.append(Problem(no, message, text))

    # ---- one instruction line -------------------------------------------------------------------
    def line(self, mod: Module, no: int, s: str) -> None:
        m = _INSTR.match(s) or _PARAM.match(s)
        if m is None:
            self.problem(no, "not an instruction line ('<name> = <instruction>'); skipped", s)
            return
        name, rhs = m.group(1), m.group(2)
        parts = self.parts.get(rhs)
        if parts is None:  # a log prints the same line once per pass: split it once
            text, symbols = _split_symbols(_PERF.sub("", rhs))
            parts = _split_shape(_TARGET_ID.sub("", text)) + (symbols,)
            if len(self.parts) < 1_000_000:
                self.parts[rhs] = parts
        body, shape_txt, symbols = parts
        env = self.env[mod.name]
        if name in env:
            self.problem(no, f"name {name} is defined twice in module {mod.name}; the second is kept as {name}'")
            name += "'"
        ins = self.instruction(mod, no, body, shape_txt)
        if ins is None:
            return
        env[name] = ins
        self.everywhere.setdefault(name, ins)
        self.out.names[ins.id] = name
        if symbols:
            self.out.symbols[ins.id] = symbols
            scope = symbol_scope(symbols)
            if scope:
                self.scopes[ins.id] = scope

    def instruction(self, mod: Module, no: int, body: str, shape_txt: str | None) -> Instruction | None:
        shape = self.shape(no, shape_txt) if shape_txt is not None else None
        if body.startswith("@param:"):
            pname = body[len("@param:") :].strip()
            return self.link(mod, Op("@param", name=pname), (), (), shape or Shape.of("float32", ()))
        if body.startswith("@literal"):
            return self.literal(mod, no, body[len("@literal") :].strip(), shape)
        k = 0
        while k < len(body) and body[k] not in "[({,":
            k += 1
        op_name = body[:k].strip()
        if not op_name:
            raise ValueError("no op name")
        attr_text, payload = "", False
        if k < len(body) and body[k] == "[":
            end = matching_bracket(body, k)
            attr_text, k = body[k + 1 : end], end + 1
        if k < len(body) and body[k] == "{":  # an op printed with a payload (@literal-like): kept in its text
            end = matching_bracket(body, k)
            attr_text, k, payload = attr_text + body[k : end + 1], end + 1, True
        inputs: list[Instruction] = []
        if k < len(body) and body[k] == "(":
            end = matching_bracket(body, k)
            inputs = [self.input(mod, no, a) for a in split_top(body[k + 1 : end]) if a]
            k = end + 1
        mods = []
        rest = body[k:].strip()
        if rest.startswith(","):
            rest = rest[1:].strip()
            if rest.startswith("["):
                close = matching_bracket(rest, 0)
                for ref in split_top(rest[1:close]):
                    if ref in self.p.modules:
                        mods.append(self.p.modules[ref])
                    elif ref:
                        self.problem(no, f"module {ref!r} is not in the text; the reference is dropped")
                rest = rest[close + 1 :].strip()
        if rest:
            self.problem(no, f"unexpected {rest[:40]!r} after the instruction; ignored")
        if op_name == "@return":
            if mod.return_instruction() is not None:
                raise ValueError("a second @return")
            return self.link(mod, Op("@return"), inputs, (), Shape.tuple_of([i.shape for i in inputs]))
        if shape is None:
            shape = Shape.of("float32", ())
            self.problem(no, f"{op_name} has no '-> <shape>'; read as float_type, {{}}, {{}}")
        op = None
        if not payload:
            key = (op_name, attr_text, tuple(i.shape for i in inputs), tuple(m.name for m in mods), shape)
            op = self.ops.get(key, False)
            if op is False and mods:  # a submodule's content is part of the shape rule: not cached
                op = self.known_op(op_name, attr_text, inputs, mods, shape)
            elif op is False:
                op = self.ops[key] = self.known_op(op_name, attr_text, inputs, mods, shape)
        if op is None:
            op = OpaqueOp(op_name, attr_text)
            self.out.opaque[op_name] += 1
        return self.link(mod, op, inputs, mods, shape)

    def known_op(self, name: str, attr_text: str, inputs, mods, shape: Shape) -> Op | None:
        """Our op when it means what MIGraphX printed (known attributes, the same shape)."""
        if name.startswith("@"):
            return None
        try:
            spec = get_spec(name)
            if spec.has("builtin"):
                return None
            attrs = _migraphx_attrs(spec, parse_attrs(name, attr_text) if attr_text else {})
            op = Op(name, attrs)
            if compute_shape(op, [i.shape for i in inputs], mods) != shape:
                return None
        except (MigxError, ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError, RecursionError):
            return None
        except Exception:  # noqa: BLE001 - a shape rule of ours meeting MIGraphX's input: keep it opaque
            return None
        return op

    def link(self, mod: Module, op: Op, inputs, mods, shape: Shape, literal: Literal | None = None) -> Instruction:
        return mod._link_before(mod._new(op, inputs, mods, shape, literal), mod.end())

    def input(self, mod: Module, no: int, name: str) -> Instruction:
        env = self.env[mod.name]
        if name in env:
            return env[name]
        outer = self.everywhere.get(name)
        if outer is None:
            outer = self.outer(name)
        if outer is None and name == "?":
            self.out.unnamed += 1  # MIGraphX prints an outer value it has no name for as `?`
            shape = Shape.of("float32", ())
        elif outer is None:
            self.problem(no, f"input {name} is not defined before its use; read as a parameter named {name}")
            shape = Shape.of("float32", ())
        else:
            shape = outer.shape
        # a value of the module around a submodule (If/Loop bodies): a parameter of that name
        ins = mod._new(Op("@param", name=name), (), (), shape)
        first = next(iter(mod), None)
        mod._link_before(ins, first if first is not None else mod.end())
        env[name] = ins
        return ins

    def outer(self, name: str) -> Instruction | None:
        """`main:@3` where main printed `@3` (or the reverse): the prefix rule changed by period."""
        mod, sep, rest = name.rpartition(":")
        if sep and mod in self.env:
            hit = self.env[mod].get(rest)
            if hit is not None:
                return hit
        return self.env.get("main", {}).get(f"main:{name}")

    def literal(self, mod: Module, no: int, body: str, shape: Shape | None) -> Instruction | None:
        if shape is None:
            raise ValueError("a literal needs '-> <shape>'")
        key = (body, shape)
        lit = self.literals.get(key)
        if lit is None:
            lit = self.literals[key] = self.literal_value(no, body, shape)
        if lit is None:
            # not `@literal`: our IR gives every @literal its values, and these have none we can hold
            op = OpaqueOp(OPAQUE_LITERAL, body)
            self.out.opaque[OPAQUE_LITERAL] += 1
            return self.link(mod, op, (), (), shape)
        return self.link(mod, Op("@literal"), (), (), shape, lit)

    def literal_value(self, no: int, body: str, shape: Shape) -> Literal | None:
        if shape.type == "tuple" or shape.dyn_dims is not None:
            return None
        inner = body.strip()[1:-1].strip() if body.startswith("{") and body.endswith("}") else None
        if inner is None:
            self.problem(no, "literal values are not in {...}; kept opaque")
            return None
        if inner == "...":
            return elided_literal(shape)
        try:
            if shape.type == "bool":
                body = (
                    "{"
                    + ", ".join("true" if t.strip() not in ("0", "false") else "false" for t in inner.split(","))
                    + "}"
                )
            return Literal(literal_values(body, shape, True), shape)
        except (MigxError, ValueError, TypeError, OverflowError) as e:
            self.problem(no, f"literal values unreadable ({e}); read as zeros")
            return elided_literal(shape)

    def shape(self, no: int, text: str) -> Shape:
        hit = self.shapes.get(text)
        if hit is not None:
            return hit
        try:
            shape = parse_migraphx_shape(text)
            if len(self.shapes) < 100_000:
                self.shapes[text] = shape
            return shape
        except (MigxError, ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
            self.problem(no, f"shape {text!r} unreadable ({e}); read as float_type, {{}}, {{}}")
            return Shape.of("float32", ())


class ElidedLiteral(Literal):
    """`@literal{ ... }`: values MIGraphX did not print. Zeros that take no memory (a view of one
    element), hashed by shape alone, so thousands of snapshots of a large model stay cheap; two
    elided literals of one shape count as the same (their values are unknown either way)."""

    __slots__ = ()

    def same_as(self, other: Literal) -> bool:
        return self is other or (isinstance(other, ElidedLiteral) and self.shape == other.shape)


def elided_literal(shape: Shape) -> Literal:
    lit = ElidedLiteral.__new__(ElidedLiteral)
    npd = dtypes.np_dtype(shape.type)
    data = np.broadcast_to(np.zeros((), npd), shape.lens)
    lit.data, lit.shape, lit._hash = data, shape, hash(("elided", shape))
    return lit


def _migraphx_attrs(spec: OpSpec, attrs: dict[str, Any]) -> dict[str, Any]:
    """MIGraphX's attribute values in our kinds: type enums by index, empty dynamic-dims lists
    (`out_dyn_dims={}`, the static case) dropped when we have no such attribute."""
    out = {}
    for k, v in attrs.items():
        a = spec.attr_index.get(k)
        if a is None:
            if v == () or v == "nullopt":
                continue
            raise ValueError(f"attribute {k} unknown to us")
        if a.kind == "type" and isinstance(v, int):
            v = TYPE_ENUM[v]
        out[k] = v
    return out


def _find_top_level(rhs: str, sep: str) -> int | None:
    """The first index of `sep` outside brackets, or None."""
    depth = 0
    for k, ch in enumerate(rhs):
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif depth <= 0 and rhs.startswith(sep, k):
            return k
    return None


def _split_symbols(rhs: str) -> tuple[str, tuple[str, ...]]:
    """The instruction and its debug symbols (after ` # ` outside brackets; names may hold '#')."""
    k = _find_top_level(rhs, " # ")
    if k is None:
        return rhs, ()
    return rhs[:k].rstrip(), tuple(s.strip() for s in rhs[k + 3 :].split(", ") if s.strip())


def _split_shape(rhs: str) -> tuple[str, str | None]:
    k = _find_top_level(rhs, " -> ")
    if k is not None:
        return rhs[:k].strip(), rhs[k + 4 :].strip()
    if rhs.endswith(" ->"):
        return rhs[:-3].strip(), ""
    return rhs.strip(), None


def symbol_scope(symbols: Iterable[str]) -> str:
    """The scope of an instruction from its debug symbols (ONNX node names): the common path of
    names like `/layer1/conv/Conv` without the node itself; '' for flat names (`Convolution28`)."""
    paths = []
    for s in symbols:
        if s.startswith("@output_"):
            continue
        parts = [p for p in s.split("/") if p]
        if len(parts) < 2:
            return ""
        paths.append(parts[:-1])
    if not paths:
        return ""
    common = paths[0]
    for p in paths[1:]:
        n = 0
        while n < min(len(common), len(p)) and common[n] == p[n]:
            n += 1
        common = common[:n]
    return "/".join(common)


__all__ = [
    "OPAQUE_LITERAL",
    "OPAQUE_SPEC",
    "OpaqueOp",
    "Problem",
    "ReadProgram",
    "TYPE_ENUM",
    "ElidedLiteral",
    "elided_literal",
    "header_name",
    "is_instruction_line",
    "is_opaque",
    "parse_migraphx_shape",
    "read_program",
    "symbol_scope",
]
