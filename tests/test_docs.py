"""Docs as tests: every ```python and ```console block of README.md and docs/*.md runs (the runner
is tests/doc_blocks.py), every block that does not run says why, and every repository path a page
names exists. .ci/run runs exactly the README's test command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_blocks import ROOT, RUN_LANGUAGES, block_problems, blocks, named_paths, tracked_top_level  # noqa: E402

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = [p for p in PAGES if any(b.language in RUN_LANGUAGES and b.not_run is None for b in blocks(p))]


def _id(p: Path) -> str:
    return str(p.relative_to(ROOT))


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=_id)
def test_every_block_of_the_page_runs(page: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "doc_blocks.py"), _id(page)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_blocks_are_marked(page: Path) -> None:
    problems = [p for b in blocks(page) for p in block_problems(b)]
    assert not problems, "\n".join(problems)


def test_every_named_path_exists() -> None:
    tops = tracked_top_level()
    missing = [
        f"{_id(page)}: {written}" for page in PAGES for written, where in named_paths(page, tops) if not where.exists()
    ]
    assert not missing, "paths named in docs that do not exist:\n" + "\n".join(missing)


def test_readme_is_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 12 * 1024, f"README.md is {size} bytes; move detail into docs/ pages and link them"


def test_ci_runs_the_readme_test_command() -> None:
    ci = [ln for ln in (ROOT / ".ci/run").read_text().splitlines() if ln and not ln.startswith(("#", "set ", "cd "))]
    readme = [
        cmd.split("#")[0].strip()
        for b in blocks(ROOT / "README.md")
        if b.language == "console"
        for cmd in (ln[2:] for ln in b.text.splitlines() if ln.startswith("$ "))
        if "test.sh" in cmd
    ]
    assert ci == readme, f".ci/run runs {ci}; the README's test command is {readme}"


def test_the_runner_fails_a_failing_block(tmp_path: Path) -> None:
    """The runner itself: a block that raises, or a command that exits non-zero, fails its page."""
    page = ROOT / "docs" / f"_runner_check_{tmp_path.name}.md"
    page.write_text("```python\nx = 1\n```\n\n```console\n$ python -c 'raise SystemExit(3)'\n```\n")
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "doc_blocks.py"), _id(page)], capture_output=True, text=True
        )
    finally:
        page.unlink()
    assert done.returncode == 1 and "exited 3" in done.stdout, done.stdout + done.stderr
