"""Places that look like extension points must be real: a CLI verb listed without a module, a
module-level table nothing reads, a rewrite rule beside its pass that the pass never runs, a
generator that does not take the request the docs give, a dotted name a doc gives that no longer
resolves, each fails here. (Paths named in docs: tests/test_docs.py;
pass tables against their folders: tests/passes/test_pass_tables.py.)"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import types
import typing
from pathlib import Path

from migx_explore import cli
from migx_explore.compiler.pattern_rewriter import Rule

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "migx_explore"
# Who counts as reading a table: the product and its scripts; a table only tests read is dead.
READERS = [PACKAGE, ROOT / "scripts", ROOT / "benchmarks", ROOT / "notebooks"]
TABLE_VALUES = (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
TABLE_NAME = re.compile(r"_?[A-Z][A-Z0-9_]*")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_listed_verb_has_a_module_and_every_verb_module_is_listed():
    folder = Path(cli.__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if not p.name.startswith("_")}
    assert sorted(set(cli.VERBS) - modules) == [], "verbs in cli.VERBS without a module"
    assert sorted(modules - set(cli.VERBS)) == [], "cli modules no verb lists (add them to cli.VERBS)"
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    assert list(sub.choices) == cli.VERBS


def _tables(tree: ast.Module):
    for st in tree.body:
        if isinstance(st, ast.Assign) and isinstance(st.value, TABLE_VALUES):
            names = [t.id for t in st.targets if isinstance(t, ast.Name)]
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and isinstance(st.value, TABLE_VALUES):
            names = [st.target.id]
        else:
            continue
        yield from ((n, st.lineno) for n in names if n != "__all__" and TABLE_NAME.fullmatch(n))


def unread_tables(root: Path = ROOT, package: Path = PACKAGE, readers: list[Path] = READERS) -> list[str]:
    """Module-level UPPER_CASE names bound to a literal table (dict, list, tuple, set, or a
    comprehension of one) that no other line of the package, scripts, benchmarks or notebooks
    names: a table that looks like a place to edit but that nothing consults."""
    texts = {p: p.read_text() for folder in readers for p in folder.rglob("*.py")}
    words: dict[str, int] = {}
    for text in texts.values():
        for w in re.findall(r"\b\w+\b", text):
            words[w] = words.get(w, 0) + 1
    return [
        f"{p.relative_to(root)}:{line} {name}"
        for p in sorted(package.rglob("*.py"))
        for name, line in _tables(ast.parse(texts[p]))
        if words.get(name, 0) == 1
    ]


def test_no_module_level_table_is_unread():
    assert unread_tables() == [], "tables nothing reads (delete them, or read them where they belong)"


def test_the_unread_table_rule_finds_one(tmp_path):
    pkg = tmp_path / "migx_explore"
    pkg.mkdir()
    (pkg / "a.py").write_text("USED = {'x': 1}\nDEAD = {'y': 2}\nlower = [1]\n")
    (pkg / "b.py").write_text("from .a import USED\n")
    assert unread_tables(tmp_path, pkg, [pkg]) == ["migx_explore/a.py:2 DEAD"]


def _rules(values) -> dict[int, str]:
    """{id: name} of the Rule objects among `values` ((name, value) pairs), tuples opened."""
    out: dict[int, str] = {}
    for name, v in values:
        for i, r in enumerate(v if isinstance(v, (tuple, list)) else [v]):
            if isinstance(r, Rule):
                out[id(r)] = name if r is v else f"{name}[{i}]"
    return out


def unrun_rules(package: types.ModuleType, modules: list[types.ModuleType], init_source: str) -> list[str]:
    """Rules the modules of a pass package define that its pass cannot run: a rule object, or a
    rule in a tuple, that its __init__ neither names nor holds in a table it names, and a Rule
    class of which it neither names the class nor holds an instance (a rule imported into
    __init__ but left out of RULES, say)."""
    used = {n.id for n in ast.walk(ast.parse(init_source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    held = _rules((n, getattr(package, n)) for n in sorted(used) if hasattr(package, n))
    held_types = {type(v) for n in used if hasattr(package, n) for v in _flat(getattr(package, n))}
    missing = []
    for mod in modules:
        own = [(n, v) for n, v in vars(mod).items() if not n.startswith("_")]
        for key, name in _rules(own).items():
            if key not in held and name.split("[")[0] not in used:
                missing.append(f"{mod.__name__}.{name}")
        for n, c in own:
            if inspect.isclass(c) and issubclass(c, Rule) and c.__module__ == mod.__name__:
                if n not in used and not any(issubclass(t, c) for t in held_types):
                    missing.append(f"{mod.__name__}.{n}")
    return missing


def _flat(v) -> list:
    return list(v) if isinstance(v, (tuple, list)) else [v]


def _pass_packages():
    for top in ("migx_explore.compiler.passes", "migx_explore.gpu.passes"):
        for info in pkgutil.iter_modules(importlib.import_module(top).__path__, top + "."):
            if info.ispkg:
                yield importlib.import_module(info.name)


def test_every_rule_beside_a_pass_is_run_by_it():
    missing = []
    for pkg in _pass_packages():
        subs = [importlib.import_module(i.name) for i in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + ".")]
        missing += unrun_rules(pkg, subs, inspect.getsource(pkg))
    assert not missing, "rules their pass never runs (add them to its RULES, or delete them):\n" + "\n".join(missing)


def test_the_unrun_rule_check_finds_one():
    from migx_explore.compiler.matcher import name
    from migx_explore.compiler.pattern_rewriter import row

    rules = types.ModuleType("fake.rules")
    rules.RUN, rules.LEFT_OUT = row("run", name("neg"), "x"), row("left_out", name("exp"), "x")
    rules.PAIR = (row("a", name("log"), "x"), rules.RUN)

    class Unused(Rule):
        pass

    Unused.__module__ = "fake.rules"
    rules.Unused = Unused
    package = types.ModuleType("fake")
    package.RULES, package.RUN, package.LEFT_OUT = (rules.RUN,), rules.RUN, rules.LEFT_OUT
    source = "from .rules import LEFT_OUT, RUN\nRULES = (RUN,)\n"
    assert unrun_rules(package, [rules], source) == ["fake.rules.LEFT_OUT", "fake.rules.PAIR[0]", "fake.rules.Unused"]


def test_every_kernel_generator_takes_the_request_the_docs_give():
    """The signature docs/adding_an_op.md and docs/architecture.md give a generator is the one
    `RequestGenerator` declares, and every generator in every codegen module takes it."""
    from migx_explore.gpu.codegen import GENERATORS
    from migx_explore.gpu.codegen.common import RequestGenerator

    params, result = typing.get_args(RequestGenerator)
    declared = f"({', '.join(p.__name__ for p in params)}) -> {result.__name__}"
    for doc in ("adding_an_op.md", "architecture.md"):
        given = re.findall(r"a generator `(\([^`]*\) -> \w+)`", (ROOT / "docs" / doc).read_text())
        assert given and set(given) == {declared}, f"docs/{doc} gives a generator {given}, the code {declared}"
    odd = {
        f: str(inspect.signature(g))
        for f, g in GENERATORS.items()
        if len(inspect.signature(g).parameters) != len(params)
    }
    assert not odd, f"generators that do not take one KernelRequest: {odd}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] in ("compiler", "gpu"):
        parts = ["migx_explore", *parts]
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for i, attr in enumerate(parts[k:], start=k):
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
                continue
            try:
                obj = importlib.import_module(".".join(parts[: i + 1]))
            except ImportError:
                return False
        return True
    return False


def test_every_dotted_name_a_doc_gives_resolves():
    pattern = re.compile(r"`((?:migx_explore|compiler|gpu)\.[A-Za-z_][\w.]*)(?:\(|`)")
    stale = [
        f"{doc.relative_to(ROOT)}:{i} {name}"
        for doc in DOCS
        for i, line in enumerate(doc.read_text().splitlines(), 1)
        for name in pattern.findall(line)
        if not _resolves(name.rstrip("."))
    ]
    assert not stale, "names in docs that no longer exist:\n" + "\n".join(stale)
