#!/usr/bin/env bash
# Static checks CI runs before the tests: lint, format, types, and the import layers.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PY=$root/.venv/bin
"$PY/ruff" check .
"$PY/ruff" format --check .
# The package maps top-level folders (core/, tools/, ...) into webgen_agent (setuptools package-dir);
# the editable install does that with an import hook that mypy and import-linter cannot see, so both
# read a folder of symlinks laid out as the installed package.
layout=$(mktemp -d)
trap 'rm -rf "$layout"' EXIT
mkdir "$layout/webgen_agent"
for entry in webgen_agent/*.py; do ln -s "$root/$entry" "$layout/webgen_agent/$(basename "$entry")"; done
for folder in core tools checkpoints nodes graph apps; do ln -s "$root/$folder" "$layout/webgen_agent/$folder"; done
MYPYPATH="$layout" "$PY/mypy" -p webgen_agent -p benchmarks
(cd "$layout" && PYTHONPATH="$layout" "$PY/lint-imports" "$root/pyproject.toml")
"$PY/python" scripts/check_sizes.py
