"""How each pass fares on MIGraphX's own pass tests: the summary scripts/migraphx_conformance.py
writes from the transcribed suite (tests/migraphx/), shipped with the package so `migx-explore
passes` and the explorer can show it without the tests."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("migraphx_conformance.json")


@cache
def conformance_table() -> dict[str, Any]:
    """{"passes": {pass: {"cases", "MATCH", "EQUIV", "DIFF", "not_transcribed", "source", "diffs"}},
    "migraphx_commit": ...}; empty where the file is missing (a stripped install)."""
    try:
        return json.loads(DATA.read_text())
    except (OSError, ValueError):
        return {}


def pass_conformance(name: str) -> dict[str, Any] | None:
    return conformance_table().get("passes", {}).get(name)


def conformance_summary(name: str) -> str:
    """ "MIGraphX tests: 120/128" (cases that MATCH or are EQUIV, of all transcribed), or ""."""
    c = pass_conformance(name)
    if not c or not c.get("cases"):
        return ""
    return f"MIGraphX tests: {c['MATCH'] + c['EQUIV']}/{c['cases']}"
