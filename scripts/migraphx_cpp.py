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

from typing import Any

from migraphx_cpp_api import (
    ApiMixin,
)
from migraphx_cpp_expect import ExpectMixin, _conjuncts
from migraphx_cpp_expr import ExprMixin
from migraphx_cpp_model import (
    GENERATED,
    PASS_NAMES,
    ExpectEvent,
    Function,
    InstructionCount,
    OutputShapes,
    Overloads,
    PassSpec,
    PropertyCheck,
    RunEvent,
    Unsupported,
    _pass_spec,
    _Return,
    file_functions,
    run_pass_list,
    test_cases,
    tokenize,
)

from migx_explore.compiler.ir import Module, Program

# what scripts/transcribe_migraphx_tests.py reads from here
__all__ = [
    "GENERATED",
    "InstructionCount",
    "OutputShapes",
    "PropertyCheck",
    "Reader",
    "RunEvent",
    "Unsupported",
    "file_functions",
    "run_pass_list",
    "test_cases",
    "tokenize",
]


# a lambda that tests an instruction's name: [](auto&& ins) { return ins.name() == "op"; }


class Reader(ApiMixin, ExpectMixin, ExprMixin):
    """Evaluates the statements of one TEST_CASE body."""

    def __init__(
        self, tokens: list[str], run_pass_passes: list[tuple[str, dict]], functions: dict[str, Function] | None = None
    ):
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
        if tok in (
            "auto",
            "auto*",
            "const",
            "migraphx::shape",
            "migraphx::instruction_ref",
            "std::size_t",
            "size_t",
            "migraphx::literal",
            "std::vector",
            "int",
            "float",
            "double",
            "bool",
            "std::string",
        ):
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
        if self.peek() in (
            "migraphx::instruction_ref",
            "std::size_t",
            "size_t",
            "migraphx::literal",
            "int",
            "float",
            "double",
            "bool",
            "std::string",
        ):
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
        return self.t[start + 1 : self.i - 1]

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
        for p in fn.params[len(args) :]:
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
