#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine (Python 3.11+). Safe to run again.
#
#   bash scripts/setup.sh          what the demo and a real run need: Chromium's headless shell, Node.js and npm,
#                                  bubblewrap; .venv with the project at the locked versions
#                                  (requirements/lean.txt); the demo's npm packages in the dependency cache
#   bash scripts/setup.sh --studio the same and LangGraph's server and CLI for Studio (requirements/studio.txt)
#   bash scripts/setup.sh --test   all that, and what the test suite (and CI) needs: the test, train and
#                                  studio extras (requirements/test.txt, CPU PyTorch), PostgreSQL, curl, the full Chromium,
#                                  verl's dataset loaders, the real-server virtualenv (.venv-realserver)
#
# Packages are installed by uv (https://docs.astral.sh/uv/) from the lock files in requirements/
# (scripts/lock.sh writes them), so a fresh machine gets the versions CI tested. PyTorch alone comes
# from pip: `pip install torch==2.13.0` takes the CPU build where pip is configured with it (these
# machines hold it on disk), where uv would download the CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=lean
case "${1:-}" in
  "") ;;
  --studio) mode=studio ;;
  --test) mode=test ;;
  *) echo "usage: bash scripts/setup.sh [--studio | --test]" >&2; exit 2 ;;
esac
PYTHON="${PYTHON:-python3}"
UV_VERSION=0.13.9
export UV_PYTHON_DOWNLOADS=never  # use this machine's Python, never download one
started=$EPOCHREALTIME
lap_start=$started
timings=()
seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
lap() {  # how long the part since the previous lap took
  timings+=("$1 $(seconds_since "$lap_start") s;")
  lap_start=$EPOCHREALTIME
}

# -- system packages (in the background: they do not need the virtualenv, nor it them) ----------------
need_apt=()
# Chromium's headless shell (Debian's chromium-headless-shell): the browser the agent prefers, a fifth
# less CPU than the full one (docs/performance.md). Where apt has no such package, the full Chromium.
# Asked of apt unless the shell is there, or a full Chromium is and apt (as its lists stand) has no shell.
headless_shell=/usr/lib/chromium/chromium-headless-shell
if [ ! -x "$headless_shell" ] && ! { command -v chromium >/dev/null 2>&1 \
  && ! apt-cache show chromium-headless-shell >/dev/null 2>&1; }; then
  need_apt+=(BROWSER fonts-liberation)
fi
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
# The sandbox for generated code (npm install scripts, dev servers, shell actions): bwrap, and prlimit.
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 || need_apt+=(util-linux)
# The sandbox's seccomp filter is compiled by libseccomp (through pyseccomp).
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || need_apt+=(libseccomp2)
if [ "$mode" = test ]; then
  command -v curl >/dev/null 2>&1 || need_apt+=(curl)  # the hostile network tests use it inside the sandbox
  # The full Chromium beside the headless shell: the hostile page tests check both kinds the agent may launch.
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  # PostgreSQL server binaries: the suite runs its storage tests on a throwaway cluster too.
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1 || need_apt+=(postgresql)
fi
apt_log=$(mktemp)
apt_pid=""
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  (
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    browser=chromium-headless-shell  # known to apt only after the update
    apt-cache show "$browser" >/dev/null 2>&1 || browser=chromium
    $SUDO apt-get install -y -q --no-install-recommends "${need_apt[@]/#BROWSER/$browser}"
  ) >"$apt_log" 2>&1 &
  apt_pid=$!
fi

# -- the virtualenv ----------------------------------------------------------------------------------
if command -v uv >/dev/null 2>&1; then
  UV=$(command -v uv)
else
  [ -x .venv-uv/bin/uv ] || "$PYTHON" -m pip install -qq --disable-pip-version-check --root-user-action=ignore --target .venv-uv "uv==$UV_VERSION"
  UV="$PWD/.venv-uv/bin/uv"
fi
lap "uv"
[ -x .venv/bin/python ] || "$UV" venv -q --python "$PYTHON" .venv
uv_install() { "$UV" pip install -q --python "$1" --no-deps "${@:2}"; }
uv_install .venv/bin/python -r "requirements/$mode.txt"
uv_install .venv/bin/python -e .
lap "virtualenv and project"

if [ "$mode" = test ]; then
  # CPU PyTorch for the train extra and TRL (see the top: pip, pinned, after the lock's packages).
  .venv/bin/python -m pip install -qq --disable-pip-version-check --root-user-action=ignore torch==2.13.0
  uv_install .venv/bin/python -r requirements/verl.txt
  [ -x .venv-realserver/bin/python ] || "$UV" venv -q --python "$PYTHON" .venv-realserver
  uv_install .venv-realserver/bin/python -r requirements/realserver.txt
  .venv-realserver/bin/python -m pip install -qq --disable-pip-version-check --root-user-action=ignore torch==2.13.0
  lap "test extras, PyTorch, verl, .venv-realserver"
fi

if [ -n "$apt_pid" ]; then
  if ! wait "$apt_pid"; then
    cat "$apt_log" >&2
    echo "setup: apt-get install ${need_apt[*]} failed (output above)" >&2
    exit 1
  fi
  lap "system packages (waited for)"
fi
rm -f "$apt_log"

# The demo's packages into the dependency cache beside the default database (.webgen/deps-cache), so
# that `webgen-agent demo` runs from here without npm's registry afterwards.
if ! .venv/bin/webgen-agent demo --prepare; then
  echo "could not cache the demo's packages (no npm registry?): the first demo will need it"
fi
lap "demo packages"
echo "setup ($mode) done in $(seconds_since "$started") s: ${timings[*]}"
echo "$(.venv/bin/python -c "from webgen_agent.tools.sandbox import sandbox_problem as p; print(p() or 'sandbox ok')"), node $(node --version), $("$(.venv/bin/python -c "from webgen_agent.core.context import find_chromium as f; print(f())")" --version)"
