# Shared setup for scripts/explore.sh and scripts/test.sh: system packages through apt where
# missing, a project virtualenv (.venv), and the Python packages through pip. Every long step says
# what it does and where its log is; a failed step says which one failed and what to do.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# How long apt waits for a lock another process holds (unattended-upgrades on a fresh cloud
# machine holds it for minutes), in seconds, and how often a long step says it is still running.
APT_LOCK_TIMEOUT="${MIGX_APT_LOCK_TIMEOUT:-300}"
HEARTBEAT_S="${MIGX_HEARTBEAT_S:-15}"

say() { echo "[migx-explore] $*" >&2; }

fail() {
  # fail STEP WHAT-TO-DO [LOG]
  say "FAILED: $1"
  [ -n "${3:-}" ] && [ -f "$3" ] && { tail -25 "$3" >&2; say "full log: $3"; }
  say "what to do: $2"
  exit 1
}

run_logged() {
  # run_logged LOG WHAT CMD...: CMD with its output appended to LOG; every HEARTBEAT_S seconds a
  # line says it is still running and what the log says last, so no step is silent for minutes.
  local log="$1" what="$2" pid start next rc=0
  shift 2
  "$@" >>"$log" 2>&1 &
  pid=$!
  # a background job ignores Ctrl-C in a script: pass it on, or pip would go on alone
  trap 'kill "$pid" 2>/dev/null; exit 130' INT TERM
  start=$SECONDS
  next=$((start + HEARTBEAT_S))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
      say "  $what: still running after $((SECONDS - start)) s; last in its log: $(tail -n 1 "$log" | tr -d '\r' | cut -c1-100)"
      next=$((SECONDS + HEARTBEAT_S))
    fi
  done
  wait "$pid" || rc=$?
  trap - INT TERM
  return "$rc"
}

APT_LOCK_HOLDER=""
apt_get() {
  # apt_get LOG ARGS...: apt-get ARGS, retried while another process holds an apt lock, for up to
  # APT_LOCK_TIMEOUT seconds (apt's own DPkg::Lock::Timeout does not cover `update`'s lists lock).
  local log="$1" waited=0 size holder
  shift
  while :; do
    size=$(wc -c <"$log")
    run_logged "$log" "apt-get $1" $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=0 "$@" && return 0
    holder="$(tail -c +$((size + 1)) "$log" | sed -n 's/.*Could not get lock \([^ ]*\)\. It is held by \(process [0-9]* ([^)]*)\).*/\1, held by \2/p; s/.*Could not get lock \([^ .]*\)\.*$/\1/p' | head -n 1)"
    [ -n "$holder" ] || return 1
    if [ "$waited" -ge "$APT_LOCK_TIMEOUT" ]; then
      APT_LOCK_HOLDER="$holder"
      return 1
    fi
    if [ $((waited % 30)) -eq 0 ]; then
      say "  waiting for apt's lock ($holder): another apt is running (on a fresh cloud machine, usually unattended-upgrades); ${waited} s of up to ${APT_LOCK_TIMEOUT} s"
    fi
    sleep 5
    waited=$((waited + 5))
  done
}

apt_install() {
  local log
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
    say "installing system packages needs root: sudo may ask for your password"
    sudo -v || fail "sudo" "install them by hand: sudo apt-get install $*, then re-run this command"
  fi
  log="$(mktemp "${TMPDIR:-/tmp}/migx-explore-apt-XXXXXX.log")"
  say "installing system packages: $* (apt-get update and install; log: $log)"
  apt_get "$log" update -q || apt_failed update "$log" "$@"
  apt_get "$log" install -y -q "$@" || apt_failed "install $*" "$log" "$@"
}

apt_failed() {
  # apt_failed STEP LOG PACKAGES...
  local step="$1" log="$2"
  shift 2
  if [ -n "$APT_LOCK_HOLDER" ]; then
    fail "apt-get $step: apt's lock ($APT_LOCK_HOLDER) was still held after ${APT_LOCK_TIMEOUT} s" \
      "wait for that process to finish (on a fresh cloud machine it is unattended-upgrades, done within minutes), then re-run this command: a re-run is safe. MIGX_APT_LOCK_TIMEOUT=900 waits longer. Or install by hand: sudo apt-get install $*"
  fi
  fail "apt-get $step" "read the log above; a network error is fixed by re-running this command (a re-run is safe). Or install by hand: sudo apt-get install $*" "$log"
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
    # a venv whose creation failed half-way (no ensurepip on Debian) has a python but no pip
    if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
      command -v python3 >/dev/null 2>&1 || apt_install python3 python3-venv
      python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
        fail "python3 is $(python3 -V 2>&1); migx-explore needs Python 3.10 or newer" \
          "install a newer python3 (Debian 12 and Ubuntu 22.04 have one), or activate a virtualenv of one and re-run"
      say "creating the virtualenv $ROOT/.venv"
      python3 -m venv --clear .venv 2>/dev/null || { apt_install python3-venv; python3 -m venv --clear .venv; }
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
  : >"$log"
  { run_logged "$log" "pip install --upgrade pip" python -m pip install --disable-pip-version-check --upgrade pip &&
    run_logged "$log" "pip install -e .[$1]" python -m pip install --disable-pip-version-check -e ".[$1]"; } ||
    fail "pip install -e \".[$1]\"" "read the log above; a network error is fixed by re-running this command (a re-run is safe)" "$log"
  echo "$want" >"$stamp"
  say "installed (a later run skips this step while pyproject.toml is unchanged)"
}

install_fingerprint() {
  { cat pyproject.toml; echo "extra=$1 root=$ROOT"; python -c 'import sys; print(sys.version)'; } |
    sha256sum | cut -d' ' -f1
}
