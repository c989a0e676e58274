"""The Compare view's part of Views: any two passes, or this pass on vs off, stepped one differing
instance at a time (the rewrite instances of A -> B, as if B came from A in one pass), each drawn
before | after at reading scale like the Rewrites view; "whole change" draws every difference
(the scope overview past the node budget)."""

from __future__ import annotations

from typing import Any

from .. import compare_regions, config_compare
from ..session import Session
from . import content


class CompareMixin:
    """Methods of Views (widgets/views.py) for the Compare view; they use its controls."""

    def _fill_compare_choices(self, session: Session) -> None:
        tops = [(("" if r.changed else "· ") + r.path, r.index) for r in session.trace_so_far.top_level()]
        options = [("(input program)", -1)] + tops
        if list(self.compare_a.options) == options:
            return
        old_a, old_b = self.compare_a.value, self.compare_b.value
        idx = {v for _, v in options}
        self._quiet = True  # one redraw after both lists changed, not one per trait
        try:
            self.compare_a.options = options
            self.compare_b.options = options
            self.compare_a.value = old_a if old_a in idx else -1
            self.compare_b.value = old_b if old_b in idx else options[-1][1]
        finally:
            self._quiet = False

    def _default_compare(self, session: Session) -> None:
        """Outside the Compare view, keep its choice on 'the previous change vs this pass', so
        opening it shows the step the user is on against the last one that changed the IR."""
        cur = session.current
        if cur.depth > 0 or self.select.value == "compare":
            return
        earlier = [r.index for r in session.trace_so_far.top_level() if r.changed and r.index < cur.index]
        self._quiet = True
        try:
            self.compare_a.value = earlier[-1] if earlier else -1
            self.compare_b.value = cur.index
        finally:
            self._quiet = False

    def _compare_titles(self) -> tuple[str, str]:
        if self.compare_mode.value == "config" and self._config_titles:
            return self._config_titles
        names = dict((v, k.lstrip("· ")) for k, v in self.compare_a.options)
        return (f"A: {names.get(self.compare_a.value, '?')}", f"B: {names.get(self.compare_b.value, '?')}")

    def _compared(self) -> tuple[Any, Any]:
        """The two programs the Compare view shows (A, B)."""
        if self.compare_mode.value != "config":
            self._config_titles = None
            return self._snapshot_at(self.compare_a.value), self._snapshot_at(self.compare_b.value)
        cmp = self.config_comparison()
        base, variant = (cmp.base, cmp.labels[0]), (cmp.variant, cmp.labels[1])
        # A is the program without the pass, B the one with it: A -> B is what the pass brings.
        (a, la), (b, lb) = (variant, base) if not cmp.toggles[0][1] else (base, variant)
        self._config_titles = (f"A: {la}", f"B: {lb}")
        return a, b

    def config_comparison(self) -> Any:
        """The current top-level pass switched the other way, traced on a copy of the
        configuration, against the program as configured (a config_compare.ConfigComparison)."""
        s = self._session
        cur = s.current
        top = next(r for r in reversed(s.trace_so_far.top_level()) if r.index <= cur.index)
        at = top.path if self.compare_at.value == "here" else ""
        return config_compare.compare_configs(s, {top.path: not top.enabled}, at=at)

    def _snapshot_at(self, index: int) -> Any:
        s = self._session
        return s.initial if index < 0 else s.snapshots(index)[1]

    def _render_compare(self) -> str:
        s = self._session
        a, b = self._compared()
        titles = self._compare_titles()
        regions, instances, d = compare_regions.instances_between(s, a, b)
        self._use_regions(regions)
        k = self._region()
        self.compare_text.value = content.side_by_side_text_html(a.text, b.text, titles)
        self._markup["compare:right"] = ""
        if k is not None and instances:
            # the instance's two sides in the synced panels, each laid out to its half of the pane
            from ..render.instance import instance_sides, render_instance

            inst = instances[k]
            left, right = instance_sides(a, b, inst.before, inst.after, d, titles=titles)
            w, h = self._pane()
            self._markup["compare:right"] = render_instance(right, (w / 2, h), prefix="cb_")
            return render_instance(left, (w / 2, h), prefix="ca_")
        changed = sum(len(r.ids) for r in regions)
        if changed > content.OVERVIEW_OVER:  # the whole difference past the node budget: the overview
            from .. import render
            from ..render.overview import scope_overview
            from ..render.pane_layout import render_to_pane

            g = scope_overview(a, b, d, compare_regions.scopes_of(s, a, b), tuple(self.open_scopes))
            return str(render_to_pane(g, render.DotOptions(id_prefix="ca_"), self._pane()))
        left, right = content.compare_svgs(a, b, titles, expand=self.clusters)
        self._markup["compare:right"] = right
        return left

    def compare(self, a: str | int, b: str | int) -> None:
        """Show the Compare view of the IR after pass `a` and after pass `b` (paths or indexes;
        -1: the input program)."""
        s = self._session
        ia = a if isinstance(a, int) else s.trace.find(a).index
        ib = b if isinstance(b, int) else s.trace.find(b).index
        self._fill_compare_choices(s)  # the choices list passes traced so far; these may be later
        self._quiet = True  # one drawing at the end, not one per control
        try:
            self.compare_a.value, self.compare_b.value = ia, ib
            self.compare_mode.value = "passes"
        finally:
            self._quiet = False
        self.select.value = "compare"
        self._show_selected()

    def compare_pass_off(self, at: str = "final") -> None:
        """Show the Compare view of the current pass on vs off ("final": the final programs,
        "here": the IR right after the pass) without changing the session's toggles."""
        self._quiet = True
        try:
            self.compare_at.value = at
            self.compare_mode.value = "config"
        finally:
            self._quiet = False
        self.select.value = "compare"
        self._show_selected()
