"""What a report records so someone else can make it again: the model's hash, the pipeline spec,
the precision, the package version, the command line, and when and where it was made."""

from __future__ import annotations

import datetime
import hashlib
import os
import platform
import re
import shlex
import sys
from typing import TYPE_CHECKING, Any

from ..recipe import make_recipe

if TYPE_CHECKING:  # pragma: no cover
    from ..session import Session


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def program_sha256(session: Session) -> str:
    """The hash of the input program's printed IR (structure and shapes; a built-in model has no
    file to hash, and two loads of one file print the same text)."""
    return hashlib.sha256(session.initial.text.encode("utf-8")).hexdigest()


def package_version() -> str:
    # From the installed metadata: importing the package root for __version__ would pull in the
    # widgets (an import cycle through the session).
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("migx-explore")
    except PackageNotFoundError:
        return "unknown (not installed)"


def cli_command(argv: list[str] | None = None) -> str:
    """The command line as a shell would re-run it."""
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["migx-explore", *args])


def repro_info(session: Session, *, command: str = "", inputs_path: str | None = None) -> dict[str, Any]:
    """Plain data for the report's header (every value a string, so the page shows it as given)."""
    src = session.source
    info: dict[str, Any] = {"model": session.name, "source": f"{src.get('kind', 'program')}: {src.get('value', '')}"}
    if src.get("kind") == "onnx" and os.path.isfile(str(src.get("value"))):
        info["model_sha256"] = file_sha256(str(src["value"]))
    info["program_sha256"] = program_sha256(session)
    if src.get("input_dims"):
        info["input_dims"] = ", ".join(f"{k}={'x'.join(map(str, v))}" for k, v in src["input_dims"].items())
    recipe = make_recipe(session)
    info["spec"] = recipe.spec or session.config.label()
    info["mode"] = session.config.options.mode
    info["precision"] = session.config.options.precision
    if recipe.disable_passes:
        info["migraphx_env"] = recipe.env()
    if inputs_path:
        info["inputs"] = f"{inputs_path} (sha256 {file_sha256(inputs_path)})"
    else:
        cfg = session.traces.numeric_config()
        info["inputs"] = (
            "none (numeric check off)"
            if cfg is None
            else "seeded random inputs"
            if cfg.random_inputs
            else "the session's inputs"
        )
    info["version"] = f"migx-explore {package_version()}"
    info["python"] = f"{platform.python_version()} on {platform.system()} {platform.machine()}"
    info["created"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    info["command"] = command or "(made from Python: see the repro script)"
    info["script"] = recipe.script
    info["warnings"] = session.config.warnings()
    return {k: _no_machine_paths(v) for k, v in info.items()}


# An absolute path's folders (the machine's layout: home, user, checkout), not its file name.
_ABS_DIRS = re.compile(r"(?<![\w.:/~-])(?:[A-Za-z]:)?[/\\](?:[^\s/\\'\"]+[/\\])+")


def _no_machine_paths(value: Any) -> Any:
    """`value` with every absolute path cut to its file name: a report is shared, and where a file
    lay on the machine that made it is neither needed to re-run it nor the reader's business."""
    if isinstance(value, str):
        return _ABS_DIRS.sub("", value)
    if isinstance(value, list):
        return [_no_machine_paths(v) for v in value]
    return value


__all__ = ["cli_command", "file_sha256", "package_version", "program_sha256", "repro_info"]
