# Shared setup for scripts/explore.sh and scripts/test.sh: system packages through apt where
# missing, a project virtualenv (.venv), and the Python packages through pip. Every long step says
# what it does and where its log is; a failed step says which one failed and what to do.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# How long apt waits for a lock another process holds (unattended-upgrades on a fresh cloud
# machine holds it for minutes), in seconds.
APT_LOCK_TIMEOUT="${MIGX_APT_LOCK_TIMEOUT:-300}"

say() { echo "[migx-explore] $*" >&2; }

fail() {
  # fail STEP WHAT-TO-DO [LOG]
  say "FAILED: $1"
  [ -n "${3:-}" ] && [ -f "$3" ] && { tail -25 "$3" >&2; say "full log: $3"; }
  say "what to do: $2"
  exit 1
}

apt_install() {
  local sudo="" log
  [ "$(id -u)" = 0 ] || sudo="sudo"
  log="$(mktemp "${TMPDIR:-/tmp}/migx-explore-apt-XXXXXX.log")"
  say "installing system packages: $* (apt-get; waits up to ${APT_LOCK_TIMEOUT}s for the apt lock; log: $log)"
  $sudo apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" update -q >"$log" 2>&1 ||
    fail "apt-get update" "if another apt is running (unattended-upgrades), wait for it and re-run this command; a re-run is safe. Or install by hand: sudo apt-get install $*" "$log"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" install -y -q "$@" >>"$log" 2>&1 ||
    fail "apt-get install $*" "if another apt is running (unattended-upgrades), wait for it and re-run this command; a re-run is safe. Or install by hand: sudo apt-get install $*" "$log"
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
      say "creating the virtualenv $ROOT/.venv"
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
  local log="$VIRTUAL_ENV/pip-$1.log"
  say "installing the Python packages (.[$1]) into $VIRTUAL_ENV with pip: the first time takes a few minutes; log: $log"
  { python -m pip install --disable-pip-version-check --upgrade pip &&
    python -m pip install --disable-pip-version-check -e ".[$1]"; } >"$log" 2>&1 ||
    fail "pip install -e \".[$1]\"" "read the log above; a network error is fixed by re-running this command (a re-run is safe)" "$log"
  echo "$want" >"$stamp"
  say "installed (a later run skips this step while pyproject.toml is unchanged)"
}

install_fingerprint() {
  { cat pyproject.toml; echo "extra=$1 root=$ROOT"; python -c 'import sys; print(sys.version)'; } |
    sha256sum | cut -d' ' -f1
}
