# Shared setup for scripts/explore.sh and scripts/test.sh: system packages through apt where
# missing, a project virtualenv (.venv), and the Python packages through pip.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "[migx-explore] installing system packages: $*" >&2
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@" >/dev/null
}

ensure_system() {
  local need=()
  command -v dot >/dev/null 2>&1 || need+=(graphviz)
  for pkg in "$@"; do
    case "$pkg" in
      chromium) command -v chromium >/dev/null 2>&1 || need+=(chromium) ;;
      *) need+=("$pkg") ;;
    esac
  done
  if [ ${#need[@]} -gt 0 ]; then apt_install "${need[@]}"; fi
}

ensure_venv() {
  # An isolated environment, so a Debian system Python (externally managed) works too.
  if [ -z "${VIRTUAL_ENV:-}" ]; then
    if [ ! -x .venv/bin/python ]; then
      python3 -m venv .venv 2>/dev/null || { apt_install python3-venv; python3 -m venv .venv; }
    fi
    # shellcheck disable=SC1091
    . .venv/bin/activate
  fi
  # pip runs only when the install is not current: the stamp records what it installed from
  # (pyproject.toml, the extra, this checkout's path, the Python), so a second call skips it.
  local stamp="$VIRTUAL_ENV/.migx-explore-install-$1.stamp" want
  want="$(install_fingerprint "$1")"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  # pip's build chatter goes to a log; on failure its tail is shown.
  local log="$VIRTUAL_ENV/pip-$1.log"
  { python -m pip install -q --disable-pip-version-check --upgrade pip &&
    python -m pip install -q --disable-pip-version-check -e ".[$1]"; } >"$log" 2>&1 ||
    { tail -40 "$log" >&2; echo "[migx-explore] pip install failed (full log: $log)" >&2; exit 1; }
  echo "$want" >"$stamp"
}

install_fingerprint() {
  { cat pyproject.toml; echo "extra=$1 root=$ROOT"; python -c 'import sys; print(sys.version)'; } |
    sha256sum | cut -d' ' -f1
}
