#!/usr/bin/env bash
# Run ruff and the test suite (installs graphviz + chromium through apt and the test extras through pip).
# GPU tests skip with a stated reason where no GPU stack is present.
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ensure_system chromium
ensure_venv test
# Lint first: a finding fails the run before the (longer) tests start.
python -m ruff check . || { echo "[migx-explore] ruff check found problems (fix them, or ruff check --fix .)" >&2; exit 1; }
python -m ruff format --check . || { echo "[migx-explore] ruff format would change the files above (run: ruff format .)" >&2; exit 1; }
exec python -m pytest -n 2 --dist loadgroup "$@"
