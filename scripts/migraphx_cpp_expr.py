"""Expressions of the C++ subset scripts/migraphx_cpp.py reads: operators, literals, calls,
member access and braced initializers (the Reader's recursive-descent half; statements and
declarations stay in migraphx_cpp.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from migraphx_cpp_api import (
    INCLUDE_HELPERS,
    LIBRARY_CALLS,
    NATIVE_CHECKS,
    PRESENCE_CHECKS,
    _from_permutation,
)
from migraphx_cpp_expect import _FIND_OP, _FirstOf
from migraphx_cpp_model import (
    _QUALIFIED,
    CPP_SCALARS,
    MATH_CONSTANTS,
    MATH_FUNCTIONS,
    PASS_NAMES,
    PASS_OP,
    TYPE_NAMES,
    Function,
    InstructionCount,
    MakeOp,
    Overloads,
    Scalar,
    TypeRef,
    Unsupported,
    _attr_dict,
    _generated,
    _number,
    _pass_spec,
)

from migx_explore.compiler import dtypes
from migx_explore.compiler.instruction import Instruction
from migx_explore.compiler.ir import Program


@dataclass(frozen=True)
class _After:
    """std::next(ins): the position after an instruction."""

    ins: Instruction


class ExprMixin:
    """Mixed into migraphx_cpp.Reader: uses its token stream (peek/take) and scope."""

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
            v = {
                "*": v * w,
                "+": v + w,
                "-": v - w,
                "/": v / w if isinstance(v, float) or isinstance(w, float) else v // w,
            }[op]
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
            m = _FIND_OP.match(" ".join(self.t[start : self.i]))
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
