"""Matcher DSL for rewrite rules, after MIGraphX's `match::` (src/include/migraphx/matcher.hpp).

    m = name("mul")(either_arg(0, 1)(name("convolution")(used_once()).bind("conv"),
                                      is_constant().bind("a")))

A matcher is tried on one instruction and either succeeds (filling `bindings`) or fails with a
reason ("arg 1: expected convolution, got relu"). Calling a matcher with sub-matchers composes
them: all must hold on the same instruction. A rule (compiler/pattern_rewriter.py) pairs a matcher, its
pattern, with a check that refuses with a reason or returns a plan, and a rewrite.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .ref import eval_instruction

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Instruction
    from .op import Op


class MatchState:
    """One attempt to match: bindings so far, why it failed, how far it got, and the can_eval cache
    shared by the attempts of one sweep (the caller owns it: see PatternRewriter.find_matches)."""

    __slots__ = ("bindings", "reason", "depth", "eval_cache")

    def __init__(self, eval_cache: dict | None = None):
        self.bindings: dict[str, Instruction] = {}
        self.reason = ""
        self.depth = 0  # how many conditions held before the failure (near-miss ranking)
        self.eval_cache: dict = {} if eval_cache is None else eval_cache


class Matcher:
    """Base matcher. Subclasses implement `_test(ins, st) -> bool`, setting st.reason on failure."""

    desc = "matcher"

    def _test(self, ins: Instruction, st: MatchState) -> bool:  # pragma: no cover
        raise NotImplementedError

    def test(self, ins: Instruction, st: MatchState) -> bool:
        ok = self._test(ins, st)
        if ok:
            st.depth += 1
        return ok

    def __call__(self, *subs: Matcher) -> Matcher:
        return AllOf((self,) + subs) if subs else self

    def bind(self, name: str) -> Matcher:
        return Bind(self, name)

    def match(self, ins: Instruction, eval_cache: dict | None = None) -> MatchResult | None:
        """The bindings if `ins` matches. `eval_cache`: can_eval results to share with other
        attempts on the same, unchanged module (a fresh one when omitted)."""
        st = MatchState(eval_cache)
        if self.test(ins, st):
            return MatchResult(ins, dict(st.bindings))
        return None

    def explain(self, ins: Instruction) -> tuple[bool, str, int]:
        st = MatchState()
        ok = self.test(ins, st)
        return ok, st.reason, st.depth

    def __repr__(self) -> str:
        return self.desc


@dataclass
class MatchResult:
    root: Instruction
    bindings: dict[str, Instruction] = field(default_factory=dict)

    def __getitem__(self, k: str) -> Instruction:
        return self.bindings[k]

    def get(self, k: str) -> Instruction | None:
        return self.bindings.get(k)


class _Pred(Matcher):
    def __init__(self, desc: str, fn: Callable[[Instruction, MatchState], bool], why: Callable | str):
        self.desc, self.fn, self.why = desc, fn, why

    # test() in place of _test for the matchers every rule is made of (predicates and all_of):
    # the same depth counting as Matcher.test, one Python call fewer per condition tried (a
    # compile tries some 400k).
    def test(self, ins, st):
        if self.fn(ins, st):
            st.depth += 1
            return True
        st.reason = self.why(ins) if callable(self.why) else self.why
        return False


def pred(desc: str, fn: Callable[[Instruction], bool], why: str | Callable | None = None) -> Matcher:
    """A custom predicate matcher (MIGRAPHX_PRED_MATCHER)."""
    return _Pred(desc, lambda ins, st: fn(ins), why or (lambda ins: f"{ins.name} fails {desc}"))


def name(*names: str) -> Matcher:
    allowed = frozenset(names)
    shown = "|".join(names)
    m = _Pred(
        f"name({shown})", lambda ins, st: ins._op.name in allowed, lambda ins: f"expected {shown}, got {ins.name}"
    )
    m.root_op = lambda op: op.name in allowed  # find_matches tries the rule on those roots only
    return m


def on_root_ops(m: Matcher, test: Callable[[Op], bool]) -> Matcher:
    """`m`, declaring that every root it accepts has an op passing `test`, so find_matches tries
    it only on those. `test` must depend on the op's name alone (its name or its spec's traits):
    find_matches asks it once per op name per sweep. Matching itself is unchanged (a copy of `m`
    carries the test; `m` is left as it was)."""
    out = copy.copy(m)
    out.root_op = test
    return out


def root_filter(m: Matcher) -> Callable[[Op], bool] | None:
    """A test on a root instruction's op that every root the matcher accepts passes (see
    `on_root_ops`), or None if the matcher does not say."""
    if isinstance(m, Bind):
        return root_filter(m.inner)
    if isinstance(m, AllOf):
        known = [f for f in map(root_filter, m.ms) if f is not None]
        if len(known) <= 1:
            return known[0] if known else None
        return lambda op: all(f(op) for f in known)
    if isinstance(m, AnyOf):
        parts = [root_filter(x) for x in m.ms]
        return None if any(p is None for p in parts) else (lambda op: any(f(op) for f in parts))
    return getattr(m, "root_op", None)


def name_contains(part: str) -> Matcher:
    return _Pred(
        f"name_contains({part})", lambda ins, st: part in ins.name, lambda ins: f"{ins.name} does not contain {part!r}"
    )


def any_() -> Matcher:
    return _Pred("any", lambda ins, st: True, "")


def none_() -> Matcher:
    return _Pred("none", lambda ins, st: False, "never matches")


def nargs(n: int) -> Matcher:
    return _Pred(
        f"nargs({n})",
        lambda ins, st: len(ins.inputs) == n,
        lambda ins: f"{ins.name} has {len(ins.inputs)} inputs, expected {n}",
    )


def used_once() -> Matcher:
    return _Pred(
        "used_once",
        lambda ins, st: len(ins.outputs) == 1,
        lambda ins: f"{ins.name} has {len(ins.outputs)} users (needs exactly one)",
    )


def is_constant() -> Matcher:
    def ok(ins, st):
        return ins.can_eval(st.eval_cache)

    return _Pred("is_constant", ok, lambda ins: f"{ins.name} is not constant (depends on a parameter)")


def has_attribute(key: str) -> Matcher:
    return _Pred(
        f"has_attribute({key})",
        lambda ins, st: ins.op.get(key, _MISSING) is not _MISSING,
        lambda ins: f"{ins.name} has no attribute {key}",
    )


def attr_value(key: str, value: Any) -> Matcher:
    return _Pred(
        f"{key}={value}",
        lambda ins, st: ins.op.get(key, _MISSING) == value,
        lambda ins: f"{ins.name}.{key} is {ins.op.get(key, 'missing')}, expected {value}",
    )


has_op_value = attr_value
_VALUE_VIEWS = frozenset(
    {"broadcast", "multibroadcast", "reshape", "squeeze", "unsqueeze", "transpose", "flatten", "contiguous"}
)


def has_value(value: float, rtol: float = 0.0) -> Matcher:
    """A constant whose every element equals `value` (evaluates constant subtrees)."""

    def ok(ins, st):
        # Views that only repeat or rearrange elements have the values of their input, so a
        # broadcast literal is checked without evaluating (and materialising) the broadcast.
        while ins.name in _VALUE_VIEWS and ins.inputs:
            ins = ins.inputs[0]
        if ins.is_literal():
            data = ins.literal.data
        elif ins.can_eval(st.eval_cache):
            key = ("value", ins.id)  # evaluated once per module version, shared by every rule
            data = st.eval_cache.get(key)
            if data is None:
                data = st.eval_cache[key] = eval_instruction(ins)
        else:
            return False
        if data.size == 0:
            return False
        # Asked again by later rules of the sweep: the answer is kept with the array it is about
        # (held, so its id is not reused while the sweep's cache lives).
        key = ("has_value", id(data), value, rtol)
        hit = st.eval_cache.get(key)
        if hit is not None and hit[0] is data:
            return hit[1]
        # The first element alone settles most misses (a weight tensor is rarely all one value)
        # without comparing all of it: the same isclose, on the same dtype.
        ok = bool(np.isclose(data.flat[:1], value, rtol=rtol, atol=0)[0]) and bool(
            np.all(np.isclose(data, value, rtol=rtol, atol=0))
        )
        st.eval_cache[key] = (data, ok)
        return ok

    return _Pred(f"has_value({value})", ok, lambda ins: f"{ins.name} is not the constant {value}")


def standard_shape() -> Matcher:
    return _Pred("standard_shape", lambda ins, st: ins.shape.standard(), lambda ins: f"{ins.shape} is not standard")


def broadcast_shape() -> Matcher:
    return _Pred(
        "broadcast_shape", lambda ins, st: ins.shape.broadcasted(), lambda ins: f"{ins.shape} is not broadcast"
    )


def scalar_shape() -> Matcher:
    return _Pred(
        "scalar_shape",
        lambda ins, st: ins.shape.scalar_shape() or ins.shape.elements() == 1,
        lambda ins: f"{ins.shape} is not scalar",
    )


def pointwise() -> Matcher:
    m = _Pred("pointwise", lambda ins, st: ins.op.has("pointwise"), lambda ins: f"{ins.name} is not pointwise")
    return on_root_ops(m, lambda op: op.has("pointwise"))


def same_shape(*binds: str) -> Matcher:
    def ok(ins, st):
        return all(st.bindings[b].shape == ins.shape for b in binds if b in st.bindings)

    return _Pred(f"same_shape({', '.join(binds)})", ok, "shapes differ")


_MISSING = object()


class Bind(Matcher):
    def __init__(self, inner: Matcher, key: str):
        self.inner, self.key = inner, key
        self.desc = f"{inner.desc}.bind({key})"

    def _test(self, ins, st):
        if not self.inner.test(ins, st):
            return False
        prev = st.bindings.get(self.key)
        if prev is not None and prev is not ins:
            st.reason = f"binding {self.key} already names a different instruction"
            return False
        st.bindings[self.key] = ins
        return True


class AllOf(Matcher):
    def __init__(self, ms: Sequence[Matcher]):
        self.ms = tuple(ms)
        self.desc = "all_of(" + ", ".join(m.desc for m in self.ms) + ")"

    def test(self, ins, st):  # in place of _test, as _Pred.test
        for m in self.ms:
            if not m.test(ins, st):
                return False
        st.depth += 1
        return True

    def __call__(self, *subs: Matcher) -> Matcher:
        return AllOf(self.ms + subs) if subs else self


class AnyOf(Matcher):
    def __init__(self, ms: Sequence[Matcher]):
        self.ms = tuple(ms)
        self.desc = "any_of(" + ", ".join(m.desc for m in self.ms) + ")"

    def _test(self, ins, st):
        reasons = []
        for m in self.ms:
            saved = dict(st.bindings)
            if m.test(ins, st):
                return True
            st.bindings = saved
            reasons.append(st.reason)
        st.reason = "none of: " + "; ".join(reasons)
        return False


class NoneOf(Matcher):
    def __init__(self, ms: Sequence[Matcher]):
        self.ms = tuple(ms)
        self.desc = "none_of(" + ", ".join(m.desc for m in self.ms) + ")"

    def _test(self, ins, st):
        for m in self.ms:
            probe = MatchState(st.eval_cache)
            if m.test(ins, probe):
                st.reason = f"{ins.name} matches excluded {m.desc}"
                return False
        return True


def all_of(*ms: Matcher) -> Matcher:
    return AllOf(ms)


def any_of(*ms: Matcher) -> Matcher:
    return AnyOf(ms)


def none_of(*ms: Matcher) -> Matcher:
    return NoneOf(ms)


class _Arg(Matcher):
    def __init__(self, i: int, m: Matcher, skip: frozenset[str] = frozenset()):
        self.i, self.m, self.skip = i, m, skip
        self.desc = f"arg({i})({m.desc})"

    def _test(self, ins, st):
        inputs = ins._inputs  # the list itself: `inputs` copies it into a tuple on every read
        if self.i >= len(inputs):
            st.reason = f"{ins.name} has no input {self.i}"
            return False
        x = _skip(inputs[self.i], self.skip)
        if not self.m.test(x, st):
            st.reason = f"arg {self.i} of {ins.name}: {st.reason}"
            return False
        return True


def _skip(ins: Instruction, names: frozenset[str]) -> Instruction:
    while names and ins.name in names and ins.inputs:
        ins = ins.inputs[0]
    return ins


def arg(i: int) -> Callable[[Matcher], Matcher]:
    return lambda m: _Arg(i, m)


class _Args(Matcher):
    def __init__(self, ms: Sequence[Matcher]):
        self.ms = tuple(ms)
        self.desc = "args(" + ", ".join(m.desc for m in self.ms) + ")"

    def _test(self, ins, st):
        inputs = ins._inputs
        if len(inputs) != len(self.ms):
            st.reason = f"{ins.name} has {len(inputs)} inputs, expected {len(self.ms)}"
            return False
        for k, (x, m) in enumerate(zip(inputs, self.ms)):
            if not m.test(x, st):
                st.reason = f"arg {k} of {ins.name}: {st.reason}"
                return False
        return True


def args(*ms: Matcher) -> Matcher:
    return _Args(ms)


class _EitherArg(Matcher):
    def __init__(self, i: int, j: int, m1: Matcher, m2: Matcher):
        self.i, self.j, self.m1, self.m2 = i, j, m1, m2
        self.desc = f"either_arg({i}, {j})({m1.desc}, {m2.desc})"

    def _test(self, ins, st):
        inputs = ins._inputs
        if max(self.i, self.j) >= len(inputs):
            st.reason = f"{ins.name} has too few inputs"
            return False
        a, b = inputs[self.i], inputs[self.j]
        reasons = []
        for x, y in ((a, b), (b, a)):
            saved = dict(st.bindings)
            if self.m1.test(x, st) and self.m2.test(y, st):
                return True
            reasons.append(st.reason)
            st.bindings = saved
        st.reason = f"neither input order of {ins.name} matches ({'; '.join(reasons)})"
        return False


def either_arg(i: int, j: int) -> Callable[[Matcher, Matcher], Matcher]:
    return lambda m1, m2: _EitherArg(i, j, m1, m2)


def any_arg(*idx: int) -> Callable[[Matcher], Matcher]:
    def make(m: Matcher) -> Matcher:
        def ok(ins, st):
            cands = idx or range(len(ins.inputs))
            for k in cands:
                if k < len(ins.inputs):
                    saved = dict(st.bindings)
                    if m.test(ins.inputs[k], st):
                        return True
                    st.bindings = saved
            return False

        return _Pred(f"any_arg({m.desc})", ok, lambda ins: f"no input of {ins.name} matches {m.desc}")

    return make


def skip(*names: str) -> Callable[[Matcher], Matcher]:
    """skip(ops)(m): look through chains of the listed ops (e.g. contiguous, broadcasts) first."""
    s = frozenset(names)

    class _Skip(Matcher):
        desc = f"skip({', '.join(names)})"

        def __init__(self, m):
            self.m = m

        def _test(self, ins, st):
            return self.m.test(_skip(ins, s), st)

    return _Skip


def skip_broadcasts(m: Matcher) -> Matcher:
    return skip("broadcast", "multibroadcast")(m)


_MOVED_TO_REWRITE = frozenset(
    {
        "Rule",
        "rule",
        "find_matches",
        "near_misses",
        "matches",
        "repeat_while_changes",
        "MatchRecord",
        "NearMiss",
        "PatternRewriter",
    }
)


def __getattr__(name: str):
    if name in _MOVED_TO_REWRITE:  # the rule protocol moved; say where instead of a bare AttributeError
        raise AttributeError(
            f"migx_explore.compiler.matcher.{name} moved to migx_explore.compiler.pattern_rewriter "
            f"(one rule protocol: pattern, check -> reason or plan, rewrite)"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
