"""Device code templates: the kernel bodies live in gpu/kernels/*.hpp, Python only picks parameters.

A template file holds one or more named sections, each opened by a line of its own

    // @template name

and running to the next such line (or the end of the file, less its final newline). Inside a
section, `${key}` is a slot the generator fills (string.Template syntax: `$$` is a literal `$`);
everything else is C++ as it is compiled. A value that is a list of lines fills a slot standing
alone on its line: each item on a line of its own at that line's indentation, no line at all for
an empty list. `render(file, section, **values)` fills every slot and
refuses a missing value or a value no slot takes, so a renamed slot fails at once instead of
leaving `${key}` in the source or dropping a parameter. The files ship as package data
(pyproject's `kernels/*.hpp`) and are read with importlib.resources, so an installed package
finds them as a checkout does.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from string import Template

_MARKER = re.compile(r"^// @template (\w+)$", re.M)


class TemplateError(ValueError):
    """A template file, section or slot that does not match what the generator gives."""


@functools.cache
def sections(file: str) -> dict[str, Template]:
    """The named sections of gpu/kernels/`file`."""
    path = resources.files("migx_explore.gpu").joinpath("kernels", file)
    if not path.is_file():
        raise TemplateError(f"no kernel template gpu/kernels/{file}")
    text = path.read_text(encoding="utf-8")
    marks = list(_MARKER.finditer(text))
    if not marks:
        raise TemplateError(f"gpu/kernels/{file} has no '// @template <name>' line")
    out: dict[str, Template] = {}
    for mark, nxt in zip(marks, [*marks[1:], None]):
        body = text[mark.end() + 1 : nxt.start() - 1 if nxt else len(text)]
        out[mark.group(1)] = Template(body.removesuffix("\n") if nxt is None else body)
    return out


def slots(template: Template) -> set[str]:
    """The slot names a template fills (string.Template's own pattern, so `$$` is no slot)."""
    names = set()
    for m in template.pattern.finditer(template.template):
        if m.group("invalid") is not None:
            raise TemplateError(f"a '$' that starts no slot at offset {m.start()}")
        name = m.group("named") or m.group("braced")
        if name:
            names.add(name)
    return names


def render(file: str, section: str, **values: object) -> str:
    """Section `section` of gpu/kernels/`file` with every `${key}` replaced by str(values[key])."""
    table = sections(file)
    if section not in table:
        raise TemplateError(f"gpu/kernels/{file} has no section {section!r}; it has {', '.join(table)}")
    template = table[section]
    wanted = slots(template)
    missing, extra = sorted(wanted - values.keys()), sorted(values.keys() - wanted)
    if missing or extra:
        raise TemplateError(f"{file}:{section}: slots without a value {missing}, values without a slot {extra}")
    text = template.template
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            text = _expand_lines(text, key, value, f"{file}:{section}")
    scalars = {k: str(v) for k, v in values.items() if not isinstance(v, (list, tuple))}
    return Template(text).substitute(scalars)


def _expand_lines(text: str, key: str, lines: list[str] | tuple[str, ...], where: str) -> str:
    """Put `lines` where `${key}` stands alone on a line, each at that line's indentation."""
    slot = re.compile(rf"^([ \t]*)\$\{{{key}\}}\n?", re.M)
    if len(slot.findall(text)) != text.count(f"${{{key}}}"):
        raise TemplateError(f"{where}: list slot {key!r} must stand alone on its line")

    def put(m: re.Match) -> str:
        end = "\n" if m.group(0).endswith("\n") else ""
        return "".join(f"{m.group(1)}{line}\n" for line in lines).removesuffix("\n") + end if lines else ""

    return slot.sub(lambda m: put(m).replace("$", "$$"), text)
