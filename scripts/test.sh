#!/usr/bin/env bash
# Run ruff and the test suite (installs graphviz + chromium through apt and the test extras through pip).
# GPU tests skip with a stated reason where no GPU stack is present.
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ensure_system chromium
ensure_venv test
# Lint first: a finding fails the run before the (longer) tests start.
say "ruff check and ruff format --check"
python -m ruff check . || { say "FAILED: ruff check found the problems above; what to do: fix them, or ruff check --fix ."; exit 1; }
python -m ruff format --check . || { say "FAILED: ruff format would change the files above; what to do: ruff format ."; exit 1; }
say "running the test suite (pytest -n 2; takes about 10 minutes)"
exec python -m pytest -n 2 --dist loadgroup "$@"
