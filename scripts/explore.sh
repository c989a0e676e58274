#!/usr/bin/env bash
# Open JupyterLab on the tour notebook (built-in model), or, with --headless, trace a built-in
# model through all five pipelines and write numbered IR files, SVGs and a JSON index to out/.
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ensure_system
ensure_venv notebook
if [ "${1:-}" = "--headless" ]; then
  shift
  exec migx-explore trace "${1:-yolo}" --out "${2:-out/trace}" --svg
fi
exec python -m jupyterlab --ServerApp.root_dir="$ROOT" notebooks/01_tour.ipynb "$@"
