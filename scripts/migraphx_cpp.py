"""A reader for the C++ subset MIGraphX's pass tests are written in (test/*.cpp): enough to
rebuild each TEST_CASE's "before" and "expected" modules with our IR builder, so they can be
transcribed into IR text (scripts/transcribe_migraphx_tests.py).

Understood: `migraphx::module m1;` (also `migraphx::program p; auto* mm = p.get_main_module();`),
shapes (`migraphx::shape s{type, {lens}[, {strides}]}`, `{type, {lens}}` arguments),
`add_parameter`, `add_literal` (scalars, `migraphx::literal{shape, {values}}`,
`migraphx::generate_literal(shape[, seed])`), `add_instruction(migraphx::make_op("name",
{{"attr", value}, ...}), args...)`, `add_return({...})`, `pass_op{}` (our `identity`),
`migraphx::to_value(migraphx::shape::half_type)`, `run_pass(m)` (the file's own pass list) and
`EXPECT(m1 == m2)` / `EXPECT(m1.sort() == m2.sort())`. Anything else raises Unsupported, and the
case is listed as not transcribed with the construct that stopped it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from migraphx_cpp_api import (
    INCLUDE_HELPERS,
    LIBRARY_CALLS,
    NATIVE_CHECKS,
    PRESENCE_CHECKS,
    ApiMixin,
    _from_permutation,
)
from migraphx_cpp_expect import _FIND_OP, ExpectMixin, _conjuncts, _FirstOf
from migraphx_cpp_model import (
    _QUALIFIED,
    CPP_SCALARS,
    GENERATED,
    MATH_CONSTANTS,
    MATH_FUNCTIONS,
    PASS_NAMES,
    PASS_OP,
    TYPE_NAMES,
    ExpectEvent,
    Function,
    InstructionCount,
    MakeOp,
    OutputShapes,
    Overloads,
    PassSpec,
    PropertyCheck,
    RunEvent,
    Scalar,
    TypeRef,
    Unsupported,
    _attr_dict,
    _generated,
    _number,
    _pass_spec,
    _Return,
    file_functions,
    run_pass_list,
    test_cases,
    tokenize,
)

from migx_explore.compiler import dtypes
from migx_explore.compiler.instruction import Instruction
from migx_explore.compiler.ir import Module, Program

# what scripts/transcribe_migraphx_tests.py reads from here
__all__ = ["GENERATED", "InstructionCount", "OutputShapes", "PropertyCheck", "Reader", "RunEvent", "Unsupported",
           "file_functions", "run_pass_list", "test_cases", "tokenize"]


@dataclass(frozen=True)
class _After:
    """std::next(ins): the position after an instruction."""

    ins: Instruction


# a lambda that tests an instruction's name: [](auto&& ins) { return ins.name() == "op"; }

class Reader(ApiMixin, ExpectMixin):
    """Evaluates the statements of one TEST_CASE body."""

    def __init__(self, tokens: list[str], run_pass_passes: list[tuple[str, dict]],
                 functions: dict[str, Function] | None = None):
        self.t = tokens
        self.i = 0
        self.env: dict[str, Any] = dict(functions or {})
        self.programs: dict[str, Program] = {}
        self.snapshots: dict[str, str] = {}  # module var -> IR text captured at run_pass
        self.run_pass_passes = run_pass_passes
        self.events: list[RunEvent | ExpectEvent] = []
        self.literal_seed = 0
        self.in_expect = False

    # ---- token helpers ------------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        return self.t[self.i + k] if self.i + k < len(self.t) else ""

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if want is not None and tok != want:
            raise Unsupported(f"expected {want!r}, found {tok!r}")
        self.i += 1
        return tok

    # ---- statements -----------------------------------------------------------------------------
    def run(self) -> None:
        while self.i < len(self.t):
            self.statement()

    def statement(self) -> None:
        tok = self.peek()
        if tok == "{":
            self.take("{")
            while self.peek() != "}":
                self.statement()
            self.take("}")
            return
        if tok == ";":
            self.take()
            return
        if tok == "if":
            self.take()
            self.take("(")
            cond = self.expr()
            self.take(")")
            if not isinstance(cond, (bool, int)):
                raise Unsupported("if on a condition that is not a plain bool")
            self.statement() if cond else self.skip_statement()
            if self.peek() == "else":
                self.take()
                self.skip_statement() if cond else self.statement()
            return
        if tok == "using":  # `using migraphx::make_op;`: names are read by their last part anyway
            while self.take() != ";":
                pass
            return
        if tok == "return":
            self.take()
            value = self.expr()
            self.take(";")
            raise _Return(value)
        if tok in ("migraphx::module", "migraphx::program"):
            self.take()
            name = self.take()
            if self.peek() == "=":
                self.take()
                self.env[name] = self.copy_module(self.expr())
                self.take(";")
                return
            if self.peek() == "{":  # `migraphx::module m2{m1};` copies m1
                self.take("{")
                value = self.expr()
                self.take("}")
                if not isinstance(value, (Module, Program)):
                    raise Unsupported(f"{tok} {name} brace-initialised")
                self.env[name] = self.copy_module(value)
                self.take(";")
                return
            prog = Program()
            self.programs[name] = prog
            self.env[name] = prog.main if tok == "migraphx::module" else prog
            self.take(";")
            return
        if tok in ("auto", "auto*", "const", "migraphx::shape", "migraphx::instruction_ref", "std::size_t", "size_t",
                   "migraphx::literal", "std::vector", "int", "float", "double", "bool", "std::string"):
            self.declaration()
            return
        if tok in ("run_passes", "migraphx::run_passes"):
            self.take()
            args = self.call_args()
            self.take(";")
            if len(args) != 2 or not isinstance(args[1], list):
                raise Unsupported("run_passes(target, {passes}) with other arguments")
            self.run_event(args[0], [self.as_pass(x) for x in args[1]])
            return
        if tok == "run_pass" and tok not in self.env and self.run_pass_passes:
            self.take()
            self.take("(")
            target = self.expr()
            self.take(")")
            self.take(";")
            self.run_event(target, [PassSpec(n, dict(o)) for n, o in self.run_pass_passes])
            return
        if tok in PASS_NAMES and self.peek(1) not in ("{", "("):  # `migraphx::rewrite_gelu pass;`
            self.take()
            name = self.take()
            self.env[name] = _pass_spec(PASS_NAMES[tok], [], {})
            if self.peek() == "{":
                self.env[name] = self.as_pass(self.braced(), PASS_NAMES[tok])
            self.take(";")
            return
        if tok == "EXPECT":
            self.take()
            self.take("(")
            depth, parts = 1, []
            while depth:
                x = self.take()
                depth += x == "("
                depth -= x == ")"
                if depth:
                    parts.append(x)
            self.take(";")
            for cond in _conjuncts(parts):  # EXPECT((m1 == m2) and (m2 == m3)): each comparison
                try:
                    self.events.append(self.expect_event(cond))
                except Unsupported:
                    pass  # not a program comparison (a count, none_of, eval): nothing to transcribe
            return
        if tok in self.env and self.peek(1) == "=" and not isinstance(self.env[tok], (Function, Overloads)):
            self.take()
            self.take("=")
            self.env[tok] = self.expr()
            self.take(";")
            return
        # an expression statement: m1.add_instruction(...);
        self.expr()
        self.take(";")

    def as_pass(self, v: Any, name: str | None = None) -> PassSpec:
        """A pass list item: a PassSpec, or designated options `{.x = v}` for the named pass."""
        if isinstance(v, PassSpec):
            return v
        if name is not None and isinstance(v, (dict, list)) and not v:
            return _pass_spec(name, [], {})
        if name is not None and isinstance(v, dict):
            return _pass_spec(name, [], v)
        raise Unsupported(f"not a pass: {v!r}")

    def declaration(self) -> None:
        while self.peek() in ("auto", "const", "*", "&"):
            self.take()
        if self.peek() == "migraphx::shape":
            self.take()
            name = self.take()
            if self.peek() == "{":
                self.env[name] = self.shape_from(self.braced())
            else:
                self.take("=")
                self.env[name] = self.as_shape(self.expr())
            self.take(";")
            return
        if self.peek() in ("migraphx::instruction_ref", "std::size_t", "size_t", "migraphx::literal", "int", "float",
                           "double",
                           "bool", "std::string"):
            self.take()
        if self.peek() == "std::vector":
            self.take()
            self.skip_template()
            name = self.take()
            if self.peek() == "{":
                self.env[name] = self.braced()
            elif self.peek() == ";":  # an empty vector, filled later (push_back, std::transform)
                self.env[name] = []
            elif self.peek() == "(":
                args = self.call_args()
                if len(args) not in (1, 2) or not isinstance(args[0], int):
                    raise Unsupported("std::vector(...) other than (count[, value])")
                self.env[name] = [args[1] if len(args) == 2 else 0] * args[0]
            else:
                self.take("=")
                self.env[name] = self.expr()
            self.take(";")
            return
        while self.peek() in ("*", "&"):
            self.take()
        name = self.take()
        if self.peek() == "[":  # a C array: size_t f[2] = {1, 1};
            while self.take() != "]":
                pass
        if self.peek() == "{":
            raise Unsupported(f"brace-initialised {name}")
        self.take("=")
        if self.peek() == "[":
            self.env[name] = self.lambda_()
            self.take(";")
            return
        value = self.expr()
        from migx_explore.compiler.ir import Module

        if isinstance(value, Module) and self.env.get(self.t[self.i - 1]) is value:
            value = self.copy_module(value)  # `auto m2 = m1;` copies
        self.env[name] = value
        self.take(";")

    def skip_statement(self) -> None:
        if self.peek() == "{":
            self.block_tokens()
            return
        depth = 0
        while True:
            tok = self.take()
            depth += tok in ("(", "{", "[")
            depth -= tok in (")", "}", "]")
            if tok == ";" and depth == 0:
                return

    def skip_template(self) -> None:
        if self.peek() != "<":
            return
        depth = 0
        while True:
            tok = self.take()
            depth += tok == "<"
            depth -= tok == ">"
            if depth == 0:
                return

    def lambda_(self) -> Function:
        self.take("[")
        while self.take() != "]":
            pass
        by_reference = self.t[self.i - 2] == "&" if self.i >= 2 else False  # `[&]`
        params, defaults = self.param_list() if self.peek() == "(" else ([], {})
        while self.peek() != "{":
            self.take()  # -> return type, mutable
        return Function(params, self.block_tokens(), defaults, by_reference=by_reference)

    def param_list(self) -> tuple[list[str], dict[str, list[str]]]:
        """A lambda's parameter names, and the tokens of their defaults (`bool add_return = false`)."""
        self.take("(")
        names, defaults, last, default = [], {}, None, None
        depth = 1
        while depth:
            tok = self.take()
            depth += tok in ("(", "{", "<")
            depth -= tok in (")", "}", ">")
            if (tok == "," and depth == 1) or depth == 0:
                if last:
                    names.append(last)
                    if default is not None:
                        defaults[last] = default
                last, default = None, None
            elif default is not None:
                default.append(tok)
            elif tok == "=" and depth == 1:
                default = []
            elif tok not in ("&", "*", "const", "<", ">", "::") and depth == 1:
                last = tok
        return names, defaults

    def block_tokens(self) -> list[str]:
        start = self.i
        self.take("{")
        depth = 1
        while depth:
            tok = self.take()
            depth += tok == "{"
            depth -= tok == "}"
        return self.t[start + 1:self.i - 1]

    def copy_module(self, value: Any) -> Any:
        """A module value (a copy or a helper's result) is kept as its IR text at this point."""
        from migx_explore.compiler.ir import Module
        from migx_explore.compiler.parser import parse
        from migx_explore.compiler.printer import print_program

        as_module = isinstance(value, Module)
        if as_module and value is value.program.main:
            value = value.program
        if not isinstance(value, Program):
            raise Unsupported(f"module initialised from {type(value).__name__}")
        copy = parse(print_program(value, full=True))
        return copy.main if as_module else copy

    def call(self, fn: Function | Overloads, args: list) -> Any:
        if isinstance(fn, Overloads):
            fn = fn.pick(args)
        if len(args) > len(fn.params):
            raise Unsupported(f"helper called with {len(args)} args, takes {len(fn.params)}")
        bound = dict(zip(fn.params, args))
        for p in fn.params[len(args):]:
            if p not in fn.defaults:
                raise Unsupported(f"helper called without its argument {p}")
            saved = (self.t, self.i)
            self.t, self.i = fn.defaults[p], 0
            try:
                bound[p] = self.expr() if self.t else None
            finally:
                self.t, self.i = saved
        for p, v in list(bound.items()):
            ptype = fn.types.get(p, "")
            if ptype in PASS_NAMES:
                bound[p] = self.as_pass(v, PASS_NAMES[ptype])
        saved = (self.t, self.i, dict(self.env))
        self.t, self.i = fn.body, 0
        self.env.update(bound)
        try:
            while self.i < len(self.t):
                self.statement()
        except _Return as r:
            return r.value
        finally:
            inner = self.env
            self.t, self.i, self.env = saved[0], saved[1], saved[2]
            if fn.by_reference:  # `[&](auto qt) { max_quant = qt.max(); }` assigns the caller's variable
                for k in self.env.keys() - bound.keys():
                    self.env[k] = inner[k]
        return None  # a void helper (run_pass)

    # ---- expressions -----------------------------------------------------------------------------
    def expr(self) -> Any:
        v = self.unary()
        while self.peek() in ("*", "+", "-", "/"):
            op = self.take()
            w = self.unary()
            if isinstance(v, InstructionCount) and op in "+-" and isinstance(w, int):
                v = v + w if op == "+" else v - w
                continue
            if not isinstance(v, (int, float)) or not isinstance(w, (int, float)):
                raise Unsupported(f"arithmetic {op} on non-numbers")
            v = {"*": v * w, "+": v + w, "-": v - w, "/": v / w if isinstance(v, float) or isinstance(w, float)
                 else v // w}[op]
        return v

    def unary(self) -> Any:
        if self.peek() in ("not", "!"):
            self.take()
            v = self.unary()
            if not isinstance(v, (bool, int)):
                raise Unsupported("not on a non-bool")
            return not v
        if self.peek() == "-":
            self.take()
            v = self.unary()
            return -v
        if self.peek() in ("&", "*"):
            self.take()
            return self.unary()
        return self.postfix(self.primary())

    def primary(self) -> Any:
        tok = self.peek()
        if tok in NATIVE_CHECKS and self.peek(1) == "(":  # ours, in place of the file's helper
            self.take()
            return NATIVE_CHECKS[tok](self, *self.call_args())
        if tok and tok not in self.env and f"migraphx::{tok}" in _QUALIFIED:  # after `using migraphx::...;`
            tok = self.t[self.i] = f"migraphx::{tok}"
        if tok == "(":
            self.take()
            v = self.expr()
            self.take(")")
            return v
        if tok == "{":
            return self.braced()
        if tok == "[":
            return self.lambda_()
        if tok.startswith("migraphx::op::") and tok.count("::") == 3:  # enum values: pooling_mode::average
            self.take()
            return tok.rsplit("::", 1)[1]
        if tok == "migraphx::shape::from_permutation":
            self.take()
            t, lens, perm = self.call_args()
            return _from_permutation(t.name, lens, perm)
        if tok.startswith('"'):
            self.take()
            return tok[1:-1]
        if tok and (tok[0].isdigit() or tok[0] == "."):
            self.take()
            return _number(tok)
        if tok in ("true", "false"):
            self.take()
            return tok == "true"
        if tok in TYPE_NAMES:
            self.take()
            return TypeRef(TYPE_NAMES[tok])
        if tok in PASS_NAMES and self.peek(1) in ("{", "("):
            self.take()
            args = self.braced() if self.peek() == "{" else self.call_args()
            if isinstance(args, dict):
                return _pass_spec(PASS_NAMES[tok], [], args)
            return _pass_spec(PASS_NAMES[tok], args, {})
        if tok in ("pass_op", "migraphx::shape", "migraphx::literal", "migraphx::op::identity"):
            self.take()
            if tok == "pass_op" or tok == "migraphx::op::identity":
                self.take("{")
                self.take("}")
                return MakeOp(PASS_OP if tok == "pass_op" else "identity")
            items = self.braced() if self.peek() == "{" else self.call_args()
            if tok == "migraphx::shape":
                return self.shape_from(items)
            return self.literal_from(items)
        if tok in MATH_CONSTANTS:
            self.take()
            return MATH_CONSTANTS[tok]
        if tok in MATH_FUNCTIONS and self.peek(1) == "(":
            self.take()
            return float(MATH_FUNCTIONS[tok](*self.call_args()))
        if tok in LIBRARY_CALLS and (tok not in PRESENCE_CHECKS or tok not in self.env and self.in_expect):
            return self.library_call(tok)
        if tok == "std::vector":
            self.take()
            self.skip_template()
            if self.peek() == "{":
                return self.braced()
            args = self.call_args()
            if len(args) in (1, 2) and isinstance(args[0], int):
                return [args[1] if len(args) == 2 else 0] * args[0]
            raise Unsupported("std::vector(...) other than (count[, value])")
        if tok == "std::find_if":  # only over a whole module, by op name (see _FirstOf)
            start, depth = self.i, 0
            while True:
                x = self.take()
                depth += x == "("
                depth -= x == ")"
                if x == ")" and depth == 0:
                    break
            m = _FIND_OP.match(" ".join(self.t[start:self.i]))
            module = self.env.get(m.group(1)) if m else None
            prog = getattr(module, "program", module)
            if not isinstance(prog, Program):
                raise Unsupported("std::find_if other than over a module by op name")
            return _FirstOf(prog, m.group(3))
        if tok == "migraphx::reorder_dims":  # reorder_dims(dims, permutation): dims permuted
            self.take()
            dims, perm = self.call_args()
            return [dims[k] for k in perm]
        if tok == "std::next":  # a position: insert_instruction(std::next(ins), ...) inserts after ins
            self.take()
            args = self.call_args()
            if len(args) != 1 or not isinstance(args[0], Instruction):
                raise Unsupported("std::next of something other than an instruction")
            return _After(args[0])
        if tok in ("std::move", "std::ref", "std::cref"):
            self.take()
            return self.call_args()[0]
        if tok == "static_cast":  # static_cast<std::int64_t>(n): a number converted, anything else as is
            self.take()
            self.take("<")
            type_toks = []
            while self.peek() != ">":
                type_toks.append(self.take())
            self.take(">")
            (value,) = self.call_args()
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value) if type_toks[-1] in ("float", "double") else int(value)
            return value
        if tok in ("migraphx::make_op", "migraphx::to_value", "migraphx::generate_literal"):
            self.take()
            args = self.call_args()
            if tok == "migraphx::make_op":
                attrs = args[1] if len(args) > 1 else []
                return MakeOp(args[0], _attr_dict(attrs))
            if tok == "migraphx::to_value":
                return args[0]
            shape = self.as_shape(args[0])
            seed = args[1] if len(args) > 1 else 0
            return _generated(shape, seed)
        if tok in ("add_pointwise", "create_pointwise_module", "single_pointwise", "noop_pointwise"):
            self.take()
            return self.pointwise_helper(tok, self.call_args())
        if tok.removeprefix("migraphx::") in INCLUDE_HELPERS and tok not in self.env:
            self.take()
            return INCLUDE_HELPERS[tok.removeprefix("migraphx::")](self, *self.call_args())
        if tok in CPP_SCALARS and self.peek(1) in ("{", "("):
            self.take()
            args = self.braced() if self.peek() == "{" else self.call_args()
            if len(args) == 2 and args[1] == "from_bits":  # fp8e4m3fnuz(0x80, fp8e4m3fnuz::from_bits())
                bits = np.asarray(args[0], np.uint8).view(dtypes.np_dtype(CPP_SCALARS[tok]))
                return Scalar(float(bits.astype(np.float32)), CPP_SCALARS[tok])
            return Scalar(args[0] if args else 0, CPP_SCALARS[tok])
        if tok.endswith("::from_bits") and tok.rsplit("::", 2)[-2] in CPP_SCALARS:
            self.take()
            self.call_args()
            return "from_bits"
        if tok in self.env:
            self.take()
            value = self.env[tok]
            if isinstance(value, (Function, Overloads)) and self.peek() == "(":
                args = self.call_args()
                if isinstance(value, Function) and len(args) > len(value.params) and tok in INCLUDE_HELPERS:
                    return INCLUDE_HELPERS[tok](self, *args)  # a variadic template helper, done natively
                return self.call(value, args)
            return value
        raise Unsupported(f"unknown name {tok!r}")

    def postfix(self, v: Any) -> Any:
        while self.peek() in (".", "->", "["):
            if self.peek() == "[":
                self.take()
                k = self.expr()
                self.take("]")
                if not isinstance(v, list) or not isinstance(k, int):
                    raise Unsupported("indexing other than list[int]")
                v = v[k]
                continue
            self.take()
            method = self.take()
            args = self.call_args() if self.peek() == "(" else []
            v = self.method(v, method, args)
        return v

    def call_args(self) -> list:
        self.take("(")
        out = []
        while self.peek() != ")":
            out.append(self.expr())
            if self.peek() == ",":
                self.take()
        self.take(")")
        return out

    def braced(self) -> list | dict:
        self.take("{")
        if self.peek() == "." and self.peek(2) == "=":  # designated: {.enable_multi_output = true}
            named = {}
            while self.peek() != "}":
                self.take(".")
                key = self.take()
                self.take("=")
                named[key] = self.expr()
                if self.peek() == ",":
                    self.take()
            self.take("}")
            return named
        out = []
        while self.peek() != "}":
            out.append(self.expr())
            if self.peek() == ",":
                self.take()
        self.take("}")
        return out
