"""The install scripts of dependencies, run after a tree was installed (or restored) with scripts off.

A tree for the shared cache is installed with ``--ignore-scripts``; its dependencies' scripts then
run here, in the run's own copy, each scripted package given private copies of its files and the
rest of node_modules read-only, so a script can change its own package and nothing else.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from webgen_agent.tools.process import CommandResult, ProcessRegistry, run_command
from webgen_agent.tools.sandbox import Confinement, own_copies

# npm's warnings left out of the output (``quiet``): a warning that merely contains the word "error"
# (a package named error-*, a deprecation notice) is no failure.
NPM_QUIET = "--loglevel=error"
# Runs the lifecycle scripts of already-installed dependencies; bin links were made by the install
# (and node_modules/.bin is read-only then).
NPM_REBUILD = [
    "npm",
    "rebuild",
    "--no-bin-links",
    "--ignore-scripts=false",
    "--no-audit",
    "--no-fund",
    NPM_QUIET,
]

# Scripts npm runs for an installed dependency (and `node-gyp rebuild` when it has a binding.gyp).
_DEPENDENCY_SCRIPTS = ("preinstall", "install", "postinstall")


def scripted_packages(node_modules: Path) -> list[Path]:
    """The package folders under ``node_modules`` (nested ones included) whose install scripts npm runs."""
    found: list[Path] = []
    stack = [node_modules]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("@"):
                stack.append(entry)  # a scope: its packages are one level down
                continue
            if entry.name.startswith("."):
                continue
            try:
                package = json.loads((entry / "package.json").read_text())
            except (OSError, ValueError):
                continue
            raw = package.get("scripts") if isinstance(package, dict) else None
            scripts = raw if isinstance(raw, dict) else {}
            if any(name in scripts for name in _DEPENDENCY_SCRIPTS) or (entry / "binding.gyp").is_file():
                found.append(entry)
            stack.append(entry / "node_modules")
    return found


async def run_dependency_scripts(
    workspace: Path,
    *,
    timeout_s: float,
    log_path: Callable[[], Path],
    registry: ProcessRegistry | None,
    sandbox: Confinement | None,
) -> CommandResult | None:
    """Run the install scripts of the dependencies of a tree installed with ``--ignore-scripts``.

    Run by ``dependency_scripts.js`` with npm's own script runner (what ``npm rebuild`` does, without
    its load of the whole tree), or by ``npm rebuild`` where that runner is not found.

    Each scripted package is first given private copies of its files (the rest may be hardlinked to
    the shared cache); inside the sandbox node_modules is read-only but for those packages' folders,
    so a script can change its own package and nothing else. None when no package has scripts.
    """
    node_modules = workspace / "node_modules"
    packages = await asyncio.to_thread(scripted_packages, node_modules)
    if not packages:
        return None
    for package in packages:
        await asyncio.to_thread(own_copies, package)
    confined = (
        dataclasses.replace(sandbox, read_only=(node_modules,), writable=tuple(packages))
        if sandbox is not None
        else None
    )
    # Off the event loop: finding npm reads files (a host such as `langgraph dev` fails a run that does so).
    command = await asyncio.to_thread(_dependency_scripts_command, node_modules, packages)
    return await run_command(
        command,
        cwd=workspace,
        timeout_s=timeout_s,
        log_path=log_path(),
        registry=registry,
        tail_lines=200,
        sandbox=confined,
    )


_DEPENDENCY_SCRIPTS_JS = Path(__file__).with_name("dependency_scripts.js")


def _dependency_scripts_command(node_modules: Path, packages: list[Path]) -> list[str]:
    root = npm_root()
    if root is not None:
        return ["node", "-e", _DEPENDENCY_SCRIPTS_JS.read_text(), str(root), *(str(p) for p in packages)]
    # An npm without its script runner where we look for it: npm rebuild does the same, slower.
    return [*NPM_REBUILD, *sorted({_package_name(node_modules, package) for package in packages})]


@functools.cache
def npm_root() -> Path | None:
    """The folder of the npm the agent runs, when it holds the script runner npm rebuild uses
    (``@npmcli/run-script``); None otherwise."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    root = Path(npm).resolve().parent.parent  # <npm>/bin/npm-cli.js
    runner = root / "node_modules" / "@npmcli" / "run-script" / "package.json"
    try:
        is_npm = json.loads((root / "package.json").read_text()).get("name") == "npm"
    except (OSError, ValueError, AttributeError):
        return None
    return root if is_npm and runner.is_file() else None


def _package_name(node_modules: Path, package: Path) -> str:
    """``react`` or ``@scope/name`` for a package folder (nested under another package's node_modules or not)."""
    return package.name if not package.parent.name.startswith("@") else f"{package.parent.name}/{package.name}"
