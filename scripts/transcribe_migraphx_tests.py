"""Transcribe MIGraphX's own pass tests (test/*.cpp) into IR-text cases under tests/migraphx/.

    python scripts/transcribe_migraphx_tests.py MIGRAPHX_CHECKOUT [--pass simplify_algebra ...]
    python scripts/transcribe_migraphx_tests.py --resplit     (re-lay existing files into parts)

MIGRAPHX_CHECKOUT is a clone of ROCm/AMDMIGraphX (a work tree, or a bare git folder read at
HEAD). Each TEST_CASE is read by scripts/migraphx_cpp.py, rebuilt with our IR builder and
written as IR text with the file's pass list; our passes then classify it (MATCH / EQUIV / DIFF,
tests/migraphx/conformance.py). Statuses and reasons already recorded in a case file are kept
for cases of the same name, so a DIFF's written-up reason survives regeneration; a case whose
status changed is reported. Cases the reader cannot rebuild are listed with the construct that
stopped them. Run at development time only: nothing here is used at run time.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "migraphx"))

from migraphx_cpp import (  # noqa: E402
    InstructionCount,
    OutputShapes,
    PropertyCheck,
    Reader,
    RunEvent,
    Unsupported,
    file_functions,
    run_pass_list,
    test_cases,
    tokenize,
)

# MIGraphX test file -> the pass it tests (our name); run_pass's list gives the exact passes.
FILES = {
    "simplify_algebra": "test/simplify_algebra_test.cpp",
    "simplify_reshapes": "test/simplify_reshapes_test.cpp",
    "simplify_qdq": "test/simplify_qdq_test.cpp",
    "propagate_constant": "test/propagate_constant_test.cpp",
    "rewrite_pooling": "test/rewrite_pooling_test.cpp",
    "dead_code_elimination": "test/dead_code_elimination_test.cpp",
    "eliminate_contiguous": "test/eliminate_contiguous_test.cpp",
    "auto_contiguous": "test/auto_contiguous_test.cpp",
    "fuse_horizontal": "test/fuse_horizontal_test.cpp",
    "eliminate_convert": "test/eliminate_convert_test.cpp",
    "normalize_ops": "test/normalize_ops_test.cpp",
    "inline_module": "test/inline_module_test.cpp",
    "split_single_dyn_dim": "test/split_single_dyn_dim_test.cpp",
    "rewrite_low_precision": "test/rewrite_low_precision_test.cpp",
    "eliminate_common_subexpression": "test/eliminate_common_subexpression_test.cpp",
    "eliminate_pad": "test/eliminate_pad_test.cpp",
    "rewrite_quantization": "test/rewrite_quantization_test.cpp",
    "rewrite_gelu": "test/rewrite_gelu_test.cpp",
    "eliminate_identity": "test/eliminate_identity_test.cpp",
    "optimize_module": "test/optimize_module_test.cpp",
    "insert_pad": "test/insert_pad_test.cpp",
    "eliminate_data_type": "test/eliminate_data_type_test.cpp",
    "fuse_pointwise": "test/fuse_pointwise.cpp",
    "fuse_reduce": "test/fuse_reduce.cpp",
    "split_reduce": "test/split_reduce.cpp",
    "layout_convolution": "test/layout_convolution.cpp",
    "propagate_precision": "test/propagate_precision.cpp",
    "rewrite_dot": "test/rewrite_dot.cpp",
    "rewrite_reduce": "test/rewrite_reduce.cpp",
    "rewrite_topk": "test/rewrite_topk.cpp",
    "fuse_concat": "test/fuse_concat.cpp",
    "simplify_dyn_ops": "test/simplify_dyn_ops_test.cpp",
    "rewrite_resize": "test/rewrite_resize_test.cpp",
    "fp8_ocp_to_fnuz": "test/fp8_ocp_to_fnuz_test.cpp",
    "fuse_attention": "test/fuse_attention.cpp",
    "quantization": "test/quantization.cpp",
    "prefuse_ops": "test/gpu/prefuse_ops.cpp",
    "fuse_mlir": "test/gpu/fuse_mlir.cpp",
    "promote_literals": "test/promote_literals_test.cpp",
}


def read_source(checkout: Path, rel: str) -> str | None:
    if (checkout / rel).is_file():
        return (checkout / rel).read_text()
    res = subprocess.run(["git", f"--git-dir={checkout}", "show", f"HEAD:{rel}"], capture_output=True, text=True)
    if res.returncode != 0:
        res = subprocess.run(["git", "-C", str(checkout), "show", f"HEAD:{rel}"], capture_output=True, text=True)
    return res.stdout if res.returncode == 0 else None


def transcribe_case(name: str, body: str, passes: list[tuple[str, dict]], functions=None) -> list[dict]:
    """Replay one TEST_CASE; each EXPECT(a == b) whose one side went through run_passes gives a
    case: that side's program before the passes, the passes, and the other side as expected."""
    from migx_explore.compiler.ir import Module, Program
    from migx_explore.compiler.printer import print_program

    reader = Reader(tokenize(body), passes, functions)
    stopped = None
    try:
        reader.run()
    except Unsupported as e:  # the EXPECTs before the construct are complete: keep them
        stopped = e
    runs: dict[int, RunEvent] = {}
    out = []
    kept_outputs = None
    for ev in reader.events:
        if isinstance(ev, RunEvent):
            runs[id(ev.program)] = ev
            continue
        if isinstance(ev, PropertyCheck):
            run = runs.get(id(ev.program))
            if run is None:  # a check on the program before the passes (any_of(p1, ...)): not the pass's
                continue
            if out and out[-1].get("run") is run and out[-1].get("checks"):  # several checks of one result
                out[-1]["checks"] = out[-1]["checks"] + ev.checks
                continue
            out.append(_found(run, "", None) | {"checks": ev.checks, "run": run})
            continue
        if ev.equal and len(ev.sides) == 2 and all(isinstance(s, OutputShapes) for s in ev.sides):
            ran = [s.program for s in ev.sides if id(s.program) in runs]
            if len(ran) == 1:  # the pass's module against its copy from before: keeps the outputs
                kept_outputs = runs[id(ran[0])]
            continue
        counted = [s for s in ev.sides if isinstance(s, InstructionCount)]
        if counted and ev.equal:  # EXPECT(std::distance(m.begin(), m.end()) == N)
            n = next((s for s in ev.sides if isinstance(s, int)), None)
            run = runs.get(id(counted[0].program))
            if n is None or run is None:
                raise Unsupported("EXPECT on an instruction count that is not after a run_passes")
            out.append(_found(run, "", n - counted[0].offset))
            continue
        progs = [s.program if isinstance(s, Module) else s for s in ev.sides]
        if not all(isinstance(p, Program) for p in progs):
            continue  # an EXPECT on something else (a shape, a count): not a program comparison
        ran = [p for p in progs if id(p) in runs]
        if not ev.equal:
            stopped = stopped or Unsupported("EXPECT(a != b): MIGraphX's result is not given")
            continue
        if len(ran) == 2 and progs[0] is not progs[1]:
            found = _both_ran(runs[id(progs[0])], runs[id(progs[1])])
            if found is None:
                stopped = stopped or Unsupported("EXPECT(a == b) with both sides run through unrelated passes")
            else:
                out.append(found)
            continue
        if len(ran) != 1 or progs[0] is progs[1]:
            stopped = stopped or Unsupported("EXPECT(a == b): cannot tell the pass's program from the expected one")
            continue
        run = runs[id(ran[0])]
        other = progs[1] if progs[0] is ran[0] else progs[0]
        if id(other) in runs:
            stopped = stopped or Unsupported("EXPECT(a == b) with both sides run through passes")
            continue
        out.append(_found(run, print_program(other, full=True), None))
    if not out and kept_outputs is not None:
        out.append(_found(kept_outputs, "", None) | {"checks": ("same_values",)})
    if not out:
        raise stopped or Unsupported("no run_passes / EXPECT(a == b) pair")
    return out


