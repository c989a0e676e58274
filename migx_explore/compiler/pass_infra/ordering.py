"""Ordering constraints, declared as data on pass classes (must_follow, requires) and pipeline
entries (final), checked over a concrete list of pipelines. A toggle or reorder that breaks one gets
a warning naming it. ("Rules" in this project are rewrite rules, compiler/pattern_rewriter.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .base import Pipeline


@dataclass(frozen=True)
class OrderWarning:
    constraint: str  # "must_follow" | "requires" | "final"
    pass_path: str
    message: str

    def __str__(self) -> str:
        return self.message


def _flatten(pipelines: Sequence[Pipeline]):
    out = []
    for pl in pipelines:
        seen: dict[str, int] = {}
        for e in pl.entries:
            seen[e.name] = seen.get(e.name, 0) + 1
            out.append((f"{pl.name}.{e.name}#{seen[e.name]}", e, pl.enabled and e.enabled))
    return out


def check_order(pipelines: Sequence[Pipeline]) -> list[OrderWarning]:
    flat = _flatten(pipelines)
    warnings: list[OrderWarning] = []
    names_present = {e.name for _, e, _ in flat}
    for k, (path, e, on) in enumerate(flat):
        if not on:
            continue
        cls = type(e.pass_)
        earlier_on = {x.name for _, x, o in flat[:k] if o}
        later_on = [(p, x) for p, x, o in flat[k + 1 :] if o]
        for dep in getattr(cls, "must_follow", ()):
            if dep in names_present and dep not in earlier_on:
                where = "is disabled" if dep not in {x.name for _, x, o in flat if o} else "runs later"
                msg = f"{path} must run after {dep}, but {dep} {where} (constraint {cls.name}.must_follow)"
                warnings.append(OrderWarning("must_follow", path, msg))
        for dep in getattr(cls, "requires", ()):
            if dep not in earlier_on:
                warnings.append(
                    OrderWarning(
                        "requires",
                        path,
                        f"{path} requires {dep} to have run before it, but it has not (constraint {cls.name}.requires)",
                    )
                )
        if e.final and later_on:
            nxt = ", ".join(p for p, _ in later_on[:3])
            warnings.append(
                OrderWarning(
                    "final",
                    path,
                    f"nothing may run after the final {e.name} ({path}), but {nxt} does (constraint: final entry)",
                )
            )
    return warnings
