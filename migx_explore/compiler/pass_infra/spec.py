"""Textual pipeline specs that parse and print back the same.

    required,optimize_rewrite{-fuse_horizontal},fusion{fuse_pointwise_reduce(split_size=1024)},backend
    dynamic_shapes,required,-rewrite_gelu,fusion          (top-level -name: disable everywhere)
    simplify_algebra,dead_code_elimination                (bare passes run as a pipeline of their own)

Grammar:
    spec := item ("," item)*
    item := NAME ["{" mod ("," mod)* "}"]  |  NAME "(" opts ")"  |  "-" NAME
    mod  := "-" ref  |  "+" ref  |  ref "(" opts ")"
    ref  := NAME ["#" N]        (N-th occurrence of the pass in that pipeline, 1-based)
    opts := KEY "=" VALUE ("," KEY "=" VALUE)*

`-ref` disables an entry (it stays visible in traces), `+ref` enables an entry the target disables
by default, `ref(k=v)` sets pass options. A top-level `-NAME` disables that pass in every
pipeline, or a whole pipeline if NAME is one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MigxError
from ..printer import format_value
from .base import PassEntry, Pipeline
from .option_types import check_options
from .registry import make_pass, pass_registry

_NAME = r"[A-Za-z_][A-Za-z0-9_:]*"
_REF = re.compile(rf"^({_NAME})(?:#(\d+))?$")
# A spec names pipelines, passes and a few options: even a long hand-written one is a few KB. The
# cap keeps a hostile one (megabytes of brackets) from costing gigabytes in the parser.
MAX_SPEC_CHARS = 64 * 1024
MAX_VALUE_CHARS = 1024


class SpecError(MigxError):
    pass


@dataclass
class Mod:
    kind: str  # "-" | "+" | "set"
    ref: str
    options: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        if self.kind == "set":
            return f"{self.ref}({_format_opts(self.options)})"
        return f"{self.kind}{self.ref}"


@dataclass
class SpecItem:
    name: str
    kind: str = "pipeline"  # "pipeline" | "pass" | "disable"
    mods: list[Mod] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        if self.kind == "disable":
            return f"-{self.name}"
        if self.kind == "pass" and self.options:
            return f"{self.name}({_format_opts(self.options)})"
        if self.mods:
            return f"{self.name}{{{','.join(map(str, self.mods))}}}"
        return self.name


def _format_opts(opts: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={format_value(v)}" for k, v in opts.items())


def format_spec(items: Sequence[SpecItem]) -> str:
    return ",".join(map(str, items))


def _split(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
            if depth < 0:
                raise SpecError(f"unbalanced {ch!r} in pipeline spec {text!r}")
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise SpecError(f"unclosed bracket in pipeline spec {text!r}")
    out.append("".join(cur).strip())
    return [x for x in out if x]


def _parse_opts(text: str, where: str) -> dict[str, Any]:
    from ..parser import ValueReader, atom_value

    opts = {}
    try:
        parts = _split(text)
    except SpecError as e:
        raise SpecError(f"{where}: options: {e}") from None
    for part in parts:
        k, eq, v = part.partition("=")
        if not eq:
            raise SpecError(f"{where}: option {part!r} needs the form key=value")
        key, text = k.strip(), v.strip()
        if len(text) > MAX_VALUE_CHARS:
            raise SpecError(f"{where}: option {key} has a value of {len(text)} characters (at most {MAX_VALUE_CHARS})")
        reader = ValueReader(text)
        try:
            value = reader.value()
        except (ValueError, RecursionError) as e:  # RecursionError: an unclosed bracket
            raise SpecError(f"{where}: option {key}={text!r} is not a value ({str(e)[:80]})") from None
        if reader.peek():  # the reader stops at the first token: never drop the rest silently
            raise SpecError(
                f"{where}: option {key}={text!r}: unexpected {text[reader.i :][:20]!r} after the value; "
                'a value is a number, true/false, a name, "quoted text" or {a, b}'
            )
        opts[key] = atom_value(value)
    return opts


def _parse_ref_call(text: str, where: str) -> tuple[str, dict[str, Any] | None]:
    text = text.strip()
    if text.endswith(")") and "(" in text:
        head, _, body = text.partition("(")
        label = f"{where}: pass {head.strip()}" if where else f"pass {head.strip()}"
        return head.strip(), _parse_opts(body[:-1], label)
    return text, None


def parse_spec(text: str) -> list[SpecItem]:
    if not isinstance(text, str):
        raise SpecError(f"a pipeline spec is text, not {type(text).__name__}")
    if len(text) > MAX_SPEC_CHARS:
        raise SpecError(
            f"pipeline spec is {len(text):,} characters, more than a spec needs (at most {MAX_SPEC_CHARS:,})"
        )
    items = []
    for raw in _split(text):
        if raw.startswith("-"):
            items.append(SpecItem(raw[1:].strip(), "disable"))
            continue
        if "{" in raw:
            head, _, body = raw.partition("{")
            if not body.endswith("}"):
                raise SpecError(f"pipeline spec item {raw!r}: expected '}}' at the end")
            mods = []
            for m in _split(body[:-1]):
                if m[0] in "-+":
                    mods.append(Mod(m[0], m[1:].strip()))
                else:
                    ref, opts = _parse_ref_call(m, head)
                    if opts is None:
                        raise SpecError(f"{head}{{{m}}}: write -{m} to disable, +{m} to enable, or {m}(k=v)")
                    mods.append(Mod("set", ref, opts))
            items.append(SpecItem(head.strip(), "pipeline", mods))
            continue
        name, opts = _parse_ref_call(raw, "")
        items.append(SpecItem(name, "pass" if opts is not None else "pipeline", [], opts or {}))
    return items


def build_pipelines(spec: str | Sequence[SpecItem], catalog: Sequence[Pipeline]) -> list[Pipeline]:
    """Apply a spec to the target's pipeline catalog; bare pass names become one-pass pipelines."""
    items = parse_spec(spec) if isinstance(spec, str) else list(spec)
    by_name = {p.name: p for p in catalog}
    passes = pass_registry()
    out: list[Pipeline] = []
    global_off: list[str] = []
    for it in items:
        if it.kind == "disable":
            if it.name not in by_name and it.name not in passes:
                raise SpecError(f"cannot disable {it.name!r}: not a pipeline ({', '.join(by_name)}) or a known pass")
            global_off.append(it.name)
            continue
        if it.name in by_name and it.kind == "pipeline":
            pl = by_name[it.name].copy()
            for m in it.mods:
                _apply_mod(pl, m)
            out.append(pl)
        elif it.name in passes:
            opts = check_options(passes[it.name], it.name, it.options)
            out.append(Pipeline(it.name, [PassEntry(make_pass(it.name, **opts))]))
        else:
            raise SpecError(
                f"unknown pipeline or pass {it.name!r}; pipelines: {', '.join(by_name)}; "
                f"passes: {', '.join(sorted(passes))}"
            )
    for name in global_off:
        for pl in out:
            if pl.name == name:
                pl.enabled = False
            for e in pl.entries:
                if e.name == name and e.enabled:
                    e.enabled, e.reason = False, f"disabled by spec (-{name})"
    return out


