"""The server image (docs/deployment.md): built and checked where docker runs, else the Dockerfile
``langgraph build`` would use is checked (scripts/check_image.sh); the build context leaves out the
virtualenvs, run databases, run folders and node_modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_image_installs_chromium_node_bubblewrap_and_the_project() -> None:
    langgraph = Path(sys.executable).with_name("langgraph")
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "check_image.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "LANGGRAPH": str(langgraph)},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_build_context_leaves_out_local_state() -> None:
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".venv", ".venv-*", ".webgen", "webgen-runs", "**/node_modules", ".git"} <= ignored
