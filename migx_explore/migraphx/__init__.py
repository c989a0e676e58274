"""MIGraphX's own output in the explorer: printed programs and compile logs read into our IR and
Trace (`read_log`), a Session over them (`Session.from_migraphx`), and ours beside theirs
(`compare`). docs/migraphx_traces.md describes the grammar covered."""

from __future__ import annotations

from .load import MigraphxLog, is_migraphx_text, load_session, read_log

__all__ = ["MigraphxLog", "is_migraphx_text", "load_session", "read_log"]
