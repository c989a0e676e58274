"""Helpers for render tests: a small DOT reader (our writer puts one statement per line)."""

from __future__ import annotations

import re
import shutil

import pytest

NODE_RE = re.compile(r'^\s*"([^"]+)" \[(.*)\];$', re.M)
EDGE_RE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)" \[(.*)\];$', re.M)
ATTR_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def dot_nodes(dot: str) -> dict[str, dict[str, str]]:
    return {m.group(1): dict(ATTR_RE.findall(m.group(2))) for m in NODE_RE.finditer(dot)}


def dot_edges(dot: str) -> list[tuple[str, str, dict[str, str]]]:
    return [(m.group(1), m.group(2), dict(ATTR_RE.findall(m.group(3)))) for m in EDGE_RE.finditer(dot)]


needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` is not installed")
