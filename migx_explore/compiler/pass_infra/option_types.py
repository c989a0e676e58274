"""Every pass option a spec can set has a type and a range; a bad value is one line naming the
pass, the option and what it takes (a spec is user input: `fuse_pointwise_reduce(split_size=-1)`
must not reach the pass). The type comes from the option's dataclass field; ranges and choices are
the table below, so a new int or str option without an entry gets the defaults (>= 0, < 2^31;
text of at most 256 characters)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..errors import MigxError

INT_MAX = 2**31 - 1
MAX_TEXT = 256
MAX_ITEMS = 256

# (pass, option) or option -> (lo, hi) for ints, or a tuple of allowed strings
RANGES: dict[tuple[str, str] | str, tuple[int, int] | tuple[str, ...]] = {
    "split_size": (1, INT_MAX),
    "split_threshold": (1, INT_MAX),
    "max_head_dim": (0, 1 << 16),
    "max_iterations": (1, 10_000),
    "nstreams": (1, 64),
    "depth": (1, 64),
}  # type names (float_type, target_type, precision) are checked by their passes, aliases included


class OptionError(MigxError):
    """A pass option value outside its type or range."""


def _takes(pass_name: str, key: str, kind: str) -> str:
    rng = RANGES.get((pass_name, key), RANGES.get(key))
    if kind == "bool":
        return "true or false"
    if kind == "int":
        lo, hi = rng if isinstance(rng, tuple) and rng and isinstance(rng[0], int) else (0, INT_MAX)
        return f"an integer in [{lo}, {hi}]"
    if kind == "str":
        if rng and isinstance(rng[0], str):
            return "one of " + ", ".join(rng)
        return f"a name or quoted text of at most {MAX_TEXT} characters"
    if kind == "tuple[str, ...]":
        return f"a list of at most {MAX_ITEMS} names, e.g. {{dot, convolution}}"
    return "a Python value (set it from Python, not in a spec)"


def check_option(pass_name: str, key: str, kind: str, value: Any) -> Any:
    """`value` checked against the option's type and range (a list becomes a tuple); raises
    OptionError naming the pass, the option, what it takes and what it got."""

    def bad() -> OptionError:
        got = repr(value)
        got = got if len(got) <= 40 else f"{got[:37]}..."
        return OptionError(f"pass {pass_name}: option {key} takes {_takes(pass_name, key, kind)}, not {got}")

    rng = RANGES.get((pass_name, key), RANGES.get(key))
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if not (isinstance(value, float) and math.isfinite(value) and value.is_integer()):
                raise bad()
            value = int(value)
        lo, hi = rng if isinstance(rng, tuple) and rng and isinstance(rng[0], int) else (0, INT_MAX)
        if not lo <= value <= hi:
            raise bad()
        return value
    if kind == "str":
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise bad()
        if rng and isinstance(rng[0], str) and value not in rng:
            raise bad()
        return value
    if kind == "tuple[str, ...]":
        items = (value,) if isinstance(value, str) else value
        if not isinstance(items, (tuple, list)) or len(items) > MAX_ITEMS:
            raise bad()
        if not all(isinstance(v, str) and len(v) <= MAX_TEXT for v in items):
            raise bad()
        return tuple(items)
    raise bad()


def check_options(pass_cls: type, pass_name: str, options: dict[str, Any]) -> dict[str, Any]:
    """check_option over `options` for a pass class (unknown names are left to with_options)."""
    kinds = {f.name: str(f.type) for f in dataclasses.fields(pass_cls)}
    return {k: check_option(pass_name, k, kinds[k], v) if k in kinds else v for k, v in options.items()}


__all__ = ["OptionError", "RANGES", "check_option", "check_options"]
