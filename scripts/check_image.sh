#!/usr/bin/env bash
# The server image (docs/deployment.md). With a docker daemon: build it with `langgraph build` and
# check that Chromium, Node/npm, bubblewrap and the project are in it. Without one: generate the
# Dockerfile `langgraph build` would use and check that it installs them (what can be checked here).
set -euo pipefail
cd "$(dirname "$0")/.."
LANGGRAPH="${LANGGRAPH:-.venv/bin/langgraph}"
TAG="${TAG:-webgen-agent-server}"
if docker info >/dev/null 2>&1; then
  "$LANGGRAPH" build -t "$TAG"
  docker run --rm --entrypoint sh "$TAG" -c \
    'chromium --version && node --version && npm --version && bwrap --version &&
     python -c "import webgen_agent.graph.studio; print(\"webgen_agent ok\")"'
  echo "image $TAG built and checked"
else
  generated="$(mktemp)"
  trap 'rm -f "$generated"' EXIT
  "$LANGGRAPH" dockerfile "$generated" >/dev/null
  for package in chromium nodejs npm bubblewrap; do
    grep -Eq "apt-get install .*\b${package}\b" "$generated" || { echo "the image lacks $package"; exit 1; }
  done
  grep -q "ENV WEBGEN_CHROMIUM=/usr/bin/chromium" "$generated" || { echo "WEBGEN_CHROMIUM not set"; exit 1; }
  grep -q '^ADD \. ' "$generated" || { echo "the project is not added"; exit 1; }
  echo "no docker daemon: checked the Dockerfile langgraph build generates (Chromium, Node/npm, bubblewrap, the project)"
fi
