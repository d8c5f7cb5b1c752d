"""The dependency cache: node_modules trees keyed by the dependency manifest, hardlinked into workspaces.

Also the install itself (from the cache, else npm with its retries) and the marker that says which
manifest a workspace's node_modules was installed for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field

from webgen_agent.tools.endpoints import connection_problem
from webgen_agent.tools.npm_cache import private_npm_cache
from webgen_agent.tools.process import CommandResult, ProcessRegistry, run_command, strip_ansi
from webgen_agent.tools.sandbox import BUILD_CACHES, Confinement, cacheable_install, own_copies
from webgen_agent.tools.site.logs import explain, last_lines
from webgen_agent.tools.site.project import read_package_json

DEPS_MARKER = ".webgen-deps"  # skipped by snapshots (checkpoints.store.SKIPPED_FILES)
LOCKFILES = ("package-lock.json", "npm-shrinkwrap.json")
NPM_INSTALL = ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline"]
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
INSTALL_RETRIES = ("--force", "--legacy-peer-deps")  # flags of the retries after a failed install, in order
# Build caches the dependency cache must not carry from one project to another.
_CACHE_SKIP = BUILD_CACHES


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


DEFAULT_REGISTRY = "https://registry.npmjs.org/"
REGISTRY_UNREACHABLE = "`npm install` needs npm's registry, which cannot be reached"
_REGISTRY_CONNECT_TIMEOUT_S = 3.0


def npm_registry() -> str:
    """The registry npm installs from: npm_config_registry, else npm's default."""
    return os.environ.get("npm_config_registry") or os.environ.get("NPM_CONFIG_REGISTRY") or DEFAULT_REGISTRY


# How long an answer of the registry check stands: an install the dependency cache cannot serve
# asks again only after this (a reachable registry rarely goes away; an unreachable one is asked
# sooner again, as the network may come back).
REGISTRY_REACHABLE_TTL_S = 300.0
REGISTRY_UNREACHABLE_TTL_S = 15.0


@dataclasses.dataclass
class _RegistryCheck:
    """The last answer of ``registry_problem`` for one registry, and when it was asked."""

    asked_at: float
    problem: str | None

    def fresh(self, now: float) -> bool:
        ttl = REGISTRY_REACHABLE_TTL_S if self.problem is None else REGISTRY_UNREACHABLE_TTL_S
        return now - self.asked_at < ttl


_REGISTRY_CHECKS: dict[str, _RegistryCheck] = {}  # by registry URL: the process asks each one rarely


async def registry_problem(*, fresh: bool = False) -> str | None:
    """Why npm's registry cannot be reached from here; None when it answers (any HTTP status).

    Asked before an install the dependency cache cannot serve: npm itself would wait out its
    retries (minutes) before failing, and the retries with looser flags would wait again. The
    answer is kept per registry for a while (``REGISTRY_*_TTL_S``), so that installs do not each
    pay a request; ``fresh`` asks now whatever is kept (``webgen-agent doctor``).
    """
    registry = npm_registry()
    kept = _REGISTRY_CHECKS.get(registry)
    if kept is not None and not fresh and kept.fresh(time.monotonic()):
        return kept.problem
    problem = None
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, connect=_REGISTRY_CONNECT_TIMEOUT_S)) as client:
            await client.get(registry)
    except httpx.HTTPError as error:
        problem = connection_problem(error)
    _REGISTRY_CHECKS[registry] = _RegistryCheck(time.monotonic(), problem)
    return problem


