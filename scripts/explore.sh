#!/usr/bin/env bash
# Open JupyterLab on the tour notebook (built-in model), or, with --headless, trace a built-in
# model through all five pipelines and write numbered IR files, SVGs and a JSON index to
# out/<model>/ (one folder per model, replaced whole on the next trace of that model).
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ensure_system
ensure_venv notebook
if [ "${1:-}" = "--headless" ]; then
  shift
  model="${1:-yolo}"
  name="$(basename "$model")"
  exec migx-explore trace "$model" --out "${2:-out/${name%.onnx}}" --svg
fi
extra=()
if [ "$(id -u)" = 0 ]; then
  # Jupyter refuses to start as root unless told; containers usually run as root.
  echo "[migx-explore] running as root: starting JupyterLab with --allow-root" >&2
  extra+=(--allow-root)
fi
exec python -m jupyterlab --ServerApp.root_dir="$ROOT" "${extra[@]}" notebooks/01_tour.ipynb "$@"