def _both_ran(a: RunEvent, b: RunEvent) -> dict | None:
    """EXPECT(p1 == p2) where p2 ran a prefix or suffix of p1's passes (quantize_fp16(p1) then
    propagate_constant on both; normalize_ops alone on the copy): MIGraphX says p1's extra passes
    give what the shared ones alone give, so the expected program is p2 after OUR shared passes."""
    from conformance import Case, run_passes

    from migx_explore.compiler.printer import print_program

    run, other = (a, b) if len(a.passes) > len(b.passes) else (b, a)
    names, shared = [p.name for p in run.passes], [p.name for p in other.passes]
    if not shared or len(shared) >= len(names) or shared not in (names[: len(shared)], names[-len(shared) :]):
        return None
    options = {p.name: dict(p.options) for p in other.passes if p.options}
    expected = run_passes(Case("expected", ",".join(shared), other.before, "", options=options))
    return _found(run, print_program(expected, full=True), None)


def _found(run: RunEvent, expected: str, count: int | None) -> dict:
    return {
        "before": run.before,
        "expected": expected,
        "count": count,
        "passes": ",".join(p.name for p in run.passes),
        "options": {p.name: dict(p.options) for p in run.passes if p.options},
    }


LITERAL_LINE = re.compile(r"^(\s*\S+ = @literal)\{([^{}#]*)\}( -> (\w+), \{([\d, ]*)\}, \{[\d, ]*\}.*)$", re.M)
INLINE_LITERAL_CHARS = 240  # longer literals are written as a `{#key}` reference (file size, parse time)


