"""How the MIGraphX test reader (scripts/migraphx_cpp.py) turns `run_passes(...)` and
`EXPECT(...)` statements into events: program comparisons, instruction counts and property
checks. Split from the reader to keep each module readable; Reader mixes this in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from migraphx_cpp_api import NATIVE_CHECKS, PRESENCE_CHECKS
from migraphx_cpp_model import ExpectEvent, PassSpec, PropertyCheck, RunEvent, Unsupported

from migx_explore.compiler.ir import Program

_NAME_IS = r'\[ \] \( auto &?&? ?(\w+) \) \{ return \2 \. name \( \) == "(\w+)" ; \}'
_OP_COUNT = re.compile(rf"^std::count_if \( (\w+) \. begin \( \) , \1 \. end \( \) , {_NAME_IS} \) == (\d+)$")
_FIND_OP = re.compile(rf"^std::find_if \( (\w+) \. begin \( \) , \1 \. end \( \) , {_NAME_IS} \)$")
_FIRST_USER = re.compile(r'^(\w+) -> outputs \( \) \. front \( \) -> name \( \) (==|!=) "(\w+)"$')


@dataclass(frozen=True)
class _FirstOf:
    """std::find_if(m.begin(), m.end(), name == op): the module's first `op`, looked up when an
    EXPECT reads it (after the passes)."""

    program: Program
    op: str


def _unwrapped(parts: list[str]) -> list[str]:
    """`( a == b )` -> `a == b` while the whole condition sits in one pair of parentheses."""
    while len(parts) > 2 and parts[0] == "(" and parts[-1] == ")":
        depth = 0
        for k, x in enumerate(parts):
            depth += x in ("(", "{", "[")
            depth -= x in (")", "}", "]")
            if depth == 0 and k < len(parts) - 1:
                return parts  # the first parenthesis closes before the end: `(a) == (b)`
        parts = parts[1:-1]
    return parts


def _conjuncts(parts: list[str]) -> list[list[str]]:
    """The top-level `and` / `&&` operands of an EXPECT condition, each unwrapped."""
    out, cur, depth = [], [], 0
    for x in _unwrapped(parts):
        depth += x in ("(", "{", "[")
        depth -= x in (")", "}", "]")
        if depth == 0 and x in ("and", "&&"):
            out.append(_unwrapped(cur))
            cur = []
        else:
            cur.append(x)
    return out + [_unwrapped(cur)]


class ExpectMixin:
    """run_passes and EXPECT handling for Reader (which supplies env, events, t, i, expr)."""

    env: dict[str, Any]
    events: list
    t: list[str]
    i: int
    in_expect: bool

    def run_event(self, target: Any, passes: list[PassSpec]) -> None:
        from migx_explore.compiler.ir import Module
        from migx_explore.compiler.printer import print_program

        prog = target.program if isinstance(target, Module) else target
        if not isinstance(prog, Program):
            raise Unsupported(f"run_passes on {type(target).__name__}")
        if isinstance(target, Module) and target is not prog.main:
            raise Unsupported("run_passes on a submodule")
        last = self.events[-1] if self.events else None
        if isinstance(last, RunEvent) and last.program is prog:  # `pass.apply(m); dce.apply(m);`
            last.passes.extend(passes)
            return
        text = print_program(prog, full=True)
        earlier = next((e for e in reversed(self.events) if isinstance(e, RunEvent) and e.program is prog), None)
        if earlier is not None:  # run_a(m1); EXPECT(m1 == m2); run_b(m1): m1 has been through a, then b
            if earlier.before != text:
                raise Unsupported("a program changed between two run_passes")
            self.events.append(RunEvent(prog, text, earlier.passes + passes))
            return
        self.events.append(RunEvent(prog, text, passes))

    def expect_event(self, parts: list[str]) -> ExpectEvent:
        counted = self.op_count_check(parts) or self.first_user_check(parts)
        if counted is not None:
            return counted
        depth, split, op = 0, None, None
        for k, x in enumerate(parts):
            depth += x in ("(", "{", "[")
            depth -= x in (")", "}", "]")
            if depth == 0 and x in ("==", "!="):
                split, op = k, x
        if split is None:
            # EXPECT(check_resize(...)), EXPECT(none_of(m, &is_x)): a property check
            if parts and (parts[0] in NATIVE_CHECKS or parts[0] in PRESENCE_CHECKS):
                saved = (self.t, self.i)
                self.t, self.i = parts, 0
                self.in_expect = True
                try:
                    got = self.expr()
                finally:
                    self.t, self.i = saved
                    self.in_expect = False
                if isinstance(got, PropertyCheck):
                    return got
            raise Unsupported(f"EXPECT({' '.join(parts)[:80]})")
        if op == "==" and parts[:2] == ["eval", "("] and parts[split + 1 : split + 3] == ["eval", "("]:
            # EXPECT(eval(p1) == eval(p2)): the pass keeps the values (p1 built like p2, not run)
            progs = [self.env.get(parts[2]), self.env.get(parts[split + 3])]
            ran = [p for p in progs if any(isinstance(e, RunEvent) and e.program is p for e in self.events)]
            if len(ran) == 1 and all(isinstance(p, Program) for p in progs):
                return PropertyCheck(ran[0], ("same_values",))
        sides = []
        for side in (parts[:split], parts[split + 1 :]):
            while side and side[0] == "*":
                side = side[1:]
            if side[-4:] == [".", "sort", "(", ")"]:
                side = side[:-4]
            saved = (self.t, self.i)
            self.t, self.i = side, 0
            self.in_expect = True
            try:
                sides.append(self.expr())
                if self.i != len(self.t):
                    raise Unsupported(f"EXPECT side {' '.join(side)[:60]}")
            finally:
                self.t, self.i = saved
                self.in_expect = False
        return ExpectEvent(sides, op == "==")

    def first_user_check(self, parts: list[str]) -> PropertyCheck | None:
        """EXPECT(found->outputs().front()->name() != "mul"), `found` a std::find_if of an op name:
        what the first such instruction's first user is, a property check on the pass's result."""
        m = _FIRST_USER.match(" ".join(parts))
        found = self.env.get(m.group(1)) if m else None
        if not isinstance(found, _FirstOf):
            return None
        return PropertyCheck(found.program, (f"first_user:{found.op}{m.group(2)}{m.group(3)}",))

    def op_count_check(self, parts: list[str]) -> PropertyCheck | None:
        """EXPECT(std::count_if(m.begin(), m.end(), [](auto&& ins) { return ins.name() == "op"; }) == N):
        how many `op` instructions the module keeps, a property check on the pass's result."""
        m = _OP_COUNT.match(" ".join(parts))
        if m is None:
            return None
        module = self.env.get(m.group(1))
        prog = getattr(module, "program", module)
        if not isinstance(prog, Program):
            return None
        return PropertyCheck(prog, (f"count:{m.group(3)}={m.group(4)}",))
