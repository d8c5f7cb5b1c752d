#!/usr/bin/env bash
# Write the lock files scripts/setup.sh installs from (requirements/*.txt) with uv's resolver. Run it
# after changing a dependency in pyproject.toml or requirements/*.in; a version already in a lock file
# is kept unless the change needs another (UPGRADE=1: the newest versions that fit).
#
# test.txt is resolved for CI's machines (Linux x86_64, Python 3.11) against the CPU build of PyTorch
# (whose metadata names no CUDA packages), read from pip's find-links (TORCH_FIND_LINKS): torch itself
# is left out of the lock and installed by pip. lean.txt (the core package, any platform) and
# studio.txt (the same, LangGraph's server and the PostgreSQL extra compose.yaml's database needs) take
# test.txt's versions: what the suite tested.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-$(command -v uv || echo .venv-uv/bin/uv)}"
TORCH_FIND_LINKS="${TORCH_FIND_LINKS:-$(python3 -m pip config get global.find-links 2>/dev/null || true)}"
[ -n "$TORCH_FIND_LINKS" ] || { echo "set TORCH_FIND_LINKS to a folder or index page holding torch 2.13.0+cpu" >&2; exit 2; }
upgrade=()
[ "${UPGRADE:-}" = 1 ] && upgrade=(--upgrade)
torch_cpu=$(mktemp)
trap 'rm -f "$torch_cpu"' EXIT
echo "torch==2.13.0+cpu" >"$torch_cpu"
linux=(--python-version 3.11.7 --python-platform x86_64-manylinux_2_28 --find-links "$TORCH_FIND_LINKS"
  --override "$torch_cpu" --no-emit-package torch)
compile() { "$UV" pip compile -q --no-header --override requirements/overrides.txt "${upgrade[@]}" "$@"; }
compile pyproject.toml requirements/studio.in --extra test --extra train --extra studio "${linux[@]}" \
  -o requirements/test.txt
compile pyproject.toml --universal --python-version 3.11.5 -c requirements/test.txt -o requirements/lean.txt
compile pyproject.toml requirements/studio.in --extra studio --extra postgres --universal --python-version 3.11.5 -c requirements/test.txt \
  -o requirements/studio.txt
compile requirements/realserver.in "${linux[@]}" -o requirements/realserver.txt
echo "locked: $(grep -c '==' requirements/test.txt) test, $(grep -c '==' requirements/lean.txt) lean, $(grep -c '==' requirements/studio.txt) studio, $(grep -c '==' requirements/realserver.txt) real-server packages"