def compact_literals(texts: list[str]) -> tuple[list[str], dict]:
    """Replace each long literal that is generate_literal's data or one repeated value by a
    `{#key}` reference the case's `literals` table describes; others stay inline."""
    import numpy as np
    from migraphx_cpp import GENERATED

    from migx_explore.compiler import dtypes

    table: dict[str, tuple] = {}

    def sub(m: re.Match) -> str:
        body, type_, lens_txt = m.group(2), m.group(4), m.group(5)
        if len(body) <= INLINE_LITERAL_CHARS:
            return m.group(0)
        lens = [int(x) for x in lens_txt.split(",") if x.strip()]
        try:
            npd = dtypes.np_dtype(type_)
            vals = (
                np.array([v.strip() for v in body.split(",")])
                .astype(np.float64 if dtypes.dtype(type_).is_float else npd)
                .astype(npd)
            )
        except (ValueError, KeyError, TypeError):
            return m.group(0)
        name = dtypes.dtype(type_).name
        if vals.size and (vals == vals.flat[0]).all():
            value = vals.flat[0].item()
            key = f"fill_{name}_{'x'.join(map(str, lens))}_{value}".replace("-", "m").replace(".", "p")
            table[key] = ("fill", name, lens, value)
        else:
            seed = GENERATED.get((name, tuple(lens), vals.tobytes()))
            if seed is None:
                return m.group(0)
            key = f"gen_{name}_{'x'.join(map(str, lens))}_{seed}"
            table[key] = ("generate", name, lens, seed)
        return f"{m.group(1)}{{#{key}}}{m.group(3)}"

    return [LITERAL_LINE.sub(sub, t) for t in texts], table


# A pass whose case file would pass this many lines is written in parts, cases in source order:
# test_<pass>.py (with the NOT_TRANSCRIBED list), then test_<pass>_part2.py, ... so no module passes
# the project's 600-line limit (tests/test_module_size.py).
PART_LINES = 560


def case_paths(out_dir: Path, pass_name: str) -> list[Path]:
    """The case files of one pass that exist: test_<pass>.py, then its parts in order."""
    parts = sorted(out_dir.glob(f"test_{pass_name}_part*.py"), key=lambda p: int(p.stem.rsplit("_part", 1)[1]))
    return [p for p in [out_dir / f"test_{pass_name}.py", *parts] if p.is_file()]


