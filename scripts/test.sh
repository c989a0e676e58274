#!/usr/bin/env bash
# Run the test suite (installs graphviz + chromium through apt and the test extras through pip).
# GPU tests skip with a stated reason where no GPU stack is present.
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ensure_system chromium
ensure_venv test
exec python -m pytest -n 2 --dist loadgroup "$@"
