"""A workspace's dependency install: from the shared cache, else by npm (with its retries), then shared.

Also the keys (which manifest a tree was installed for, which trees may be shared) and the marker
that says which manifest a workspace's node_modules was installed for. The cache itself is
``tools.site.depcache``, the proof a tree must pass before it is shared ``tools.site.integrity``,
the dependencies' install scripts ``tools.site.dependency_scripts``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import platform
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.tools.npm_cache import private_npm_cache
from webgen_agent.tools.process import CommandResult, ProcessRegistry, run_command, strip_ansi
from webgen_agent.tools.sandbox import Confinement, cacheable_install, own_copies
from webgen_agent.tools.site.depcache import LOCKFILES, DepsCache, remove_tree
from webgen_agent.tools.site.dependency_scripts import NPM_QUIET, run_dependency_scripts
from webgen_agent.tools.site.integrity import NotProven, check_against_registry, check_tree, default_npm_cache
from webgen_agent.tools.site.logs import explain, last_lines
from webgen_agent.tools.site.project import read_package_json
from webgen_agent.tools.site.registry import REGISTRY_UNREACHABLE, npm_registry, registry_problem

DEPS_MARKER = ".webgen-deps"  # skipped by snapshots (checkpoints.store.SKIPPED_FILES)
NPM_INSTALL = ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline"]
INSTALL_RETRIES = ("--force", "--legacy-peer-deps")  # flags of the retries after a failed install, in order
_log = logging.getLogger(__name__)


class InstallResult(BaseModel):
    """What ``SiteRunner.ensure_dependencies`` did."""

    ran: bool = False
    cached: bool = False
    error: str | None = None
    log_tail: str = ""
    output: str = Field(default="", description="npm's whole output (its last attempt, capped), when npm ran.")
    seconds: float = 0.0


@functools.cache
def _node_version() -> str:
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def dependency_key(workspace: Path) -> str:
    """sha256 of what decides node_modules: the declared dependencies, the lockfile, the platform."""
    package = read_package_json(workspace)
    payload: dict[str, Any] = {
        name: package.get(name) or {}
        for name in ("dependencies", "devDependencies", "optionalDependencies", "overrides")
    }
    return _key(payload, workspace, LOCKFILES)


def cache_key(workspace: Path) -> str:
    """sha256 of everything an install reads: the whole package.json, the lockfile, .npmrc, the platform.

    The shared cache is keyed by this, not by ``dependency_key``: two projects share a tree only when
    nothing that runs or resolves during their install differs (scripts, workspaces, overrides,
    bundled dependencies included). ``dependency_key`` still decides when a workspace reinstalls.
    """
    return _key({}, workspace, ("package.json", ".npmrc", *LOCKFILES))


def _key(payload: dict[str, Any], workspace: Path, files: tuple[str, ...]) -> str:
    """sha256 of ``payload``, the digests of ``files`` in the workspace (None when absent), the platform."""
    for name in files:
        path = workspace / name
        payload[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    # Native and platform-specific packages (esbuild, rollup) differ per platform and Node.
    payload["platform"] = f"{sys.platform}-{platform.machine()}-{_node_version()}"
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _shareable(workspace: Path) -> bool:
    return cacheable_install(workspace, read_package_json(workspace))


def _has_dependencies(package: dict[str, Any]) -> bool:
    return any(package.get(name) for name in ("dependencies", "devDependencies", "optionalDependencies"))


def is_installed(workspace: Path, key: str, package: dict[str, Any]) -> bool:
    """node_modules was installed for dependency key ``key`` (or the project needs none)."""
    node_modules_ok = (workspace / "node_modules").is_dir() or not _has_dependencies(package)
    return key in _read_marker(workspace) and node_modules_ok


async def install_dependencies(
    workspace: Path,
    key: str,
    *,
    cache: DepsCache | None,
    timeout_s: float,
    registry: ProcessRegistry | None,
    log_path: Callable[[], Path],
    sandbox: Confinement | None = None,
    scripts_log_path: Callable[[], Path] | None = None,
    npm_cache: Path | None = None,
    retries: tuple[str, ...] = INSTALL_RETRIES,
    quiet: bool = True,
) -> InstallResult:
    """node_modules for ``key``: from the cache, else by npm (retried with ``retries``' flags, in
    order); then cached when it is proved to hold only what the registry published.

    Never run under a live dev server. ``log_path`` names a new log file for each npm attempt,
    ``scripts_log_path`` (default ``log_path``) one for the dependencies' install scripts.
    ``npm_cache``: the agent's npm cache; a sandboxed ``npm install`` gets a private copy of it
    (``tools.npm_cache``), made only when npm runs: a tree restored from the dependency cache needs none.
    ``quiet``: npm prints errors only (else at its own default level, warnings included).
    """
    ws = workspace
    await asyncio.to_thread((ws / DEPS_MARKER).unlink, missing_ok=True)  # never leave a stale marker if we fail
    started = time.monotonic()
    if cache is not None and not await asyncio.to_thread(_shareable, ws):
        cache = None  # what it installs is not described by its manifest: never shared, either way
    manifest = await asyncio.to_thread(cache_key, ws) if cache is not None else ""
    scripts_log = scripts_log_path or log_path
    if cache is not None and await asyncio.to_thread(cache.restore, manifest, ws):
        return await _with_dependency_scripts(ws, key, timeout_s, scripts_log, registry, sandbox, started, cached=True)

    problem = await registry_problem()
    if problem is not None:
        headline = f"{REGISTRY_UNREACHABLE} ({npm_registry()}: {problem}); no tree for this package.json is in the dependency cache."
        return InstallResult(ran=True, error=headline, seconds=round(time.monotonic() - started, 3))
    if cache is not None:
        # Only a tree installed from nothing may be shared: npm keeps the files of the packages a
        # workspace already has, whatever wrote them (an earlier step's install scripts, a
        # dependency's own postinstall), so it installs into an empty folder.
        await asyncio.to_thread(remove_tree, ws / "node_modules")
    elif sandbox is not None and (ws / "node_modules").is_dir():
        # Install scripts run with write access to node_modules: never to files the cache shares.
        await asyncio.to_thread(own_copies, ws / "node_modules")
    # A tree for the shared cache is installed with every lifecycle script off: what it holds is
    # then only what the registry's tarballs hold. The scripts run afterwards, in this copy only.
    no_scripts = ["--ignore-scripts"] if cache is not None else []
    locked = any((ws / name).is_file() for name in LOCKFILES)  # its digests are not npm's answer of this install

    logs: list[Path] = []
    async with private_npm_cache(sandbox, npm_cache) as npm_sandbox:

        def attempt(extra: list[str]) -> Awaitable[CommandResult]:
            logs.append(log_path())
            return npm_install(
                ws,
                [*no_scripts, *extra],
                timeout_s=timeout_s,
                log_path=logs[-1],
                registry=registry,
                sandbox=npm_sandbox,
                quiet=quiet,
            )

        result = await attempt([])
        # Peer-dependency conflicts are the usual cause; retried in upstream WebGen-Bench's order.
        for retry in retries:
            if result.ok or result.timed_out or result.over_size_cap:
                break
            result = await attempt([retry])
        tarballs = npm_sandbox.npm_cache if npm_sandbox is not None else default_npm_cache()
        unproven = await _unproven(ws, tarballs, locked=locked) if result.ok and cache is not None else None
    output = await asyncio.to_thread(_whole_output, logs[-1])
    if not result.ok:
        return _install_failed(result, timeout_s, retries, output, started)
    if cache is not None:
        if unproven is None and await asyncio.to_thread(_shareable, ws):
            await asyncio.to_thread(cache.store, [manifest, cache_key(ws)], ws)
        elif unproven is not None:
            _log.warning("node_modules of %s not shared: %s", ws, unproven)
        # npm may have written a lockfile: both keys describe this tree.
        return await _with_dependency_scripts(
            ws, key, timeout_s, scripts_log, registry, sandbox, started, output=output, tail=result.output_tail
        )
    _write_marker(ws, [key, dependency_key(ws)])
    seconds = round(time.monotonic() - started, 3)
    return InstallResult(ran=True, seconds=seconds, log_tail=last_lines(result.output_tail), output=output)


async def _unproven(workspace: Path, tarballs: Path | None, *, locked: bool) -> str | None:
    """Why the tree just installed may not be shared (``tools.site.integrity``); None when it is proved."""
    if tarballs is None:
        return "npm's cache is unknown"
    try:
        await asyncio.to_thread(check_tree, workspace, tarballs)
        if locked:
            await check_against_registry(workspace, npm_registry())
    except (NotProven, OSError) as exc:
        return str(exc)
    return None


async def _with_dependency_scripts(
    workspace: Path,
    key: str,
    timeout_s: float,
    log_path: Callable[[], Path],
    registry: ProcessRegistry | None,
    sandbox: Confinement | None,
    started: float,
    *,
    cached: bool = False,
    output: str = "",
    tail: str = "",
) -> InstallResult:
    """Run the dependencies' install scripts of a tree installed with scripts off, then mark it installed."""
    scripts = await run_dependency_scripts(
        workspace, timeout_s=timeout_s, log_path=log_path, registry=registry, sandbox=sandbox
    )
    if scripts is not None and not scripts.ok:
        return _scripts_failed(scripts, started)
    _write_marker(workspace, [key, dependency_key(workspace)])
    seconds = round(time.monotonic() - started, 3)
    return InstallResult(
        ran=True, cached=cached, seconds=seconds, log_tail=last_lines(tail) if tail else "", output=output
    )