def load_existing(out_dir: Path, pass_name: str) -> tuple[dict[str, object], list[tuple[str, str]]]:
    """The cases already written for a pass (by name, across its parts) and its NOT_TRANSCRIBED list."""
    cases: dict[str, object] = {}
    skipped: list[tuple[str, str]] = []
    for path in case_paths(out_dir, pass_name):
        namespace: dict = {"__name__": f"_old_{path.stem}"}
        # the case file imports `.conformance` as a test package; read it standalone here
        exec(
            compile(path.read_text().replace("from .conformance import", "from conformance import"), str(path), "exec"),
            namespace,
        )
        cases.update((c.name, c) for c in namespace.get("CASES", []))
        skipped += namespace.get("NOT_TRANSCRIBED", [])
    return cases, skipped


def render_files(pass_name: str, source_rel: str, cases: list, skipped: list[tuple[str, str]]) -> dict[str, str]:
    """File name -> text: one file, or parts of at most PART_LINES lines when the cases need more."""
    entries = [_case_entry(c) for c in cases]
    single = render_file(pass_name, source_rel, entries, skipped)
    if single.count("\n") <= PART_LINES:
        return {f"test_{pass_name}.py": single}
    chunks: list[list[str]] = [[]]
    used = render_file(pass_name, source_rel, [], skipped, part=(1, 2)).count("\n")
    for e in entries:
        size = e.count("\n") + 1
        if chunks[-1] and used + size > PART_LINES:
            chunks.append([])
            used = render_file(pass_name, source_rel, [], [], part=(2, 2)).count("\n")
        chunks[-1].append(e)
        used += size
    n = len(chunks)
    return {
        (f"test_{pass_name}.py" if k == 1 else f"test_{pass_name}_part{k}.py"): render_file(
            pass_name, source_rel, chunk, skipped if k == 1 else None, part=(k, n)
        )
        for k, chunk in enumerate(chunks, 1)
    }


def _case_entry(c) -> str:
    args = [repr(c.name), repr(c.passes), _block(c.before), _block(c.expected) if c.expected else "''"]
    if c.status != "MATCH":
        args.append(f"status={c.status!r}")
    if c.reason:
        args.append(f"reason={c.reason!r}")
    if c.options:
        args.append(f"options={c.options!r}")
    if c.expected_count is not None:
        args.append(f"expected_count={c.expected_count!r}")
    if c.literals:
        args.append(f"literals={c.literals!r}")
    if c.checks:
        args.append(f"checks={c.checks!r}")
    return "    case(" + ",\n         ".join(args) + "),"


def render_file(
    pass_name: str,
    source_rel: str,
    entries: list[str],
    skipped: list[tuple[str, str]] | None,
    part: tuple[int, int] = (1, 1),
) -> str:
    """One case file. `part` (k, n): the k-th of n files of the pass; only the first lists the cases
    not transcribed (`skipped` is None for the others)."""
    k, n = part
    where = f" (part {k} of {n})" if n > 1 else ""
    lines = [
        f'"""MIGraphX conformance: {pass_name}{where}, transcribed from ROCm/AMDMIGraphX {source_rel}.',
        "",
        "Generated by scripts/transcribe_migraphx_tests.py (statuses and DIFF reasons are kept on",
        "regeneration). Each case is MIGraphX's test program before and after its run_pass; the test",
        'checks our passes still give the recorded status (see conformance.py)."""',
        "",
        "from __future__ import annotations",
        "",
        "import pytest",
        "",
        "from .conformance import case, check" + ("" if entries else "  # noqa: F401 - no case transcribed yet"),
        "",
        "CASES = [",
        *entries,
        "]",
    ]
    if skipped is not None:
        lines.append("")
        lines.append("# Not transcribed (the construct the reader stopped at):")
        lines.append("NOT_TRANSCRIBED = [")
        for name, why in skipped:
            lines.append(f"    ({name!r}, {why[:110]!r}),")
        lines.append("]")
    lines += [
        "",
        "",
        '@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)',
        "def test_case(c):",
        "    check(c)",
        "",
    ]
    return "\n".join(lines)


def write_pass_files(out_dir: Path, pass_name: str, files: dict[str, str]) -> None:
    """Write a pass's case files and drop parts left over from a longer earlier version."""
    for path in case_paths(out_dir, pass_name):
        if path.name not in files:
            path.unlink()
    for name, text in files.items():
        (out_dir / name).write_text(text)


