"""Compile modes as MIGraphX PR #4770 defines them, for the widget's mode box (widgets reach the
GPU layer's catalogue through here)."""

from __future__ import annotations

from migx_explore.gpu.migraphx_catalogue import LATEST, mode_catalogue
from migx_explore.gpu.pipelines import COMPILE_MODES

_WHAT = {"eager": ", no benchmarking", "balanced": "", "max": ", exhaustive tuning"}


def mode_options(version: str = LATEST) -> list[tuple[str, str]]:
    """(label, mode) per compile mode: `eager (79 entries, no benchmarking)`, ..."""
    return [(f"{m} ({len(mode_catalogue(version, m))} entries{_WHAT.get(m, '')})", m) for m in COMPILE_MODES]


__all__ = ["mode_options"]