def _resolve(pl: Pipeline, ref: str) -> PassEntry:
    m = _REF.match(ref)
    if not m:
        raise SpecError(f"{pl.name}: bad pass reference {ref!r} (use name or name#N)")
    name, occ = m.group(1), int(m.group(2) or 1)
    hits = [e for e in pl.entries if e.name == name]
    if not hits:
        raise SpecError(f"pipeline {pl.name} has no pass {name!r}; its passes: {', '.join(dict.fromkeys(pl.names()))}")
    if occ > len(hits) or occ < 1:
        raise SpecError(f"pipeline {pl.name} has {len(hits)} occurrence(s) of {name}, not #{occ}")
    return hits[occ - 1]


def _apply_mod(pl: Pipeline, m: Mod) -> None:
    if m.ref.split("#")[0] == "*" or m.ref == "all":
        targets = pl.entries
    else:
        targets = [_resolve(pl, m.ref)]
    for e in targets:
        if m.kind == "-":
            e.enabled, e.reason = False, f"disabled by spec ({pl.name}{{-{m.ref}}})"
        elif m.kind == "+":
            e.enabled, e.reason = True, ""
        else:
            e.pass_ = e.pass_.with_options(**check_options(type(e.pass_), e.name, m.options))


def spec_from_pipelines(pipelines: Sequence[Pipeline], catalog: Sequence[Pipeline]) -> str:
    """The spec string that rebuilds `pipelines` from `catalog` (toggles and options as mods).

    Entries must keep the catalog's order (user-inserted passes cannot be expressed and raise)."""
    by_name = {p.name: p for p in catalog}
    items: list[SpecItem] = []
    for pl in pipelines:
        base = by_name.get(pl.name)
        if base is None:
            if len(pl.entries) == 1:
                e = pl.entries[0]
                items.append(SpecItem(e.name, "pass", [], e.pass_.non_default_options()))
                continue
            raise SpecError(f"pipeline {pl.name} is not in the target catalog")
        if [e.name for e in pl.entries] != base.names():
            raise SpecError(f"pipeline {pl.name} was reordered or has inserted passes; a spec cannot express that")
        mods = []
        counts: dict[str, int] = {}
        totals: dict[str, int] = {}
        for e in base.entries:
            totals[e.name] = totals.get(e.name, 0) + 1
        for e, b in zip(pl.entries, base.entries):
            counts[e.name] = counts.get(e.name, 0) + 1
            ref = e.name + (f"#{counts[e.name]}" if totals[e.name] > 1 else "")
            if e.enabled != b.enabled:
                mods.append(Mod("-" if not e.enabled else "+", ref))
            diff_opts = {k: v for k, v in e.pass_.options().items() if b.pass_.options().get(k) != v}
            if diff_opts:
                mods.append(Mod("set", ref, diff_opts))
        items.append(SpecItem(pl.name, "pipeline", mods))
        if not pl.enabled:
            items.append(SpecItem(pl.name, "disable"))
    return format_spec(items)


def clone_entry(e: PassEntry) -> PassEntry:
    return dataclasses.replace(e)