def resplit(out_dir: Path) -> int:
    """Rewrite every pass's case files from the cases they hold (no checkout needed): how the parts
    are laid out changes, the cases do not."""
    for pass_name, rel in FILES.items():
        if not case_paths(out_dir, pass_name):
            continue
        cases, skipped = load_existing(out_dir, pass_name)
        files = render_files(pass_name, rel, list(cases.values()), skipped)
        write_pass_files(out_dir, pass_name, files)
        print(f"{pass_name}: {len(cases)} cases in {len(files)} file(s)")
    return 0


def _block(text: str) -> str:
    # dedent: a case read back from its file keeps the file's indentation
    body = textwrap.indent(textwrap.dedent(text).strip("\n"), " " * 8)
    return '"""\n' + body + '\n        """'


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", type=Path, nargs="?")
    ap.add_argument("--pass", dest="passes", action="append", help="only these passes")
    ap.add_argument(
        "--resplit",
        action="store_true",
        help="only re-lay the existing case files into parts (PART_LINES); no checkout needed",
    )
    args = ap.parse_args(argv)
    if args.resplit:
        return resplit(ROOT / "tests" / "migraphx")
    if args.checkout is None:
        ap.error("give MIGRAPHX_CHECKOUT (or --resplit)")

    import warnings

    from conformance import Case, classify

    from migx_explore.compiler.pass_infra import pass_registry

    warnings.simplefilter("ignore")
    known = set(pass_registry())
    out_dir = ROOT / "tests" / "migraphx"
    total = {"MATCH": 0, "EQUIV": 0, "DIFF": 0}
    for pass_name, rel in FILES.items():
        if args.passes and pass_name not in args.passes:
            continue
        src = read_source(args.checkout, rel)
        if src is None:
            print(f"{pass_name}: {rel} not found", file=sys.stderr)
            continue
        old, _ = load_existing(out_dir, pass_name)
        try:  # the file's run_pass list, for a run_pass the function reader cannot follow
            passes = run_pass_list(src) or []
        except Unsupported:
            passes = []
        passes = [(p, o) for p, o in passes if p in known]
        cases, skipped = [], []
        functions = file_functions(src)
        for name, body in test_cases(src):
            try:
                built = transcribe_case(name, body, passes, functions)
            except Unsupported as e:
                skipped.append((name, str(e)))
                continue
            except Exception as e:  # noqa: BLE001 - our builder refused the program (shape rule, op)
                skipped.append((name, f"{type(e).__name__}: {e}"))
                continue
            for k, b in enumerate(built):
                cname = name if len(built) == 1 else f"{name}#{k + 1}"
                pass_spec, options = b["passes"], b["options"]
                (b["before"], b["expected"]), literals = compact_literals([b["before"], b["expected"]])
                c = Case(
                    cname,
                    pass_spec,
                    b["before"],
                    b["expected"],
                    options=options,
                    expected_count=b["count"],
                    literals=literals,
                    checks=b.get("checks", ()),
                )
                t0 = time.perf_counter()
                status, detail = classify(c)
                if time.perf_counter() - t0 > 5:
                    print(f"  slow: {pass_name}.{cname} {time.perf_counter() - t0:.1f} s ({detail})", flush=True)
                prev = old.get(cname)
                reason = prev.reason if prev is not None and prev.status == status else ""
                if prev is not None and prev.status != status:
                    print(f"  {pass_name}.{cname}: status {prev.status} -> {status}", file=sys.stderr)
                if status != "MATCH" and not reason:
                    reason = "UNREVIEWED: " + detail
                cases.append(
                    Case(
                        cname,
                        pass_spec,
                        b["before"],
                        b["expected"],
                        status,
                        reason,
                        options,
                        b["count"],
                        literals,
                        b.get("checks", ()),
                    )
                )
                total[status] += 1
        write_pass_files(out_dir, pass_name, render_files(pass_name, rel, cases, skipped))
        counts = {s: sum(c.status == s for c in cases) for s in total}
        print(f"{pass_name}: {len(cases)} cases {counts}, {len(skipped)} not transcribed", flush=True)
    print(f"total: {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
