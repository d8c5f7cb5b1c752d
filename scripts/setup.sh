#!/usr/bin/env bash
# Set up a fresh machine: system Chromium (and Node.js, PostgreSQL if missing), a virtualenv, the
# project with its test extras (which include the [postgres] and [ray] extras) and the train extra
# (CPU PyTorch). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need_apt+=(chromium)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
# The sandbox for generated code (npm install scripts, dev servers, shell actions): bwrap, and prlimit.
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 || need_apt+=(util-linux)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)  # the hostile network tests use it inside the sandbox
# The sandbox's seccomp filter is compiled by libseccomp (through pyseccomp).
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || need_apt+=(libseccomp2)
# PostgreSQL server binaries: the suite runs its storage tests on a throwaway cluster too.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1 || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${need_apt[@]}" fonts-liberation
fi

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# PyTorch before the extras that need it ([train], and trl in [test]), pinned to the CPU build this
# machine's package index holds: any other build would download gigabytes.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e '.[test,train]'
# verl's dataset classes, which tests/test_verl_export.py reads the verl export with: the package
# alone and the three packages its dataset code imports (its own requirements pin a training stack,
# vLLM-era versions and wandb, that the tests do not need).
.venv/bin/python -m pip install -q --no-deps 'verl==0.9.1' 'tensordict==0.15.3' 'pyvers==0.2.3' 'omegaconf==2.4.0'
# A real OpenAI-compatible server for tests/test_real_server.py (transformers serve), in a virtualenv
# of its own: transformers' serving dependencies want click, huggingface-hub and opentelemetry
# versions that browser-use's exact pins exclude. torch first and alone, as above.
[ -x .venv-realserver/bin/python ] || "$PYTHON" -m venv .venv-realserver
.venv-realserver/bin/python -m pip install -q torch==2.13.0
.venv-realserver/bin/python -m pip install -q 'transformers[serving]>=5.24,<5.25' 'tokenizers>=0.22'
# The demo's packages into the dependency cache beside the default database (.webgen/deps-cache), so
# that `webgen-agent demo` runs from here without npm's registry afterwards. A throwaway run does it.
prefill=$(mktemp -d)
if WEBGEN_DEPS_CACHE="$PWD/.webgen/deps-cache" .venv/bin/webgen-agent demo --out "$prefill/out" --db "$prefill/db/w.db" >"$prefill/log" 2>&1; then
  echo "demo packages cached in .webgen/deps-cache"
else
  echo "could not cache the demo's packages (no npm registry?): the first demo will need it; see $prefill/log"
fi
echo "setup done: $(.venv/bin/webgen-agent --help >/dev/null && echo webgen-agent ok), $(.venv/bin/python -c "from webgen_agent.tools.sandbox import sandbox_problem as p; print(p() or 'sandbox ok')"), $(node --version), $(chromium --version 2>/dev/null || chromium-browser --version)"
