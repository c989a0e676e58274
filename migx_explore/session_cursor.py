"""The cursor: where the user is in a trace (a record index) and which records stepping visits
(the view: nested passes, hide unchanged, a path filter). It reads a trace and never changes one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from migx_explore.compiler.errors import did_you_mean
from migx_explore.compiler.pass_infra import PassRecord, Trace

from .session_config import SessionError


@dataclass
class View:
    nested: bool = False  # step into children of composite passes
    hide_unchanged: bool = False  # skip no-op and disabled passes when stepping
    filter: str = ""  # only passes whose path contains this text


@dataclass
class Cursor:
    position: int = 0
    view: View = field(default_factory=View)

    def visible(self, trace: Trace) -> list[int]:
        v = self.view
        out = []
        for r in trace.records:
            if r.depth > 0 and not v.nested:
                continue
            if v.hide_unchanged and not r.changed and r.status != "failed":
                continue
            if v.filter and v.filter not in r.path:
                continue
            out.append(r.index)
        return out

    def current(self, trace: Trace) -> PassRecord:
        if not trace.records:
            raise SessionError("the pipeline is empty")
        self.clamp(trace)
        return trace.records[self.position]

    def clamp(self, trace: Trace) -> None:
        self.position = min(self.position, max(len(trace.records) - 1, 0))

    def move(self, trace: Trace, delta: int) -> PassRecord:
        vis = self.visible(trace)
        if vis:
            later = [i for i in vis if i > self.position] if delta > 0 else [i for i in vis if i < self.position][::-1]
            if later:
                self.position = later[min(abs(delta), len(later)) - 1]
        return self.current(trace)

    def first(self, trace: Trace) -> PassRecord:
        vis = self.visible(trace)
        self.position = vis[0] if vis else 0
        return self.current(trace)

    def last(self, trace: Trace) -> PassRecord:
        vis = self.visible(trace)
        self.position = vis[-1] if vis else 0
        return self.current(trace)

    def first_changed(self, trace: Trace) -> PassRecord:
        """The first visible pass that changed the IR (a failure counts: it is what to look at);
        the first visible pass when none did."""
        vis = self.visible(trace)
        hit = next((i for i in vis if trace.records[i].changed or trace.records[i].status == "failed"), None)
        self.position = hit if hit is not None else (vis[0] if vis else 0)
        return self.current(trace)

    @staticmethod
    def check_target(where: object) -> None:
        """A goto target is a pass path or a record position; anything else is the caller's error."""
        if isinstance(where, bool) or not isinstance(where, (int, str)):
            raise SessionError(
                f"goto needs a pass path (str) or a position (int), not {type(where).__name__} {where!r}"
            )

    def goto(self, trace: Trace, where: str | int) -> PassRecord:
        self.check_target(where)
        if isinstance(where, int):
            if not 0 <= where < len(trace.records):
                raise SessionError(f"position {where} is out of range 0..{len(trace.records) - 1}")
            self.position = where
        else:
            try:
                self.position = trace.find(where).index
            except KeyError:
                if trace.error:  # the pass may exist but never ran: say why, not just "no pass"
                    raise SessionError(f"no pass {where!r} in the trace, which stopped early: {trace.error}") from None
                hint = did_you_mean(where, (r.path for r in trace.records)) or (
                    f"; e.g. {', '.join(r.path for r in trace.top_level()[:4])}"
                )
                raise SessionError(f"no pass {where!r} in the trace{hint}") from None
        return self.current(trace)

    def snap_to_visible(self, trace: Trace) -> PassRecord:
        """Stay put if the current record is visible, else move to the next visible one (or the last)."""
        vis = self.visible(trace)
        if vis and self.position not in vis:
            later = [i for i in vis if i >= self.position]
            self.position = later[0] if later else vis[-1]
        return self.current(trace)


__all__ = ["Cursor", "SessionError", "View"]
