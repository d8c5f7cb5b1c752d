"""The repository holds only the project's known layout: a stray file at the top level fails CI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Top-level entries of the layout (ARCHITECTURE.md's design card, plus the project's own folders).
LAYOUT = {
    ".ci",
    ".dockerignore",
    ".env.example",
    ".gitignore",
    "Dockerfile",
    "README.md",
    "apps",
    "benchmarks",
    "checkpoints",
    "compose.yaml",
    "core",
    "deploy",
    "docs",
    "examples",
    "graph",
    "langgraph.json",
    "nodes",
    "pyproject.toml",
    "requirements",
    "scripts",
    "tests",
    "tools",
    "webgen_agent",
}


def test_every_tracked_file_is_inside_the_known_layout():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    stray = sorted({line.split("/", 1)[0] for line in tracked.splitlines() if line} - LAYOUT)
    assert not stray, f"tracked files outside the project's layout: {stray} (move them, or add them to LAYOUT)"


def test_every_package_folder_is_in_the_wheel() -> None:
    """pyproject.toml names the packages one by one (its folders map onto webgen_agent): a new
    sub-package left out of the list imports from a checkout and fails from a wheel."""
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for package, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            if not any(part.startswith((".", "__")) for part in parts):
                found.add(".".join((package, *parts)))
    assert found <= set(setuptools["packages"])
