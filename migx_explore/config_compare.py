"""Comparing two configurations of one session: the program as configured against the program with
some passes switched (e.g. "fuse_pointwise_reduce off"), at the end of the pipeline or after a
given pass, without touching the user's own toggles.

    from migx_explore import config_compare
    cmp = config_compare.compare_configs(session, {"fusion.fuse_pointwise_reduce": False})
    cmp.summary(); cmp.text_diff(); cmp.labels

The variant is traced on a copy of the session's PipelineConfig through a TraceCache seeded with
the session's cached steps, so only the passes from the first toggled one on run again. The last
few variant traces are kept in the session's `cache` (keyed by the configuration's identity), so
redrawing the Compare view while stepping never re-traces. The variant's instructions are
renumbered like the base's where they match (id_alignment), so the diff names what differs, not
every id the traces drew apart.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from migx_explore.compiler.pass_infra import Trace
from migx_explore.compiler.snapshot import ProgramSnapshot, SnapshotDiff, diff

from .id_alignment import align_ids
from .session_config import PipelineConfig, SessionError

if TYPE_CHECKING:
    from .session import Session

KEEP_VARIANTS = 4


@dataclass(frozen=True)
class ConfigComparison:
    """The IR of two configurations at the same point: `base` (the session as configured) and
    `variant` (with `toggles` applied), after pass `at` ("" for the final program)."""

    base: ProgramSnapshot
    variant: ProgramSnapshot
    toggles: tuple[tuple[str, bool], ...]
    at: str = ""
    base_error: str | None = None
    variant_error: str | None = None

    @property
    def labels(self) -> tuple[str, str]:
        where = f"after {self.at}" if self.at else "final program"
        switched = ", ".join(f"{t} {'on' if on else 'off'}" for t, on in self.toggles)
        return f"as configured ({where})", f"{switched} ({where})"

    def diff(self) -> SnapshotDiff:
        """What the variant's program has that the base's has not (base -> variant)."""
        return diff(self.base, self.variant)

    def text_diff(self, context: int = 3) -> str:
        from .render import text_diff

        return text_diff(self.base, self.variant, context=context)

    def summary(self) -> str:
        b, v = self.base.total_instructions(), self.variant.total_instructions()
        labels = self.labels
        return f"{labels[0]}: {b} instructions; {labels[1]}: {v} instructions ({v - b:+d})"


class VariantTraces:
    """The traces of configurations derived from a session's own, newest last."""

    def __init__(self) -> None:
        self._traces: OrderedDict[tuple, Trace] = OrderedDict()
        # (configuration, point) -> (the base trace it was made against, the comparison)
        self._comparisons: OrderedDict[tuple, tuple[Trace, ConfigComparison]] = OrderedDict()

    def clear(self) -> None:
        self._traces.clear()
        self._comparisons.clear()

    def comparison(self, key: tuple, base: Trace) -> ConfigComparison | None:
        hit = self._comparisons.get(key)
        return hit[1] if hit is not None and hit[0] is base else None

    def keep(self, key: tuple, base: Trace, cmp: ConfigComparison) -> None:
        self._comparisons[key] = (base, cmp)
        while len(self._comparisons) > KEEP_VARIANTS:
            self._comparisons.popitem(last=False)

    def trace_with(self, session: Session, toggles: Mapping[str, bool]) -> Trace:
        if not toggles:
            raise SessionError(
                "compare_configs: name at least one pass or pipeline to switch, "
                "e.g. {'fusion.fuse_pointwise_reduce': False}"
            )
        config = variant_config(session.config, toggles)
        key = config.identity()
        hit = self._traces.get(key)
        if hit is not None:
            self._traces.move_to_end(key)
            return hit
        session.run()  # the session's own steps are the variant's starting point
        trace = session.traces.variant().trace(config)
        self._traces[key] = trace
        while len(self._traces) > KEEP_VARIANTS:
            self._traces.popitem(last=False)
        return trace


def variant_config(config: PipelineConfig, toggles: Mapping[str, bool]) -> PipelineConfig:
    """A copy of `config` with each target (pass path, pass name or pipeline) switched on or off."""
    out = config.copy()
    for target, enabled in toggles.items():
        out.set_enabled(target, bool(enabled), "switched off for a comparison")
    return out


def after_in(trace: Trace, at: str) -> ProgramSnapshot:
    """The IR after pass `at` in `trace` (a disabled pass leaves the IR as it was); "": the end."""
    if not at:
        return trace.final
    try:
        rec = trace.find(at)
    except KeyError:
        raise SessionError(f"compare_configs: no pass {at!r} in the trace") from None
    return trace.snapshots(rec)[1]


def parting_id(base: Trace, other: Trace) -> int:
    """The first instruction id the two traces may number differently: the next id of the program
    in front of the first pass they do not share."""
    for a, b in zip(base.records, other.records):
        if a is not b:
            return (a.before or base.initial).next_id
    return min(base.final.next_id, other.final.next_id)


def variants(session: Session) -> VariantTraces:
    """The variant traces kept for `session` (forgotten by session.invalidate())."""
    return session.state(VariantTraces)


def compare_configs(session: Session, toggles: Mapping[str, bool], at: str = "") -> ConfigComparison:
    """The IR as configured against the IR with `toggles` (pass path, pass name or pipeline ->
    enabled) applied to a copy of the configuration, at the end of the pipeline or after
    pass `at`. The session's own toggles are untouched; only the passes from the first
    switched one on are traced again (e.g. {"fusion.fuse_pointwise_reduce": False})."""
    kept = variants(session)
    other = kept.trace_with(session, toggles)
    base = session.trace
    key = (tuple((t, bool(on)) for t, on in toggles.items()), at)  # the base trace names the configuration
    cmp = kept.comparison(key, base)
    if cmp is not None:
        return cmp
    mine = after_in(base, at)
    # Renumbered like the base where the instructions match, so the diff shows what differs
    # rather than every instruction made after the traces parted.
    theirs = align_ids(mine, after_in(other, at), parting_id(base, other))
    cmp = ConfigComparison(mine, theirs, key[0], at, base.error, other.error)
    kept.keep(key, base, cmp)
    return cmp


__all__ = ["ConfigComparison", "VariantTraces", "compare_configs", "variant_config", "variants"]
