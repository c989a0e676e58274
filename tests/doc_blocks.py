"""The docs-as-tests runner's parts: the fenced blocks of a Markdown page, the file paths it names,
and (run as a script) every block of one page in order.

```python blocks run in one namespace per page, top to bottom; ```console blocks run each `$ `
line with bash (lines without `$ ` are the output shown, not checked). Both run in a scratch
folder, with `migx-explore` and `python` on PATH meaning this checkout's code and
MIGX_GPU_BACKEND=fake unless a line sets it. A block that must not run says why in its info
string: ```console not-run="starts a server". ```text (or any other language) is never run.

    python tests/doc_blocks.py README.md     # run one page's blocks, as tests/test_docs.py does
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_LANGUAGES = ("python", "console")
# fence languages a reader would take for commands to paste: they must be console (or text)
SHELL_LANGUAGES = ("bash", "sh", "shell", "zsh")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    language: str
    not_run: str | None  # the reason, for a block marked not-run
    text: str

    def where(self) -> str:
        return f"{self.page}:{self.line}"


_FENCE = re.compile(r"^(```+)\s*([\w-]*)(.*)$")
_NOT_RUN = re.compile(r'not-run\s*=\s*"([^"]*)"')


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a page, with their language and not-run reason."""
    out, lines = [], path.read_text(encoding="utf-8").splitlines()
    page = str(path.relative_to(ROOT))
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, language, rest = m.groups()
        reason = _NOT_RUN.search(rest)
        body, j = [], i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            body.append(lines[j])
            j += 1
        out.append(Block(page, i + 1, language, reason.group(1).strip() if reason else None, "\n".join(body) + "\n"))
        i = j + 1
    return out


def block_problems(block: Block) -> list[str]:
    """What is wrong with a block's marking (not whether it runs)."""
    if block.not_run is not None and not block.not_run:
        return [f'{block.where()}: not-run needs a reason (not-run="why")']
    if block.language in SHELL_LANGUAGES:
        return [f"{block.where()}: ```{block.language} block: use ```console with `$ ` lines (run) or ```text"]
    if block.language == "console" and block.not_run is None and not commands(block):
        return [f"{block.where()}: ```console block without a `$ ` line"]
    return []


def commands(block: Block) -> list[str]:
    """The `$ ` lines of a console block, continuation lines (ending in a backslash) joined."""
    out: list[str] = []
    pending = None
    for line in block.text.splitlines():
        if pending is not None:
            pending += "\n" + line
            if not line.endswith("\\"):
                out.append(pending)
                pending = None
        elif line.startswith("$ "):
            cmd = line[2:]
            if cmd.endswith("\\"):
                pending = cmd
            else:
                out.append(cmd)
    return out


# ---- file paths a page names -------------------------------------------------------------------
def tracked_top_level() -> set[str]:
    """The repository's top-level names: a path starting with one is this repo's, and must exist."""
    try:
        files = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        files = os.listdir(ROOT)
    return {f.split("/")[0] for f in files if "/" in f} | {"compiler", "gpu"}


def _prose(text: str) -> str:
    """The page without its fenced blocks (their paths are checked by running them)."""
    return re.sub(r"(?ms)^```.*?^```", "", text)


def named_paths(path: Path, tops: set[str]) -> list[tuple[str, Path]]:
    """(as written, resolved) for every repository path a page names: relative link targets, and
    paths in the prose that start with a top-level folder of the repository."""
    text = _prose(path.read_text(encoding="utf-8"))
    found: list[tuple[str, Path]] = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        target = target.split("#")[0]
        found.append((target, (path.parent / target)))
    top = "|".join(sorted(map(re.escape, tops), key=len, reverse=True))
    for m in re.finditer(rf"(?<![\w/.\-~$])((?:{top})/[\w.\-/]*)", text):
        written = m.group(1).rstrip(".,;:)/") or m.group(1)
        rest = text[m.end() : m.end() + 1]
        if rest in "<*{" and rest:  # a pattern (docs/<topic>.md, tests/test_*.py), not a path
            continue
        found.append((written, ROOT / written))
    return found


# ---- running a page ----------------------------------------------------------------------------
def _shims(bin_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "migx-explore").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m migx_explore "$@"\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)


def run_page(page: Path) -> int:
    """Run every runnable block of a page in order; 0 when all pass, else 1 naming the first failure."""
    runnable = [b for b in blocks(page) if b.language in RUN_LANGUAGES and b.not_run is None]
    with tempfile.TemporaryDirectory(prefix="migx-docs-") as scratch:
        _shims(Path(scratch) / ".bin")
        env = dict(os.environ)
        env["PATH"] = f"{scratch}/.bin{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("MIGX_GPU_BACKEND", "fake")
        os.environ.update(env)
        os.chdir(scratch)
        namespace: dict = {"__name__": "__docs__"}
        for b in runnable:
            print(f"--- {b.where()} ({b.language})", flush=True)
            if b.language == "python":
                try:
                    exec(compile(b.text, b.where(), "exec"), namespace)
                except BaseException as e:  # noqa: BLE001 - reported as the page's failure
                    import traceback

                    traceback.print_exc()
                    print(f"FAILED {b.where()}: {type(e).__name__}: {e}", flush=True)
                    return 1
                continue
            for cmd in commands(b):
                print(f"$ {cmd}", flush=True)
                done = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], env=env, timeout=600)
                if done.returncode != 0:
                    print(f"FAILED {b.where()}: `{cmd}` exited {done.returncode}", flush=True)
                    return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_page((ROOT / sys.argv[1]).resolve()))
