"""Rewrite rules: a pattern, a check that returns a reason or a plan, a rewrite that consumes the plan.

This is the one rule protocol of the compiler (the shape of onnxscript's rewriter). Built-in
finders (simplify_algebra, simplify_reshapes, the rewrite_* and fuse_* passes) and rules written
in a notebook use it alike:

    x = any_().bind("x")
    silu = rule("silu", name("mul")(either_arg(0, 1)(x, name("sigmoid")(arg(0)(x)))), to("silu", "x"))
    RewritePass((silu,), label="fuse_silu")          # compiler/passes/rewrite.py runs rules as a pass

- `pattern()` is a matcher (compiler/matcher.py) tried on one root instruction.
- `check(module, match)` returns a `str` to refuse (the reason `near_misses` shows, "weight not
  constant") or anything else as the plan: the analysis the rewrite needs, computed once. The
  default accepts with no plan (None).
- `rewrite(module, match, plan)` changes the IR. The default calls the plan, so a rule can return
  a closure from `check` and need no `rewrite` at all.

Table rows are rules built from data: `row(name, pattern, to("op", "binding", attr=...), check)`
with an `# a -> b` comment each, as in tinygrad's symbolic tables; tables compose by tuple
concatenation. `find_matches` makes one forward sweep applying the first accepted rule per
instruction, as MIGraphX does; `repeat_while_changes` iterates a step to a fixpoint. A pass
applies rules through the `PatternRewriter` it is handed (`ctx.rewriter`), which records every
application for the trace; `near_misses` lists where a rule under development almost matched and
why not.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import IRError
from .matcher import Matcher, MatchResult, MatchState, root_filter
from .op import Op

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Instruction, Module

Reason = str  # a refusal, shown to the user
Plan = Any  # whatever check() computed for rewrite(); not a str
RewriteFn = Callable[..., Any]  # (module, match) or (module, match, plan)


class Rule:
    """A rewrite rule. Subclass it (override `pattern`, `check`, and `rewrite` unless `check` returns
    a callable plan), or build one from parts with `rule(name, pattern, rewrite, check)`."""

    name = "rule"

    def pattern(self) -> Matcher:  # pragma: no cover - abstract
        raise NotImplementedError(f"rule {self.name} has no pattern()")

    def check(self, module: Module, match: MatchResult) -> Reason | Plan:
        return None

    def rewrite(self, module: Module, match: MatchResult, plan: Plan) -> None:
        if not callable(plan):
            raise IRError(f"rule {self.name}: check() returned no callable plan and rewrite() is not defined")
        plan()

    def target(self) -> str:
        """What the rule rewrites to, for printing ("silu(x)"); subclasses may say more."""
        return (type(self).__doc__ or "").strip().split("\n")[0] or "..."

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self.pattern()!r} -> {self.target()}>"


# ---- table rows and the function form ----------------------------------------------------------
@dataclass(frozen=True)
class To:
    """A replacement expression: op name, arguments (binding names or nested `To`), attributes.
    An attribute value may be a function of the match (e.g. lens taken from a bound instruction)."""

    op: str
    args: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        attrs = "".join(f", {k}={'<fn>' if callable(v) else v!r}" for k, v in self.attrs.items())
        return f"{self.op}({', '.join(map(str, self.args))}{attrs})"


def to(op: str, *args: Any, **attrs: Any) -> To:
    """`to("silu", "x")`: the root becomes silu of the instruction bound as x."""
    return To(op, args, attrs)


def _attrs(spec: To, r: MatchResult) -> dict[str, Any]:
    return {k: (v(r) if callable(v) else v) for k, v in spec.attrs.items()}


def build(m: Module, r: MatchResult, spec: To | str, before: Instruction) -> Instruction:
    """Insert the instructions `spec` describes before `before` (a str is a binding, used as is)."""
    if isinstance(spec, str):
        return r[spec]
    inputs = [build(m, r, a, before) for a in spec.args]
    return m.insert_instruction(before, Op(spec.op, _attrs(spec, r)), inputs)


def replace_value(m: Module, ins: Instruction, new: Instruction) -> Instruction:
    """Make `new` take `ins`'s place. A module's trailing instruction is its output when there is no
    @return, so there the old instruction becomes `identity(new)` instead of being orphaned."""
    if new.shape.lens != ins.shape.lens or new.shape.type != ins.shape.type:
        raise IRError(f"cannot replace #{ins.id} {ins.shape} with #{new.id} {new.shape}: different value shape")
    if new is ins:
        return ins
    if not ins.outputs and ins is m.last and not ins.is_return():
        m.replace_instruction(ins, Op("identity"), [new])
        return ins
    m.replace_all_uses(ins, new)
    return new


def replace_with_op(m: Module, ins: Instruction, op: Op, inputs: Sequence[Instruction]) -> Instruction:
    """Rewrite `ins` in place (the id survives), checking the value keeps its lens and type."""
    lens, t = ins.shape.lens, ins.shape.type
    m.replace_instruction(ins, op, inputs)
    if ins.shape.lens != lens or ins.shape.type != t:
        raise IRError(f"rewrite of #{ins.id} changed its value shape to {ins.shape}")
    return ins


def rewrite_to(m: Module, r: MatchResult, spec: To | str) -> None:
    """The root becomes `spec`: rewritten in place (keeping its id), or replaced by a binding."""
    if isinstance(spec, str):
        replace_value(m, r.root, r[spec])
        return
    inputs = [build(m, r, a, r.root) for a in spec.args]
    replace_with_op(m, r.root, Op(spec.op, _attrs(spec, r)), inputs)


class TableRule(Rule):
    """A rule from parts: name, pattern, replacement (a `To`, a binding name, or a function
    `f(module, match)` / `f(module, match, plan)`), and an optional check returning a reason or a plan."""

    def __init__(
        self,
        name: str,
        pattern: Matcher,
        out: To | str | RewriteFn,
        check: Callable[[Module, MatchResult], Reason | Plan] | None = None,
    ):
        if not isinstance(pattern, Matcher):
            raise TypeError(f"rule {name}: pattern must be a Matcher, got {type(pattern).__name__}")
        self.name, self._pattern, self._out, self._check = name, pattern, out, check
        self._takes_plan = callable(out) and not isinstance(out, To) and _arity(out) >= 3

    def pattern(self) -> Matcher:
        return self._pattern

    def check(self, module: Module, match: MatchResult) -> Reason | Plan:
        return self._check(module, match) if self._check else None

    def rewrite(self, module: Module, match: MatchResult, plan: Plan) -> None:
        out = self._out
        if isinstance(out, (To, str)):
            rewrite_to(module, match, out)
        elif self._takes_plan:
            out(module, match, plan)
        else:
            out(module, match)

    def target(self) -> str:
        out = self._out
        return repr(out) if isinstance(out, To) else out if isinstance(out, str) else getattr(out, "__name__", "fn")


def _arity(fn: Callable) -> int:
    try:
        return len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # builtins without a signature
        return 2


def rule(
    name: str,
    pattern: Matcher,
    rewrite: To | str | RewriteFn,
    check: Callable[[Module, MatchResult], Reason | Plan] | None = None,
) -> Rule:
    """A rule from parts (see `TableRule`); `row` is the same, for rules written as table rows."""
    return TableRule(name, pattern, rewrite, check)


row = rule


# ---- applying rules ----------------------------------------------------------------------------
@dataclass(frozen=True)
class MatchRecord:
    rule: str
    root: int  # stable id of the root instruction
    bound: tuple[tuple[str, int], ...]  # (binding name, stable id)
    module: str


def refused(plan: Reason | Plan) -> bool:
    return isinstance(plan, str)


class PatternRewriter:
    """Applies rules to modules, the one object a pass hands its rules to (xDSL's PatternRewriter).

    The pass manager makes one per pass run, recording into that run's trace record, and passes it
    in the pass's context (`ctx.rewriter`); a pass run by hand, or a notebook, makes its own
    (`PatternRewriter()` records nothing). It also owns the `is_constant` cache of the sweep in
    progress, so nothing about a run lives in module-level state."""

    def __init__(self, records: list[MatchRecord] | None = None):
        self.records = records

    def find_matches(self, module: Module, *rules: Rule) -> int:
        """One forward sweep; for each instruction apply the first rule that matches and whose check
        accepts, handing it the plan its check computed. Returns the number of rewrites."""
        candidates = _RuleIndex(rules)
        # One can_eval cache for the whole sweep even as rewrites bump the module's version: a
        # rewrite replaces a value by an equivalent one, so a constant stays constant, and a value
        # that became constant only waits for the next sweep. Dropping the cache on every rewrite
        # made each is_constant test re-walk a long chain: O(n^2) on n-node chains.
        eval_cache: dict = {}
        count = 0
        for ins in module:
            # Params and literals can be roots too (MIGraphX visits every instruction: a parameter
            # feeding sibling dots is what find_conv_dot_horiz_fusion matches); @return cannot.
            if not ins._alive or ins.is_return() or _dead(ins):
                continue
            for rl, pat in candidates.get(ins.op):
                r = pat.match(ins, eval_cache)
                if r is None:
                    continue
                plan = rl.check(module, r)
                if refused(plan):
                    continue
                self._apply(module, rl, r, plan)
                count += 1
                break
        return count

    def _apply(self, module: Module, rl: Rule, r: MatchResult, plan: Plan) -> None:
        ins = r.root
        sources = [ins] + [b for b in r.bindings.values() if b.alive]
        with module.program.provenance(sources, rule=rl.name):
            rl.rewrite(module, r, plan)
        if self.records is not None:
            self.records.append(
                MatchRecord(rl.name, ins.id, tuple((k, v.id) for k, v in r.bindings.items()), module.name)
            )


class _RuleIndex:
    """The rules (with their patterns) that can match a root of each op name, in the rules' order.
    A sweep tried every rule's root-name test on every instruction: 39 simplify_algebra rules
    times every instruction times every sweep, most of a sweep's own time. Each name's list is
    built once per sweep from the patterns' root filters (matcher.root_filter: op names, or a
    trait such as pointwise); a rule whose pattern does not say is a candidate for every op."""

    def __init__(self, rules: Sequence[Rule]):
        patterns = [r.pattern() for r in rules]
        self._rules = [(rl, pat, root_filter(pat)) for rl, pat in zip(rules, patterns)]
        self._by_name: dict[str, list[tuple[Rule, Matcher]]] = {}

    def get(self, op: Op) -> list[tuple[Rule, Matcher]]:
        out = self._by_name.get(op.name)
        if out is None:
            out = [(rl, pat) for rl, pat, test in self._rules if test is None or test(op)]
            self._by_name[op.name] = out
        return out


def find_matches(module: Module, *rules: Rule, rewriter: PatternRewriter | None = None) -> int:
    """`rewriter.find_matches(module, *rules)`; without a rewriter, one that records nothing."""
    return (rewriter or PatternRewriter()).find_matches(module, *rules)


def _dead(ins: Instruction) -> bool:
    """An unused value awaiting DCE (a rewrite left it behind): rewriting it again is wasted work
    and, in fixpoint loops, would count the same match over and over."""
    # The private fields: `outputs` copies the list into a tuple (asked of every instruction in
    # every sweep).
    return not ins._outputs and ins is not ins._module.last and not ins._op.has("side_effect")


def repeat_while_changes(n: int, step: Callable[[], Any]) -> int:
    """Run `step` up to n times while it reports a change (a truthy count or bool), as MIGraphX's
    repeat_while_changes does. Returns how many runs changed something (0: nothing changed)."""
    for k in range(n):
        if not step():
            return k
    return n


# ---- looking without rewriting -----------------------------------------------------------------
@dataclass(frozen=True)
class NearMiss:
    rule: str
    instruction: int  # stable id
    op: str
    reason: str
    depth: int  # how many conditions held before it failed


def near_misses(module: Module, rl: Rule, *, min_depth: int = 1) -> list[NearMiss]:
    """Instructions where `rl` got at least past its root test but failed (or was refused by
    check), with the reason. Full matches are not near misses."""
    pat = rl.pattern()
    out = []
    eval_cache: dict = {}  # nothing is rewritten while looking, so one cache serves the whole walk
    for ins in module:
        if ins.is_return():
            continue
        st = MatchState(eval_cache)
        if pat.test(ins, st):
            plan = rl.check(module, MatchResult(ins, dict(st.bindings)))
            if refused(plan):
                out.append(NearMiss(rl.name, ins.id, ins.name, f"refused: {plan}", st.depth))
        elif st.depth >= min_depth:
            out.append(NearMiss(rl.name, ins.id, ins.name, st.reason, st.depth))
    return out


def matches(module: Module, rl: Rule) -> list[MatchResult]:
    """All instructions the rule matches (and whose check accepts), without rewriting."""
    pat = rl.pattern()
    out = []
    eval_cache: dict = {}
    for ins in module:
        if ins.is_return():
            continue
        r = pat.match(ins, eval_cache)
        if r is not None and not refused(rl.check(module, r)):
            out.append(r)
    return out


__all__ = [
    "MatchRecord",
    "NearMiss",
    "PatternRewriter",
    "Plan",
    "Reason",
    "Rule",
    "TableRule",
    "To",
    "build",
    "find_matches",
    "matches",
    "near_misses",
    "refused",
    "repeat_while_changes",
    "replace_value",
    "replace_with_op",
    "rewrite_to",
    "row",
    "rule",
    "to",
]
