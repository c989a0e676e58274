"""The pipeline configuration a session traces: the GPU target's pipelines with the user's toggles,
order, options and inserted passes, and the compile options. Pure data plus edits (no trace, no
position), so what a toggle changes is testable on its own.

Every edit holds `lock` (a session's trace cache runs each entry under the same lock, so a
background trace never sees an edit half-made) and bumps `version`; the trace cache compares
versions to know when to re-trace, and
`identity()` names the configuration for results keyed by it (GPU timings), including custom
pipelines whose spec string cannot express them (user passes are named by object identity).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.pass_infra import PassEntry, Pipeline, check_order, entry_paths, spec_from_pipelines
from migx_explore.gpu.pipelines import CompileOptions, gpu_pipelines

# One top-level entry as the trace cache sees it: (pipeline index, entry index, path, prefix key).
FlatEntry = tuple[int, int, str, tuple]


class SessionError(MigxError):
    """A bad request to a session: an unknown pass name, an ambiguous target, a position out of range."""


_Edit = TypeVar("_Edit", bound=Callable[..., Any])


def _locked(edit: _Edit) -> _Edit:
    """Run an edit under the configuration's lock (it is re-entrant: edits call edits)."""

    @functools.wraps(edit)
    def under_lock(self: PipelineConfig, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return edit(self, *args, **kwargs)

    return under_lock  # type: ignore[return-value]


def _entry_key(pl: Pipeline, e: PassEntry, path: str) -> tuple:
    opts = tuple(sorted((n, repr(v)) for n, v in e.pass_.options().items()))
    # A user pass is identified by the object (two different lambdas may share a name).
    ident = ("user", id(e.pass_)) if e.user else type(e.pass_).__name__
    return (pl.name, pl.enabled, path, e.enabled, opts, ident)


class PipelineConfig:
    """The five sub-pipelines as the user has edited them, plus the compile options."""

    def __init__(self, options: CompileOptions | None = None, *, include_backend: bool = True):
        self.lock = threading.RLock()
        self.options = options or CompileOptions()
        self.include_backend = include_backend
        self.catalog: list[Pipeline] = gpu_pipelines(self.options, include_backend=include_backend)
        self._pipelines: list[Pipeline] = [p.copy() for p in self.catalog]
        self.version = 0
        # Objects referenced by identity() (user passes) stay alive while the config does, so an
        # id() in a key can never be reused by another object.
        self._user_passes: list[Any] = []

    # ---- reading ------------------------------------------------------------------------------------
    @property
    def pipelines(self) -> list[Pipeline]:
        return self._pipelines

    @pipelines.setter
    @_locked
    def pipelines(self, value: list[Pipeline]) -> None:
        self._pipelines = list(value)
        self.touch()

    def touch(self) -> None:
        """Mark the configuration changed (for edits made to the Pipeline objects directly)."""
        self.version += 1

    def flat(self) -> list[FlatEntry]:
        """Every top-level entry with the key of its pipeline prefix (entries up to and including it)."""
        out: list[FlatEntry] = []
        prefix: tuple = ()
        for pi, pl in enumerate(self._pipelines):
            for k, (e, path) in enumerate(zip(pl.entries, entry_paths(pl))):
                prefix = prefix + (_entry_key(pl, e, path),)
                out.append((pi, k, path, prefix))
        return out

    def identity(self) -> tuple:
        """A hashable name of this configuration: equal exactly when two configurations run the same
        passes with the same options in the same order (and the same compile options)."""
        for pl in self._pipelines:
            for e in pl.entries:
                if e.user and all(p is not e.pass_ for p in self._user_passes):
                    self._user_passes.append(e.pass_)
        flat = self.flat()
        return (repr(self.options), flat[-1][3] if flat else ())

    def entries(self) -> Iterator[tuple[str, PassEntry, Pipeline]]:
        for pl in self._pipelines:
            for e, path in zip(pl.entries, entry_paths(pl)):
                yield path, e, pl

    def warnings(self) -> list[str]:
        out = [str(w) for w in check_order(self._pipelines)]
        # A range traced in buckets is not a trace of every size: every view that lists these says so.
        out += [
            f"{path} traces the dynamic range as the decoder's buckets ({e.pass_.buckets}): one submodule "
            f"per bucket, not per size (buckets='' traces every size)"
            for path, e, pl in self.entries()
            if e.enabled and pl.enabled and getattr(e.pass_, "buckets", "")
        ]
        return out

    def spec(self) -> str:
        return spec_from_pipelines(self._pipelines, self.catalog)

    def label(self) -> str:
        """The spec string, or 'custom pipeline (...)' when the spec cannot express it."""
        try:
            return self.spec()
        except MigxError:
            users = [path for path, e, _ in self.entries() if e.user]
            return "custom pipeline" + (f" (+{', '.join(users)})" if users else "")

    def copy(self) -> PipelineConfig:
        """An independent configuration with the same pipelines, toggles and options (entries are
        copied; passes are shared, so the copy's prefix keys match this one's)."""
        new = object.__new__(PipelineConfig)
        new.options, new.catalog = self.options, self.catalog
        new._pipelines = [p.copy() for p in self._pipelines]
        new.version = 0
        new._user_passes = list(self._user_passes)
        new.lock = threading.RLock()
        return new

    # ---- resolving names ------------------------------------------------------------------------------
    def resolve(self, target: str) -> list[tuple[Pipeline, PassEntry]]:
        hits = []
        for pl in self._pipelines:
            if target == pl.name:
                return [(pl, e) for e in pl.entries]
            for e, path in zip(pl.entries, entry_paths(pl)):
                base = path.split("#")[0]
                if target in (path, e.name) or (target == base and "#" not in target):
                    hits.append((pl, e))
        if not hits:
            names = sorted({e.name for pl in self._pipelines for e in pl.entries})
            raise SessionError(
                f"no pass or pipeline {target!r}; pipelines: "
                f"{', '.join(p.name for p in self._pipelines)}; passes: {', '.join(names)}"
            )
        return hits

    def one(self, target: str) -> tuple[Pipeline, PassEntry]:
        hits = self.resolve(target)
        if len(hits) != 1:
            paths = [
                p for pl in self._pipelines for p, e in zip(entry_paths(pl), pl.entries) if any(e is h for _, h in hits)
            ]
            raise SessionError(f"{target!r} names {len(hits)} entries; pick one of {', '.join(paths[:8])}")
        return hits[0]

    # ---- edits ------------------------------------------------------------------------------------------
    @_locked
    def set_enabled(self, target: str, enabled: bool, reason: str = "") -> list[str]:
        pl = next((p for p in self._pipelines if p.name == target), None)
        if pl is not None:
            pl.enabled = enabled
            self.touch()
            return [pl.name]
        changed = []
        for _, e in self.resolve(target):
            if e.enabled != enabled:
                e.enabled = enabled
                e.reason = "" if enabled else (reason or "disabled by the user")
                changed.append(e.name)
        self.touch()
        return changed

    @_locked
    def set_mode(self, mode: str) -> None:
        """A compile mode. In the 2026-08 catalogue a mode picks other entries (PR #4770: eager's
        short optimize_rewrite list, fuse_attention off, no benchmarking), so the pipelines are
        rebuilt, keeping the user's toggles and inserted passes where their positions still exist;
        in 2026-05, eager switches optimize_rewrite off."""
        self.options = dataclasses.replace(self.options, mode=mode)
        if self.options.migraphx != "2026-05":
            self._rebuild()
            return
        for pl in self._pipelines:
            if pl.name == "optimize_rewrite":
                pl.enabled = mode != "eager"
        self.touch()

    def _rebuild(self) -> None:
        old_catalog = {(pl.name, path): e for pl in self.catalog for e, path in zip(pl.entries, entry_paths(pl))}
        toggles, inserted = {}, []
        for pl in self._pipelines:
            prev = None
            for e, path in zip(pl.entries, entry_paths(pl)):
                base = old_catalog.get((pl.name, path))
                if e.user:
                    inserted.append((pl.name, prev, e))
                    continue
                if base is not None and (e.enabled != base.enabled or e.pass_ != base.pass_):
                    toggles[(pl.name, path)] = e
                prev = path
        self.catalog = gpu_pipelines(self.options, include_backend=self.include_backend)
        self._pipelines = [p.copy() for p in self.catalog]
        for pl in self._pipelines:
            for k, path in enumerate(entry_paths(pl)):
                mine = toggles.get((pl.name, path))
                if mine is not None and mine.name == pl.entries[k].name:
                    pl.entries[k] = dataclasses.replace(mine)
        for name, after, e in inserted:
            pl = next((p for p in self._pipelines if p.name == name), None)
            if pl is None:
                continue
            paths = entry_paths(pl)
            at = paths.index(after) + 1 if after in paths else len(pl.entries)
            pl.entries.insert(at, e)
        self.touch()

    @_locked
    def set_options(self, target: str, **options: Any) -> None:
        for _, e in self.resolve(target):
            e.pass_ = e.pass_.with_options(**options)
        self.touch()

    @_locked
    def insert(self, entry: PassEntry, *, after: str | None = None, before: str | None = None) -> str:
        if (after is None) == (before is None):
            raise SessionError("insert_pass needs exactly one of after= or before=")
        pl, e = self.one(after or before)
        k = pl.entries.index(e) + (1 if after else 0)
        pl.entries.insert(k, entry)
        self.touch()
        return entry_paths(pl)[k]

    @_locked
    def remove(self, target: str) -> None:
        pl, e = self.one(target)
        pl.entries.remove(e)
        self.touch()

    @_locked
    def move(self, target: str, *, after: str | None = None, before: str | None = None) -> str:
        pl, e = self.one(target)
        dst_pl, dst = self.one(after or before)  # resolved before removing: a bad target changes nothing
        pl.entries.remove(e)
        k = dst_pl.entries.index(dst) + (1 if after else 0)
        dst_pl.entries.insert(k, e)
        self.touch()
        return entry_paths(dst_pl)[k]

    @_locked
    def reset(self) -> None:
        self._pipelines = [p.copy() for p in self.catalog]
        self.touch()

    def disabled_passes(self) -> list[str]:
        """Paths of entries (or whole pipelines) the configuration switches off."""
        out = [pl.name for pl in self._pipelines if not pl.enabled]
        return out + [path for path, e, pl in self.entries() if pl.enabled and not e.enabled]


__all__ = ["SessionError", "FlatEntry", "PipelineConfig"]
