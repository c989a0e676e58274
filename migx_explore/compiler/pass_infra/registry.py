"""Passes by name, from explicit tables.

Each pass package lists its passes in one table (`PASSES` in migx_explore/compiler/passes/,
`GPU_PASSES` in migx_explore/gpu/passes/) and registers that table from its `__init__`; the
package that owns the table is imported by its layer's `__init__`, so a pass is findable by name
as soon as its layer is. Defining a `Pass` subclass registers nothing by itself: a pass missing
from its table is caught by tests/passes/test_pass_tables.py, which checks each table against
its folder.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from ..errors import MigxError
from .base import Pass

_PASSES: dict[str, type[Pass]] = {}


def register(classes: Iterable[type[Pass]]) -> None:
    """Make `classes` findable by `make_pass`. Registering a second, different class under a name
    already taken is a bug in a table and fails naming both."""
    for cls in classes:
        name = cls.registry_name()
        if name is None:
            raise MigxError(f"{cls.__module__}.{cls.__qualname__} has no pass name to register under")
        old = _PASSES.get(name)
        if old is not None and old is not cls:
            raise MigxError(
                f"pass name {name!r} is taken by {old.__module__}.{old.__qualname__}; "
                f"cannot register {cls.__module__}.{cls.__qualname__} under it too"
            )
        _PASSES[name] = cls


def pass_registry() -> dict[str, type[Pass]]:
    return dict(_PASSES)


def make_pass(name: str, **options: Any) -> Pass:
    cls = _PASSES.get(name)
    if cls is None:
        close = difflib.get_close_matches(name, _PASSES, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise MigxError(f"unknown pass {name!r}{hint}; known passes: {', '.join(sorted(_PASSES))}")
    return cls().with_options(**options) if options else cls()