def registry_unreachable(error: str | None) -> bool:
    """Whether an execution error is the unreachable registry (``install_dependencies`` gave up at once)."""
    return bool(error) and REGISTRY_UNREACHABLE in str(error)


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
    order); then cached.

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
    if cache is not None and await asyncio.to_thread(cache.restore, manifest, ws):
        scripts = await run_dependency_scripts(
            ws, timeout_s=timeout_s, log_path=scripts_log_path or log_path, registry=registry, sandbox=sandbox
        )
        if scripts is not None and not scripts.ok:
            return _scripts_failed(scripts, started)
        _write_marker(ws, [key, dependency_key(ws)])
        return InstallResult(ran=True, cached=True, seconds=round(time.monotonic() - started, 3))

    problem = await registry_problem()
    if problem is not None:
        headline = f"{REGISTRY_UNREACHABLE} ({npm_registry()}: {problem}); no tree for this package.json is in the dependency cache."
        return InstallResult(ran=True, error=headline, seconds=round(time.monotonic() - started, 3))
    if sandbox is not None and (ws / "node_modules").is_dir():
        # Install scripts run with write access to node_modules: never to files the cache shares.
        await asyncio.to_thread(own_copies, ws / "node_modules")
    # A tree for the shared cache is installed with every lifecycle script off: what it holds is
    # then only what the registry's tarballs hold. The scripts run afterwards, in this copy only.
    no_scripts = ["--ignore-scripts"] if cache is not None else []

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
    seconds = round(time.monotonic() - started, 3)
    output = await asyncio.to_thread(_whole_output, logs[-1])
    if not result.ok:
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
            seconds=seconds,
        )
    if cache is not None:
        if await asyncio.to_thread(_shareable, ws):
            await asyncio.to_thread(cache.store, [manifest, cache_key(ws)], ws)
        scripts = await run_dependency_scripts(
            ws, timeout_s=timeout_s, log_path=scripts_log_path or log_path, registry=registry, sandbox=sandbox
        )
        if scripts is not None and not scripts.ok:
            return _scripts_failed(scripts, started)
    _write_marker(ws, [key, dependency_key(ws)])  # npm may have written a lockfile: both keys describe this tree
    seconds = round(time.monotonic() - started, 3)
    return InstallResult(ran=True, seconds=seconds, log_tail=last_lines(result.output_tail), output=output)


MAX_OUTPUT_BYTES = 200_000  # of npm's output kept whole (the upstream profile reads it for "error")


def _whole_output(log: Path) -> str:
    """npm's output as its log file holds it (the first ``MAX_OUTPUT_BYTES``), ANSI codes removed."""
    try:
        with log.open("rb") as handle:
            return strip_ansi(handle.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace"))
    except OSError:
        return ""


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


# -- the cache -----------------------------------------------------------------------------------


def _link_or_copy(src: str, dst: str) -> None:
    # npm rewrites its hidden lockfile in place: a hardlink would let one project corrupt the cache.
    if os.path.basename(src) != ".package-lock.json":
        try:
            os.link(src, dst)
            return
        except OSError:  # another filesystem, or links not allowed
            pass
    shutil.copy2(src, dst)


def _hardlink_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(*_CACHE_SKIP))


class DepsCache:
    """node_modules trees by dependency key, shared by hardlinks between workspaces and runs.

    Entries are written to a temporary folder and renamed into place, so a reader never sees half an
    entry and two runs storing the same key at once both succeed (the second rename loses, harmlessly).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def entry(self, key: str) -> Path | None:
        path = self.root / key
        return path if (path / "node_modules").is_dir() else None

    def restore(self, key: str, workspace: Path) -> bool:
        """Materialise node_modules (and the lockfile npm would have written) from the cache."""
        entry = self.entry(key)
        if entry is None:
            return False
        target = workspace / "node_modules"
        tmp = workspace / f".node_modules.webgen-{uuid.uuid4().hex[:8]}"
        try:
            _hardlink_tree(entry / "node_modules", tmp)
        except (OSError, shutil.Error):
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        if target.exists() or target.is_symlink():
            _remove(target)
        try:
            os.rename(tmp, target)
        except OSError:  # the old tree could not be removed: let npm sort it out
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        for lockfile in LOCKFILES:
            if (entry / lockfile).is_file() and not (workspace / lockfile).exists():
                shutil.copy2(entry / lockfile, workspace / lockfile)
        return True

    def store(self, keys: list[str], workspace: Path) -> None:
        """Keep the workspace's node_modules under ``keys[0]``; other keys become aliases."""
        source = workspace / "node_modules"
        if not keys or not source.is_dir():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        primary = self.root / keys[0]
        if self.entry(keys[0]) is None:
            tmp = self.root / f".tmp-{keys[0][:12]}-{uuid.uuid4().hex[:8]}"
            try:
                tmp.mkdir()
                _hardlink_tree(source, tmp / "node_modules")
                for lockfile in LOCKFILES:
                    if (workspace / lockfile).is_file():
                        shutil.copy2(workspace / lockfile, tmp / lockfile)
                os.rename(tmp, primary)
            except OSError:  # another run stored it first, or the disk is full: the cache is optional
                shutil.rmtree(tmp, ignore_errors=True)
                if self.entry(keys[0]) is None:
                    return
        for alias in keys[1:]:
            if alias != keys[0] and not (self.root / alias).exists():
                link = self.root / f".tmp-link-{uuid.uuid4().hex[:8]}"
                with contextlib.suppress(OSError):
                    link.symlink_to(keys[0])
                    os.rename(link, self.root / alias)
                link.unlink(missing_ok=True)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _read_marker(workspace: Path) -> list[str]:
    try:
        keys = json.loads((workspace / DEPS_MARKER).read_text())
    except (OSError, ValueError):
        return []
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []
