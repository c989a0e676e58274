"""Values and file-level readers for scripts/migraphx_cpp.py: the C++ tokenizer, the values the
reader computes with (ops, types, helpers, pass objects, events), the files' TEST_CASEs and helper
functions, and MIGraphX pass structs as our passes with their options."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape

MATH_CONSTANTS = {
    "M_2_PI": 2 / np.pi,
    "M_PI": np.pi,
    "M_SQRT1_2": np.sqrt(0.5),
    "M_SQRT2": np.sqrt(2.0),
    "M_2_SQRTPI": 2 / np.sqrt(np.pi),
    "M_E": np.e,
}
MATH_FUNCTIONS = {f"{ns}{name}": getattr(np, name) for ns in ("", "std::") for name in ("sqrt", "exp", "log", "tanh")}


class Unsupported(Exception):
    """A construct this reader does not understand (the case is skipped, with this message)."""


TOKEN = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<num>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fFuUlL]*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<id>[A-Za-z_][A-Za-z_0-9]*(?:::[A-Za-z_][A-Za-z_0-9]*)*)
  | (?P<op>::|->|==|!=|&&|\|\||<=|>=|[{}()\[\],;=.*&<>+\-!:?/%|^~])
""",
    re.S | re.X,
)


def tokenize(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise Unsupported(f"cannot tokenize near {text[pos : pos + 30]!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            out.append(m.group())
    return out


CPP_SCALARS = {
    "std::int8_t": "int8",
    "int8_t": "int8",
    "std::uint8_t": "uint8",
    "uint8_t": "uint8",
    "std::int32_t": "int32",
    "int32_t": "int32",
    "std::int64_t": "int64",
    "int64_t": "int64",
    "std::uint64_t": "uint64",
    "std::size_t": "uint64",
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "migraphx::half": "float16",
    "half": "float16",
    "bool": "bool",
    "migraphx::fp8::fp8e4m3fn": "float8e4m3fn",
    "fp8e4m3fn": "float8e4m3fn",
    "migraphx::fp8::fp8e4m3fnuz": "float8e4m3fnuz",
    "fp8e4m3fnuz": "float8e4m3fnuz",
}

TYPE_NAMES = {f"migraphx::shape::{t.migraphx}": t.name for t in dtypes.BY_NAME.values()}
TYPE_NAMES.update({k.replace("migraphx::shape::", "shape::"): v for k, v in list(TYPE_NAMES.items())})
for _alias, _name in (
    ("float", "float32"),
    ("half", "float16"),
    ("double", "float64"),
    ("int32", "int32"),
    ("int64", "int64"),
    ("int8", "int8"),
    ("uint8", "uint8"),
    ("bool", "bool"),
):
    TYPE_NAMES[f"migraphx::shape::{_alias}_type"] = _name


@dataclass
class MakeOp:
    name: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class TypeRef:
    name: str


@dataclass
class Scalar:
    """A typed C++ scalar (std::int8_t{0}): its literal keeps that element type."""

    value: Any
    type: str


@dataclass
class Function:
    """A helper the test file defines (a static function or a lambda) returning a module."""

    params: list[str]
    body: list[str]
    defaults: dict[str, list[str]] = field(default_factory=dict)  # param -> default's tokens
    types: dict[str, str] = field(default_factory=dict)  # param -> its C++ type's last token
    by_reference: bool = False  # a `[&]` lambda: what its body assigns to outer names stays assigned


@dataclass
class Overloads:
    """Helpers of one name (run_pass(module&) and run_pass(program&)): picked by argument kind."""

    functions: list[Function]

    def pick(self, args: list) -> Function:
        from migx_explore.compiler.ir import Module

        for f in self.functions:
            first = f.types.get(f.params[0], "") if f.params else ""
            if len(args) > len(f.params):
                continue
            if not args or not first.startswith("migraphx::"):
                return f
            if (first == "migraphx::program") == isinstance(args[0], Program) and (
                first != "migraphx::module" or isinstance(args[0], Module)
            ):
                return f
        return self.functions[-1]


@dataclass
class PassSpec:
    """A pass object of the test (`migraphx::simplify_algebra{}`): our pass name and options."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunEvent:
    """run_passes(target, passes): the target's program, its text before, and the passes."""

    program: Program
    before: str
    passes: list[PassSpec]


class _Ignored:
    """A value only other EXPECTs read (p.eval's result): nothing to transcribe."""


_IGNORED = _Ignored()


@dataclass
class OutputShapes:
    """m.get_output_shapes(): read by EXPECTs on shapes; comparing a pass's module with its copy
    from before the pass (a "does not crash, keeps the outputs" test) becomes a same_values check."""

    program: Program


@dataclass
class InstructionCount:
    """std::distance(m.begin(), m.end()) inside an EXPECT: the count after the passes, to compare."""

    program: Program
    offset: int = 0

    def __add__(self, k):
        return InstructionCount(self.program, self.offset + k)

    def __sub__(self, k):
        return InstructionCount(self.program, self.offset - k)


@dataclass
class PropertyCheck:
    """A test helper's verdict on the pass's result without an expected program (check_resize):
    `checks` like ("removes:resize", "has:gather", "same_values")."""

    program: Program
    checks: tuple[str, ...]


@dataclass
class ExpectEvent:
    """EXPECT(a == b) (or !=): both sides evaluated when the EXPECT ran."""

    sides: list[Any]
    equal: bool


class _Return(Exception):
    def __init__(self, value):
        self.value = value


def _number(tok: str) -> int | float:
    if tok[:2] in ("0x", "0X"):
        return int(tok.rstrip("uUlL"), 16)
    body = tok.rstrip("fFuUlL")
    if any(c in body for c in ".eE") or tok.endswith(("f", "F")):
        return float(body)
    return int(body)


def _generated(shape: Shape, seed: int) -> tuple:
    """generate_literal: our deterministic stand-in (conformance.generated_literal), remembered so
    the transcriber can print it as a short `{#key}` reference instead of its values."""
    from conformance import generated_literal

    data = generated_literal(shape.type, shape.lens, int(seed))
    GENERATED[(shape.type, tuple(shape.lens), data.tobytes())] = int(seed)
    return ("generated", shape, data)


GENERATED: dict[tuple, int] = {}


def _attr_dict(items: list) -> dict[str, Any]:
    out = {}
    for pair in items:
        if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str):
            raise Unsupported(f"make_op attribute {pair!r}")
        out[pair[0]] = pair[1]
    return out


# MIGraphX's test pass_op: with one input our identity; with several (a sink for several values at
# the end of a test module) our @return of them
PASS_OP = "pass_op"


def _our_op(op: MakeOp) -> Op:
    if op.name == PASS_OP:
        return Op("identity")
    attrs = {}
    for k, v in op.attrs.items():
        if isinstance(v, TypeRef):
            v = v.name
        if op.name == "pad" and k == "mode" and isinstance(v, str):
            v = v.removesuffix("_pad")  # migraphx::op::pad::constant_pad
        attrs[k] = v
    if op.name == "convert" and "target_type" not in attrs:
        attrs["target_type"] = "float16"  # MIGraphX's op::convert default (ours is float32)
    try:
        return Op(op.name, attrs)
    except Exception as e:  # noqa: BLE001 - any refusal means this case is not transcribable
        raise Unsupported(f"op {op.name}{attrs}: {e}") from None


# ---- files ------------------------------------------------------------------------------------------
def _braced_body(source: str, start: int) -> str:
    """The text from `start` (just after an opening brace) to its matching closing brace."""
    depth, i = 1, start
    while depth and i < len(source):
        depth += source[i] == "{"
        depth -= source[i] == "}"
        i += 1
    return source[start : i - 1]


def test_cases(source: str) -> list[tuple[str, str]]:
    """(name, body) of every TEST_CASE in a test file, and of every TEST_CASE_REGISTER(f<args>) of
    a `template <...> static void f()` (its body with the template parameters replaced by the
    arguments; named as MIGraphX's test driver names it, `f<args>`)."""
    out = [(m.group(1), _braced_body(source, m.end())) for m in re.finditer(r"^TEST_CASE\((\w+)\)\s*\{", source, re.M)]
    templates = {
        m.group(2): (m.group(1), m.end())
        for m in re.finditer(r"^template\s*<([^>]*)>\s*(?:static\s+)?void\s+(\w+)\(\s*\)\s*\{", source, re.M)
    }
    for m in re.finditer(r"^TEST_CASE_REGISTER\((\w+)<([^>]*)>\);", source, re.M):
        if m.group(1) not in templates:
            continue
        params_txt, start = templates[m.group(1)]
        params = [p.split()[-1] for p in params_txt.split(",") if p.strip()]
        values = [v.strip() for v in m.group(2).split(",")]
        if len(params) != len(values):
            continue
        body = _braced_body(source, start)
        for name, value in zip(params, values):
            body = re.sub(rf"\b{name}\b", value, body)
        out.append((f"{m.group(1)}<{', '.join(values)}>", body))
    return out


def run_pass_list(source: str) -> list[tuple[str, dict]] | None:
    """The passes the file's `run_pass(migraphx::module& m)` runs, in order, with their options."""
    m = re.search(r"void run_pass\(migraphx::(?:module|program)&\s*\w+([^)]*)\)\s*\{(.*?)\n\}", source, re.S)
    if not m:
        return None
    extra, body = m.group(1), m.group(2)
    # `run_pass(migraphx::program& p, migraphx::fuse_pointwise pass = {})`: `pass` names that pass
    for pm in re.finditer(r"migraphx::(\w+)\s+(\w+)\s*=\s*\{\}", extra):
        body = re.sub(rf"(?<![\w:]){pm.group(2)}(?![\w])", f"migraphx::{pm.group(1)}{{}}", body)
    passes = []
    for pm in re.finditer(r"migraphx::(\w+)\s*\{([^{}]*)\}", body):
        name, opts_txt = pm.group(1), pm.group(2).strip()
        opts = {}
        for om in re.finditer(r"\.(\w+)\s*=\s*([\w.]+)", opts_txt):
            val = om.group(2)
            opts[om.group(1)] = True if val == "true" else False if val == "false" else _number(val)
        if opts_txt and not opts:
            raise Unsupported(f"positional pass options {name}{{{opts_txt}}}")
        passes.append((name, opts))
    return passes


def file_functions(source: str) -> dict[str, Function]:
    """Static helpers returning a module or program (`static migraphx::module create_program(...)
    { ... }`), callable from the file's test cases."""
    out = {}
    pat = re.compile(
        r"^(?:template\s*<[^>]*>\s*)?(?:static\s+|inline\s+)*"
        r"(?:migraphx::[\w:]+|auto|void|bool|std::[\w:]+)"
        r"\s*[&*]?\s+(\w+)\s*\(([^)]*)\)\s*\{",
        re.M,
    )
    for m in pat.finditer(source):
        start = m.end()
        depth, i = 1, start
        while depth and i < len(source):
            depth += source[i] == "{"
            depth -= source[i] == "}"
            i += 1
        if m.group(1) == "main":
            continue
        params, defaults, types = [], {}, {}
        try:
            for p in _split_params(m.group(2)):
                if not p.strip():
                    continue
                decl, _, default = p.partition("=")
                words = decl.replace("&", " ").replace("*", " ").split()
                params.append(words[-1])
                types[words[-1]] = next((w for w in words[:-1] if w not in ("const",)), "")
                if default.strip():
                    defaults[words[-1]] = tokenize(default.strip())
            fn = Function(params, tokenize(source[start : i - 1]), defaults, types)
            prev = out.get(m.group(1))
            if prev is None:
                out[m.group(1)] = fn
            else:
                out[m.group(1)] = Overloads((prev.functions if isinstance(prev, Overloads) else [prev]) + [fn])
        except Unsupported:
            continue
    return out


def _split_params(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "<({"
        depth -= ch in ">)}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


# ---- passes --------------------------------------------------------------------------------------------
def _registry() -> set[str]:
    import migx_explore.gpu.passes  # noqa: F401 - registers the target passes (no GPU needed)
    from migx_explore.compiler.pass_infra import pass_registry

    return set(pass_registry())


# MIGraphX pass class -> our pass name (same name unless listed)
_RENAMED = {
    "truncate_float_pass": "truncate_float",
    "capture_arguments_pass": "capture_arguments",
    "quantize_8bits_pass": "quantize_8bits",
}
_MIGRAPHX_ONLY = ("eliminate_zero_point", "autocast_fp8_pass", "simplify_reshapes", "optimize_module")
PASS_NAMES = {f"migraphx::{n}": _RENAMED.get(n, n) for n in sorted(_registry() | set(_RENAMED) | set(_MIGRAPHX_ONLY))}
PASS_NAMES.update({k.replace("migraphx::", "migraphx::gpu::"): v for k, v in list(PASS_NAMES.items())})

# positional constructor arguments of MIGraphX's pass structs, as our option names
_POSITIONAL = {
    "propagate_constant": ["skip_ops"],
    "eliminate_data_type": ["unsupported_types", "target_type", "unsupported_ops"],
    "truncate_float": ["ins_names", "float_type"],
    "eliminate_contiguous": ["op_name"],
}
# positional values that are what our pass does anyway (our eliminate_contiguous removes `contiguous`)
_DEFAULT_POSITIONAL = {("eliminate_contiguous", "op_name"): "contiguous"}
# MIGraphX options that switch on what our pass always does
_ALWAYS_ON = {("fuse_attention", "attn_enabled")}


def _option_value(v: Any) -> Any:
    if isinstance(v, TypeRef):
        return v.name
    if isinstance(v, list):
        return tuple(_option_value(x) for x in v)
    return v


def _pass_spec(name: str, positional: list, named: dict) -> PassSpec:
    import dataclasses

    from migx_explore.compiler.pass_infra import pass_registry

    cls = pass_registry().get(name)
    if cls is None:
        raise Unsupported(f"pass {name} is not in migx-explore")
    fields = {f.name for f in dataclasses.fields(cls)}
    opts: dict[str, Any] = {}
    names = _POSITIONAL.get(name, [])
    if len(positional) > len(names):
        raise Unsupported(f"positional options of {name}: {positional!r}")
    for key, v in zip(names, positional):
        if _DEFAULT_POSITIONAL.get((name, key)) == v:
            continue
        if not (isinstance(v, (list, tuple, dict)) and not v):
            opts[key] = _option_value(v)
    for key, v in named.items():
        if (name, key) in _ALWAYS_ON and v is True:
            continue
        if key not in fields:
            raise Unsupported(f"option {name}.{key} has no counterpart in migx-explore")
        opts[key] = _option_value(v)
    return PassSpec(name, opts)


_QUALIFIED = {
    "migraphx::make_op",
    "migraphx::literal",
    "migraphx::shape",
    "migraphx::generate_literal",
    "migraphx::to_value",
    *TYPE_NAMES,
    *PASS_NAMES,
}
