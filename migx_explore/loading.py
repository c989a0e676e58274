"""Model loading shared by the CLI verbs (and the GPU layer): MODEL is an .onnx path, a built-in
model name (`migx_explore.models`), or a saved program file (compiler.serialize, a zip).
`--input-dim name=1,3,224,224` (repeatable) fixes input dims."""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Program

from .npz import read_npz


def _dim(tok: str) -> int | tuple[int, int]:
    lo, dots, hi = tok.strip().partition("..")
    return (int(lo), int(hi)) if dots else int(lo)


def parse_input_dims(items: Sequence[str] | None) -> dict[str, list]:
    """['x=1,3,224,224', 'y=1..8,16'] -> {'x': [1, 3, 224, 224], 'y': [(1, 8), 16]}; `lo..hi` is a
    dynamic dimension (a range), for the dynamic-shape passes."""
    out: dict[str, list] = {}
    for item in items or ():
        name, eq, dims = item.partition("=")
        name = name.strip()
        if not eq or not name:
            raise MigxError(f"--input-dim {item!r}: expected NAME=D0,D1,... (e.g. x=1,3,224,224 or x=1..8,64)")
        try:
            lens = [_dim(d) for d in dims.replace("x", ",").split(",") if d.strip()] if dims.strip() else []
        except ValueError:
            raise MigxError(
                f"--input-dim {item!r}: dims must be integers (or lo..hi ranges) separated by commas"
            ) from None
        flat = [v for d in lens for v in (d if isinstance(d, tuple) else (d,))]
        if any(d < 0 for d in flat) or any(d[0] > d[1] for d in lens if isinstance(d, tuple)):
            raise MigxError(f"--input-dim {item!r}: dims must not be negative and ranges must be lo..hi")
        if name in out:
            raise MigxError(f"--input-dim names {name!r} twice")
        out[name] = lens
    return out


def model_label(model: Any) -> str:
    """A short display name: the file stem of a path, or the built-in model's name."""
    if isinstance(model, (str, os.PathLike)):
        p = Path(model)
        return p.stem if p.suffix else str(model)
    return "model"


def load(
    model: Any, input_dims: Mapping[str, Sequence[int]] | None = None, feed: Mapping[str, Any] | None = None
) -> Program:
    """A Program from an .onnx path, a built-in model name, a saved program file, ONNX bytes or a
    ModelProto. Unknown names and missing files raise MigxError listing what would work.
    input_dims names inputs or ONNX dim_params; `feed` (arrays by input name) fixes the dims of
    every input from the arrays, so a KV-cache model needs no flags (compiler/onnx/dims.py)."""
    from migx_explore.compiler.onnx import parse_onnx

    if isinstance(model, Program):
        return model.copy()
    if not isinstance(model, (str, os.PathLike)):
        return parse_onnx(model, input_dims=input_dims, feed=feed)
    path = Path(model)
    if path.is_file():
        if _looks_like_zip(path):  # a saved program, even truncated (is_zipfile needs the central directory)
            from migx_explore.compiler.serialize import load_program_file

            if input_dims:
                raise MigxError("--input-dim does not apply to a saved program file (its shapes are fixed)")
            return load_program_file(path).program
        return parse_onnx(path, input_dims=input_dims, feed=feed)
    from . import models

    if str(model) in models.list_models():
        return models.load(str(model), feed=feed, **dict(input_dims or {}))
    if path.is_dir():
        raise MigxError(f"model {str(model)!r} is a directory; give the .onnx file (or saved program) inside it")
    if path.exists():
        raise MigxError(f"model {str(model)!r} is not a regular file")
    if path.suffix == ".onnx" or os.sep in str(model):
        raise MigxError(f"model file {str(model)!r} not found")
    from migx_explore.compiler.errors import did_you_mean

    hint = did_you_mean(str(model), models.list_models())
    raise MigxError(
        f"{str(model)!r} is neither a file nor a built-in model"
        + (hint or f"; built-in models: {', '.join(models.list_models())}")
    )


def _looks_like_zip(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04" or zipfile.is_zipfile(f)
    except OSError:
        return False


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        metavar="MODEL",
        help="an .onnx file, a built-in model name (`migx-explore onnx --models` lists them), or a saved program file",
    )
    p.add_argument(
        "--input-dim",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="fix an input's dims, e.g. x=1,3,224,224, or x=1..8,64 for a dynamic range, or an "
        "ONNX symbolic dim by name for every input using it, e.g. P=1..255 (repeatable); with "
        "--inputs the dims come from the feed; other symbolic dims default to 1",
    )


def load_program(source: Any, input_dims: Mapping[str, Sequence[int]] | None = None) -> Any:
    """CLI form: `load_program(args)` with MODEL / --input-dim parsed -> (program, label).
    Library form: `load_program(source, input_dims)` -> Program (see `load`)."""
    if isinstance(source, argparse.Namespace):
        dims = parse_input_dims(getattr(source, "input_dim", None))
        feed = read_npz(source.inputs) if getattr(source, "inputs", None) else None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program = load(source.model, dims or None, feed=feed)
        for line in collapse_warnings([str(w.message) for w in caught]):  # one line, no file:line noise
            print(f"migx-explore: warning: {line}", file=sys.stderr)
        return program, model_label(source.model)
    return load(source, input_dims)


_UNFIXED = re.compile(
    r"input '(?P<input>[^']+)': dimension \d+ \('(?P<dim>[^']+)'\) is not fixed; using (?P<value>\S+) "
)


def collapse_warnings(messages: list[str]) -> list[str]:
    """The warnings of loading a model as few lines: the same message once, and every symbolic
    dim left unfixed in one line naming the dims and the inputs that use them (a decoder has one
    such warning per cache input)."""
    unfixed: dict[tuple[str, str], list[str]] = {}
    out: list[str] = []
    if sum(1 for m in messages if _UNFIXED.match(m)) < 2:  # one is said best as it is
        return list(dict.fromkeys(messages))
    for m in messages:
        hit = _UNFIXED.match(m)
        if hit:
            unfixed.setdefault((hit["dim"], hit["value"]), []).append(hit["input"])
        elif m not in out:
            out.append(m)
    if unfixed:
        parts = []
        for (dim, value), inputs in unfixed.items():
            shown = ", ".join(inputs[:3]) + (f" and {len(inputs) - 3} more" if len(inputs) > 3 else "")
            parts.append(f"{dim}={value} ({shown})")
        first = next(iter(unfixed))[0]
        out.insert(
            0,
            "symbolic dims not fixed, using " + "; ".join(parts) + f": set them with --input-dim {first}=... "
            f"(input_dims={{{first!r}: ...}} in Python) or give a feed",
        )
    return out
