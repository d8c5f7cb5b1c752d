#!/usr/bin/env bash
# The server image (Dockerfile, docs/deploy.md). With a docker daemon: build it and check it runs as
# it should. Without one: check the recipe (what can be checked here). PYTHON_IMAGE: another base.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${TAG:-webgen-agent-server}"
# What the sandbox needs from the runtime (docs/deploy.md): the seccomp profile, and /proc unmasked.
SANDBOX_OPTS=(--security-opt "seccomp=$PWD/deploy/seccomp-userns.json" --security-opt systempaths=unconfined)
fail() { echo "check_image: $*" >&2; exit 1; }

if command -v hadolint >/dev/null 2>&1; then
  hadolint --failure-threshold warning --ignore DL3008 Dockerfile || fail "hadolint found problems in the Dockerfile"
fi
python3 - <<'EOF' || fail "the recipe lacks something (above)"
import json, re, sys
dockerfile = open("Dockerfile").read()
problems = []
user = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
if not user or user[-1] in ("0", "root"):
    problems.append("the image does not end as a non-root user")
for package in ("chromium-headless-shell", "nodejs", "npm", "bubblewrap", "util-linux", "libseccomp2"):
    if not re.search(rf"apt-get install[^\n]*(\\\n[^\n]*)*\b{package}\b", dockerfile):
        problems.append(f"the image lacks {package}")
if not re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--"\]', dockerfile, re.M):
    problems.append("the image's PID 1 is not tini (the sandbox's exited processes would stay zombies)")
if "webgen-agent demo --prepare" not in dockerfile:
    problems.append("the demo's packages are not cached in the image")
if not re.search(r'^VOLUME \["/data"\]', dockerfile, re.M) or "WEBGEN_DB=/data/" not in dockerfile:
    problems.append("the run database is not on the /data volume")
profile = json.load(open("deploy/seccomp-userns.json"))
denied = {name for rule in profile["syscalls"] if rule["action"] != "SCMP_ACT_ALLOW" for name in rule["names"]}
needed = {"unshare", "clone", "clone3", "setns", "mount", "umount2", "pivot_root", "sethostname"}
if profile["defaultAction"] != "SCMP_ACT_ALLOW" or denied & needed:
    problems.append(f"the seccomp profile refuses what bubblewrap needs: {sorted(denied & needed)}")
compose = open("compose.yaml").read()
if "image: postgres" not in compose or "seccomp=./deploy/seccomp-userns.json" not in compose or "systempaths=unconfined" not in compose:
    problems.append("compose.yaml lacks PostgreSQL, the seccomp profile or the unmasked /proc")
# compose.yaml's server keeps its runs in PostgreSQL: the image's packages must speak it.
studio = open("requirements/studio.txt").read()
if "WEBGEN_DB: postgresql://" in compose and not all(
    re.search(rf"^{name}==", studio, re.M) for name in ("psycopg", "psycopg-pool", "langgraph-checkpoint-postgres")
):
    problems.append("requirements/studio.txt lacks the PostgreSQL extra that compose.yaml's database needs")
print("\n".join(problems), file=sys.stderr)
sys.exit(1 if problems else 0)
EOF

if ! docker info >/dev/null 2>&1; then
  echo "no docker daemon: checked the recipe (non-root user, Chromium, Node/npm, bubblewrap, the cached demo, /data, the seccomp profile, compose)"
  exit 0
fi
docker build --network host ${PYTHON_IMAGE:+--build-arg "PYTHON_IMAGE=$PYTHON_IMAGE"} -t "$TAG" .
in_image() { docker run --rm --network none "$@"; }
[ "$(in_image "$TAG" id -u)" != 0 ] || fail "the image runs as root"
in_image "$TAG" sh -c 'chromium-headless-shell --version && node --version && npm --version && bwrap --version' \
  || fail "Chromium, Node.js, npm or bubblewrap does not run in the image"
[ -n "$(in_image "$TAG" ls /opt/webgen/deps-cache)" ] || fail "the demo's packages are not in the image"
sandbox='from webgen_agent.tools.sandbox import sandbox_problem as p; print(p() or "sandbox ok")'
[ "$(in_image "${SANDBOX_OPTS[@]}" "$TAG" python -c "$sandbox")" = "sandbox ok" ] \
  || fail "the sandbox does not start under deploy/seccomp-userns.json"
# Docker's default profile refuses user namespaces: a run must refuse in one line naming --no-sandbox.
refused=$(in_image "$TAG" webgen-agent run "A page" --model m --base-url http://127.0.0.1:9/v1 2>&1) && fail "a run started without the sandbox"
[ "$(echo "$refused" | wc -l)" -eq 1 ] && echo "$refused" | grep -q -- "--no-sandbox" \
  || fail "a run without the sandbox did not refuse in one line: $refused"
# The whole offline demo in the container, no network at all: the cached packages, the sandbox.
in_image "${SANDBOX_OPTS[@]}" "$TAG" webgen-agent demo --out /data/demo | tail -3 \
  || fail "the demo failed in the container"
# After a run, no process is left a zombie: under a PID 1 that reaps nothing but its own child (as
# the LangGraph server), the sandbox's orphans would stay (5 a run); the image's tini reaps them.
zombies='import glob, subprocess
subprocess.run(["webgen-agent", "demo", "--out", "/data/demo"], stdout=subprocess.DEVNULL, check=True)
print(sum("\nState:\tZ" in open(p).read() for p in glob.glob("/proc/[0-9]*/status")))'
[ "$(in_image "${SANDBOX_OPTS[@]}" "$TAG" python -c "$zombies")" = 0 ] || fail "a run left zombie processes in the container"
echo "image $TAG built and checked (non-root, tools, cached demo, sandbox under the profile, refusal without it, the demo offline, no zombies)"
