"""rewrite: run rewrite rules (compiler/pattern_rewriter.py) to a fixpoint, as one pass.

The built-in rewrite passes are this plus MIGraphX's order of rule tables; a rule prototyped in a
notebook becomes a pass the same way:

    RewritePass((silu_rule,), label="fuse_silu")       or   as_pass(silu_rule)

`sweep` is the step every rule-table pass repeats: one forward `find_matches`, then optionally
dead-code elimination so the next sweep sees the rewritten graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import MigxError
from ..ir import Module
from ..pass_infra.base import FunctionPass, Pass, rewriter_of
from ..pattern_rewriter import PatternRewriter, Rule, repeat_while_changes
from .dead_code_elimination import DeadCodeElimination


def dce(module: Module) -> bool:
    return bool(DeadCodeElimination().apply_module(module, None))


def sweep(
    module: Module,
    rules: Sequence[Rule],
    *,
    with_dce: bool = True,
    rewriter: PatternRewriter | None = None,
    skip_if_quiet: bool = False,
) -> bool:
    """One forward sweep of `rules` over `module` (then DCE); whether anything changed. A pass
    passes its `rewriter_of(ctx)` so the trace records what the rules did.

    `skip_if_quiet`: when the same `rules` object last swept this module without a change and
    neither it nor a module it reaches has changed since (version counters), the sweep would
    find nothing again, so it is not run. Only for rules that read nothing but the program: the built-in
    tables of simplify_algebra and simplify_reshapes, whose fixpoint loops (and optimize_module's
    around them) otherwise repeat a quiet sweep on an untouched module (9 of 74 sweeps on
    yolov10n)."""
    quiet = module.__dict__.setdefault("_quiet_sweeps", {}) if skip_if_quiet else None
    if quiet is not None:
        last = quiet.get(id(rules))
        if last is not None and last[0] is rules and _same_state(last[1], module):
            return False
    changed = (rewriter or PatternRewriter()).find_matches(module, *rules) > 0
    if with_dce:
        changed = dce(module) or changed
    if quiet is not None:
        if changed:
            quiet.pop(id(rules), None)
        else:
            quiet[id(rules)] = (rules, _reach_state(module))
    return changed


def _reach_state(module: Module) -> tuple:
    """`module` and the modules its instructions reach (submodules, theirs, ...): each object with
    its version and bypass flag. What a rule on `module` can read of the program."""
    out, todo, seen = [], [module], set()
    while todo:
        m = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append((m, m.version, m.bypass))
        todo.extend(m.sub_modules())
    return tuple(out)


def _same_state(state: tuple, module: Module) -> bool:
    now = _reach_state(module)
    return len(now) == len(state) and all(m is n and v == w and b == c for (m, v, b), (n, w, c) in zip(state, now))


@dataclass(frozen=True)
class RewritePass(Pass):
    """Apply `rules` (first accepted rule per instruction, one forward sweep) until nothing changes
    or `max_iterations` sweeps ran; with `dead_code_elimination`, sweep away what each sweep left."""

    registered_as: ClassVar[str] = "rewrite"
    rules: tuple[Rule, ...] = ()
    label: str = "rewrite"
    max_iterations: int = 8
    dead_code_elimination: bool = False

    def __post_init__(self) -> None:
        bad = [r for r in self.rules if not isinstance(r, Rule)]
        if bad:
            raise MigxError(f"pass {self.label}: not a rewrite rule: {bad[0]!r} (build one with rewrite.rule(...))")

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    def apply_module(self, module: Module, ctx: Any) -> bool:
        rewriter = rewriter_of(ctx)
        step = lambda: sweep(module, self.rules, with_dce=self.dead_code_elimination, rewriter=rewriter)  # noqa: E731
        return repeat_while_changes(self.max_iterations, step) > 0

    def non_default_options(self) -> dict[str, Any]:
        # The rules and label are the pass's identity, shown by name; only tuning options are options.
        return {k: v for k, v in super().non_default_options().items() if k not in ("rules", "label")}


def as_pass(p: Pass | Rule | Sequence[Rule] | Callable, name: str | None = None) -> Pass:
    """A Pass from a Pass, a rewrite Rule (or several), or a function f(module[, ctx])."""
    if isinstance(p, Pass):
        return p
    if isinstance(p, Rule):
        return RewritePass((p,), name or p.name)
    if isinstance(p, (list, tuple)) and p and all(isinstance(r, Rule) for r in p):
        return RewritePass(tuple(p), name or "+".join(r.name for r in p))
    if callable(p):
        return FunctionPass(fn=p, label=name or getattr(p, "__name__", "user_pass"))
    raise MigxError(f"cannot make a pass from {type(p).__name__}; give a Pass, a rewrite Rule or a function")


__all__ = ["RewritePass", "as_pass", "dce", "sweep"]
