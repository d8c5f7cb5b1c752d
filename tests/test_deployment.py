"""The server image (Dockerfile, docs/deploy.md): built and checked where docker runs, else the recipe
is checked (scripts/check_image.sh: a non-root user; Chromium, Node/npm and bubblewrap; tini as PID 1
(no zombies after a run); the demo's packages cached; runs and the database on /data; a seccomp profile that lets bubblewrap make its
namespaces; compose with PostgreSQL, and the packages that speak it); the build context leaves out the virtualenvs, run databases,
run folders and node_modules."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE = ("Dockerfile", "compose.yaml", "deploy", "scripts", "requirements")


def _check_image(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    passed = {key: os.environ[key] for key in ("DOCKER_HOST", "PYTHON_IMAGE") if key in os.environ}
    return subprocess.run(
        ["bash", str(folder / "scripts" / "check_image.sh")],
        capture_output=True,
        text=True,
        timeout=3600,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", **passed, **env},
    )


def test_the_image_recipe_holds_what_a_deployment_needs() -> None:
    done = _check_image(REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_recipe_running_as_root_or_refusing_namespaces_is_caught(tmp_path: Path) -> None:
    for name in RECIPE:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    dockerfile = tmp_path / "Dockerfile"
    # As root, and with the server itself as PID 1 (no tini to reap the sandbox's exited processes).
    recipe = dockerfile.read_text().replace("USER 10001", "USER root")
    dockerfile.write_text(recipe.replace('ENTRYPOINT ["/usr/bin/tini", "--"]\n', ""))
    profile = tmp_path / "deploy" / "seccomp-userns.json"
    profile.write_text(profile.read_text().replace('"acct",', '"acct", "unshare",'))
    # The server image without psycopg: compose's PostgreSQL database would stop it at start.
    studio = tmp_path / "requirements" / "studio.txt"
    studio.write_text("".join(line for line in studio.read_text().splitlines(True) if not line.startswith("psycopg")))
    done = _check_image(tmp_path, DOCKER_HOST="unix:///nonexistent")
    assert done.returncode == 1
    assert "non-root" in done.stderr and "unshare" in done.stderr and "PostgreSQL extra" in done.stderr
    assert "PID 1 is not tini" in done.stderr


def test_the_build_context_leaves_out_local_state() -> None:
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".venv", ".venv-*", ".webgen", "webgen-runs", "**/node_modules", ".git"} <= ignored


def test_a_sandbox_refused_namespaces_points_at_the_deployment_page_not_an_install() -> None:
    from webgen_agent.tools.sandbox import sandbox_fix

    refused = "bwrap cannot create its namespaces here (bwrap: No permissions to create new namespace)"
    assert "docs/deploy.md" in sandbox_fix(refused) and "install" not in sandbox_fix(refused)
    assert "install bubblewrap" in sandbox_fix("bubblewrap (bwrap) is not installed")