def _install_failed(
    result: CommandResult, timeout_s: float, retries: tuple[str, ...], output: str, started: float
) -> InstallResult:
    if result.timed_out:
        headline = f"`npm install` did not finish within {timeout_s:g} s and was stopped."
    elif result.over_size_cap:
        headline = "`npm install` was stopped: the project folder went over its size cap while it ran."
    else:
        retried = f", also when retried with {' and then '.join(retries)}" if retries else ""
        headline = (
            f"`npm install` failed (exit code {result.exit_code}){retried}. "
            "Check the package names and versions in package.json."
        )
    return InstallResult(
        ran=True,
        error=explain(headline, result.output_tail),
        log_tail=last_lines(result.output_tail),
        output=output,
        seconds=round(time.monotonic() - started, 3),
    )


MAX_OUTPUT_BYTES = 200_000  # of npm's output kept whole (the upstream profile reads it for "error")


def _whole_output(log: Path) -> str:
    """npm's output as its log file holds it (the first ``MAX_OUTPUT_BYTES``), ANSI codes removed."""
    try:
        with log.open("rb") as handle:
            return strip_ansi(handle.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace"))
    except OSError:
        return ""


def _scripts_failed(result: CommandResult, started: float) -> InstallResult:
    headline = (
        "A dependency's install script (preinstall, install or postinstall) failed"
        + (" or ran past its time" if result.timed_out else f" (exit code {result.exit_code})")
        + ". Such scripts may change their own package only; check the dependencies in package.json."
    )
    return InstallResult(
        ran=True,
        error=explain(headline, result.output_tail),
        log_tail=last_lines(result.output_tail),
        seconds=round(time.monotonic() - started, 3),
    )


async def npm_install(
    workspace: Path,
    extra: list[str],
    *,
    timeout_s: float,
    log_path: Path,
    registry: ProcessRegistry | None,
    sandbox: Confinement | None = None,
    quiet: bool = True,
) -> CommandResult:
    """One ``npm install`` in ``workspace`` with ``extra`` flags (``quiet``: errors only)."""
    return await run_command(
        [*NPM_INSTALL, *([NPM_QUIET] if quiet else []), *extra],
        cwd=workspace,
        timeout_s=timeout_s,
        log_path=log_path,
        registry=registry,
        tail_lines=200,
        sandbox=sandbox,
    )


def _write_marker(workspace: Path, keys: list[str]) -> None:
    (workspace / DEPS_MARKER).write_text(json.dumps(sorted(set(keys))))


def _read_marker(workspace: Path) -> list[str]:
    try:
        keys = json.loads((workspace / DEPS_MARKER).read_text())
    except (OSError, ValueError):
        return []
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []
