#!/usr/bin/env bash
# Open JupyterLab on the tour notebook (built-in model), or, with --headless [MODEL [DIR]], trace a
# model through all five pipelines and write numbered IR files, SVGs, index.json and index.html
# to DIR (default out/<model>/). A second trace into the same folder replaces only the files the
# previous trace wrote there; anything else in it is kept.
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ensure_system
ensure_venv notebook
if [ "${1:-}" = "--headless" ]; then
  shift
  model="${1:-yolo}"
  name="$(basename "$model")"
  out="${2:-out/${name%.onnx}}"
  # out/ is git-ignored, so a fresh clone has none; a DIR you name must be in an existing folder.
  [ -n "${2:-}" ] || mkdir -p out
  say "tracing $model through the five pipelines into $out (migx-explore trace $model --out $out --svg)"
  migx-explore trace "$model" --out "$out" --svg
  say "open $out/index.html in a browser for every pass, or run ./scripts/explore.sh for the notebook"
  exit 0
fi
extra=()
if [ "$(id -u)" = 0 ]; then
  # Jupyter refuses to start as root unless told; containers usually run as root.
  say "running as root: starting JupyterLab with --allow-root"
  extra+=(--allow-root)
fi
tour=notebooks/01_tour.ipynb
say "starting JupyterLab on $tour (open the URL it prints; Ctrl-C stops it)"
# default_url makes the printed URL (and the browser it opens) land on the tour, not the Launcher.
exec python -m jupyterlab --ServerApp.root_dir="$ROOT" --LabApp.default_url="/lab/tree/$tour" "${extra[@]}" "$@"
