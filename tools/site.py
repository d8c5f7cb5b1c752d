"""The executor's tool: install dependencies when they changed, (re)start the site, wait for HTTP.

Failures are real signals only (exit codes, a dead server, no or bad HTTP answer), never the word
"error" in a log; the log is only used to explain a failure to the coder model.

Static sites are served by ``python -m http.server`` as a managed process rather than by a server
thread inside the agent: it gets the same lifecycle as a dev server (own process group, log file,
registry entry for reaping, killed with the step), a crash or a slow client cannot touch the agent's
event loop, and its start-up cost (~0.1 s) is paid once per run because it never needs a restart.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fnmatch
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import httpx
from pydantic import BaseModel, Field

from webgen_agent.tools.process import (
    CommandResult,
    ManagedProcess,
    ProcessRegistry,
    read_tail,
    run_command,
    scrubbed_env,
    strip_ansi,
)

Stage = Literal["install", "start", "http", "ok"]
Kind = Literal["npm", "static"]

DEPS_MARKER = ".webgen-deps"  # skipped by snapshots (checkpoints.store.SKIPPED_FILES)
LOCKFILES = ("package-lock.json", "npm-shrinkwrap.json")
NPM_INSTALL = ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"]
INSTALL_RETRIES = ("--force", "--legacy-peer-deps")  # flags of the retries after a failed install, in order
# Root-level files whose change needs a fresh dev server (vite restarts itself on some, not all).
CONFIG_PATTERNS = (
    "package.json",
    "*.config.*",
    "tsconfig*.json",
    "jsconfig*.json",
    ".env*",
    ".postcssrc*",
    ".babelrc*",
)
# Build caches the dependency cache must not carry from one project to another.
_CACHE_SKIP = (".vite", ".cache", ".vite-temp")
_LOCAL_URL = re.compile(r"https?://(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\]):\d+[^\s'\"<>]*")
_ANNOUNCE = re.compile(r"\blocal\b|listening|running|started|ready|available|serving", re.IGNORECASE)
_ERROR_MARKER = re.compile(
    r"error|ERR!|failed|cannot |can't |not found|unexpected|exception|✘|EADDRINUSE|ENOENT|EACCES|ERESOLVE",
    re.IGNORECASE,
)
_BAD_STATUS_GRACE_S = 5.0  # a server answering 4xx/5xx gets this long to settle before we report it
_POLL_S = 0.1
# Source files vite serves as transformed modules, cached in its module graph until its file watcher
# reports a change. index.html, public/ and assets are read from disk on every request.
_VITE_MODULE_SUFFIXES = (
    ".js",
    ".jsx",
    ".ts",
    ".tsx",
    ".mjs",
    ".mts",
    ".cjs",
    ".cts",
    ".vue",
    ".svelte",
    ".css",
    ".scss",
    ".sass",
    ".less",
    ".styl",
    ".pcss",
    ".json",
)
# Modules vite serves without an inline source map: checked by a changed answer, not exactly.
_UNMAPPED_SUFFIXES = (".css", ".scss", ".sass", ".less", ".styl", ".pcss", ".json")
# A kept vite server picks an edit up in ~30-150 ms (watcher latency). A change within chokidar's
# 50 ms throttle of the previous change to that file is dropped for good (a file restored and then
# edited in one step), so after _FRESH_NUDGE_S the file's mtime is bumped once (a new change event);
# after _FRESH_CAP_S the server is restarted.
_FRESH_POLL_S = 0.02
_FRESH_NUDGE_S = 0.25
_FRESH_CAP_S = 3.0
_INLINE_MAP = re.compile(r"//# sourceMappingURL=data:application/json;(?:charset=utf-8;)?base64,([A-Za-z0-9+/=]+)\s*$")


class ExecutionResult(BaseModel):
    """Outcome of ``SiteRunner.ensure_running``.

    Stages: ``install`` (package.json unreadable, npm failed or timed out), ``start`` (nothing to
    run, the server exited, or it never accepted a connection before the deadline), ``http`` (it
    answered, but only with 4xx/5xx), ``ok`` (``url`` answers 200-399).
    """

    ok: bool
    stage: Stage = Field(description="Where it stopped: install, start, http, or ok.")
    kind: Kind | None = None
    url: str | None = None
    error: str | None = Field(
        default=None, description="For the coder model: what failed and the log lines that say why."
    )
    install_ran: bool = Field(default=False, description="Dependencies were (re)installed, by npm or from the cache.")
    install_cached: bool = Field(
        default=False, description="node_modules came from the dependency cache, npm did not run."
    )
    server_restarted: bool = Field(
        default=False, description="This call started a server process (first start or restart)."
    )
    server_pid: int | None = None
    install_s: float = 0.0
    start_s: float = 0.0
    fresh_s: float = Field(
        default=0.0, description="Time spent confirming a kept dev server serves the edited modules."
    )
    stale_restart: bool = Field(
        default=False, description="A kept server still served an old module after the cap: restarted."
    )
    log_tail: str = ""


class ServedModule(BaseModel):
    """What a running vite server answered for one source file, taken before an edit."""

    digest: str = Field(description="sha256 of the answer.")
    embeds_source: bool = Field(
        default=False,
        description="Checked exactly after an edit: the answer's inline source map carried the file's text "
        "(or no answer came for a script).",
    )


# -- log summaries for the coder -----------------------------------------------------------------


def summarize_log(text: str, *, max_lines: int = 40, max_chars: int = 4000) -> str:
    """The lines of a log worth showing: error-marked lines with context first, then the tail.

    Marked lines get a ``>> `` prefix; skipped stretches show as ``...``.
    """
    lines = [line.rstrip() for line in strip_ansi(text).split("\n") if line.strip()]
    if not lines:
        return ""
    marked = [i for i, line in enumerate(lines) if _ERROR_MARKER.search(line)]
    keep: set[int] = set()
    for i in marked:  # the first errors are usually the cause; later ones are fallout
        window = set(range(max(0, i - 1), min(len(lines), i + 3)))
        if len(keep | window) > max_lines - 10:
            break
        keep |= window
    for i in range(len(lines) - 1, -1, -1):  # fill the rest with the tail
        if len(keep) >= max_lines:
            break
        keep.add(i)
    marked_set = set(marked)
    out: list[str] = []
    previous = -1
    for i in sorted(keep):
        if i != previous + 1:
            out.append("...")
        out.append((">> " if i in marked_set else "   ") + lines[i][:400])
        previous = i
    summary = "\n".join(out)
    if len(summary) > max_chars:
        half = max_chars // 2
        summary = summary[:half] + "\n...\n" + summary[-half:]
    return summary


def _last_lines(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _explain(headline: str, log: str) -> str:
    summary = summarize_log(log)
    return f"{headline}\n{summary}" if summary else headline


# -- project inspection --------------------------------------------------------------------------


def read_package_json(workspace: Path) -> dict[str, Any]:
    """package.json as a dict; ValueError with a message for the coder when it is not valid."""
    try:
        data = json.loads((workspace / "package.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"package.json is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("package.json must contain a JSON object")
    return data


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
    for lockfile in LOCKFILES:
        path = workspace / lockfile
        payload[lockfile] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    # Native and platform-specific packages (esbuild, rollup) differ per platform and Node.
    payload["platform"] = f"{sys.platform}-{platform.machine()}-{_node_version()}"
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _has_dependencies(package: dict[str, Any]) -> bool:
    return any(package.get(name) for name in ("dependencies", "devDependencies", "optionalDependencies"))


def is_config_path(rel_path: str) -> bool:
    """Root-level files whose change needs a dev-server restart (index.html is not one: vite serves it fresh)."""
    rel_path = rel_path.replace("\\", "/")
    rel_path = rel_path[2:] if rel_path.startswith("./") else rel_path
    return "/" not in rel_path and any(fnmatch.fnmatchcase(rel_path, pattern) for pattern in CONFIG_PATTERNS)


def config_fingerprint(workspace: Path) -> str:
    """Hash of the root-level config files, to notice changes nobody reported (shell actions)."""
    digest = hashlib.sha256()
    for path in sorted(workspace.iterdir()):
        if path.is_file() and is_config_path(path.name):
            digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _start_script(package: dict[str, Any]) -> tuple[str, str] | None:
    """(name, command) of the script that starts the site: dev, then start, then serve."""
    scripts = package.get("scripts") or {}
    for name in ("dev", "start", "serve"):
        script = scripts.get(name) if isinstance(scripts, dict) else None
        if isinstance(script, str) and script.strip():
            return name, script
    return None


def runs_vite(package: dict[str, Any]) -> bool:
    script = _start_script(package)
    return script is not None and re.search(r"\bvite\b", script[1]) is not None


def start_command(
    package: dict[str, Any], port: int, workspace: Path | None = None
) -> tuple[list[str], dict[str, str]] | None:
    """``npm run dev`` (then start, serve) with the port passed the way common tools honour it.

    With ``workspace``, a plain ``vite [flags]`` script runs vite itself (see ``_direct_vite``).
    """
    script = _start_script(package)
    if script is None:
        return None
    env = {"PORT": str(port), "HOST": "127.0.0.1"}
    if not runs_vite(package):
        return ["npm", "run", script[0]], env
    flags = ["--port", str(port), "--host", "127.0.0.1", "--strictPort"]  # vite keeps the last ones given
    if workspace is not None and (direct := _direct_vite(package, *script, workspace)) is not None:
        bin_dir = str(workspace / "node_modules" / ".bin")  # as npm run puts it first on PATH
        return [*direct, *flags], {**env, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return ["npm", "run", script[0], "--", *flags], env


_PLAIN_VITE = re.compile(r"^\s*vite(?:\s+[\w@:./=-]+)*\s*$")


def _direct_vite(package: dict[str, Any], name: str, command: str, workspace: Path) -> list[str] | None:
    """``node_modules/.bin/vite [flags]`` for a script that is only that, with no ``pre`` script.

    What ``npm run`` would do, minus the npm process that stays between us and vite for the
    server's whole life (~55 MB per dev server, and ~0.3 s per start).
    """
    scripts = package.get("scripts") or {}
    binary = workspace / "node_modules" / ".bin" / "vite"
    if not _PLAIN_VITE.match(command) or f"pre{name}" in scripts or not binary.exists():
        return None
    return [str(binary), *command.split()[1:]]


def vite_module_path(rel_path: str) -> str | None:
    """The URL path under which vite serves a workspace file as a cached module, or None.

    JSON is a module only when imported (``?import``); ``public/`` files are served raw from disk.
    """
    rel = rel_path.replace("\\", "/").removeprefix("./")
    if not rel.endswith(_VITE_MODULE_SUFFIXES) or rel.startswith(("public/", "node_modules/")):
        return None
    return "/" + quote(rel) + ("?import" if rel.endswith(".json") else "")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _printed_urls(log: str) -> list[str]:
    """Local URLs a server announced (vite: ``Local: http://127.0.0.1:5173/``), normalised for polling.

    Only lines that announce a server count: an error such as "could not proxy to
    http://localhost:8080" must not send us to some other service.
    """
    urls: list[str] = []
    announced = [line for line in strip_ansi(log).split("\n") if _ANNOUNCE.search(_LOCAL_URL.sub(" ", line))]
    for match in _LOCAL_URL.findall("\n".join(announced)):
        url = match.rstrip(".,;)")
        for host in ("0.0.0.0", "[::]", "[::1]"):
            url = url.replace(f"//{host}:", "//127.0.0.1:")
        candidates = [url, url.replace("//localhost:", "//127.0.0.1:")] if "//localhost:" in url else [url]
        urls.extend(u for u in candidates if u not in urls)
    return urls


# -- dependency cache ----------------------------------------------------------------------------


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


# -- the runner ----------------------------------------------------------------------------------


class InstallResult(BaseModel):
    """What ``SiteRunner.ensure_dependencies`` did."""

    ran: bool = False
    cached: bool = False
    error: str | None = None
    log_tail: str = ""
    seconds: float = 0.0


class SiteRunner:
    """Keeps one workspace's site running across steps; installs and restarts only when needed."""

    def __init__(
        self,
        workspace: Path,
        *,
        registry: ProcessRegistry | None = None,
        install_timeout_s: float = 300.0,
        start_timeout_s: float = 60.0,
        log_dir: Path,
        deps_cache_dir: Path | None = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self.registry = registry
        self.install_timeout_s = install_timeout_s
        self.start_timeout_s = start_timeout_s
        self.log_dir = Path(log_dir)
        self.cache = DepsCache(deps_cache_dir) if deps_cache_dir is not None else None
        self._server: ManagedProcess | None = None
        self._kind: Kind | None = None
        self._vite = False
        self._compiled: set[str] = set()  # module URL paths vite compiled for our pages (so caches)
        self._url: str | None = None
        self._config: str | None = None
        self._serial = 0
        self._lock: asyncio.Lock | None = None

    @property
    def url(self) -> str | None:
        return self._url if self._server is not None and self._server.alive else None

    @property
    def server(self) -> ManagedProcess | None:
        return self._server

    def _log_path(self, what: str) -> Path:
        self._serial += 1
        return self.log_dir / f"{what}-{self._serial:03d}.log"

    def note_page(self, loaded: Iterable[str], failed: Iterable[str] = ()) -> None:
        """Record the module URL paths a captured page loaded (vite compiled and caches them) or failed on.

        Only these are checked for freshness: asking vite for any other file would compile it, and
        a compile error with no page connected is kept by vite and shown to the next page that
        connects, as if that page were broken.
        """
        self._compiled |= set(loaded)
        self._compiled -= set(failed)

    async def served_modules(self, paths: Iterable[str]) -> dict[str, ServedModule]:
        """What the running vite server serves now for ``paths``; call it before writing them.

        Give the result to ``ensure_running`` after the edit: a kept server is then used only once
        it serves every changed module as it is on disk, so no stale page is ever captured. Covers
        the modules our pages loaded (``note_page``): vite compiles a module on its first request,
        so no other can be stale. Empty when no vite server runs (a static server reads files on
        every request; a new server has no cache).
        """
        url = self.url
        if not self._vite or url is None:
            return {}
        wanted = [p for p in paths if vite_module_path(p) in self._compiled and (self.workspace / p).is_file()]
        if not wanted:
            return {}
        async with httpx.AsyncClient(verify=False, trust_env=False) as client:
            answers = await asyncio.gather(*(_fetch_module(client, url, p) for p in wanted))
        served = {}
        for path, answer in zip(wanted, answers):
            if answer is None:
                # No answer in time (a busy machine): still checked after the edit. A script must
                # then serve exactly the file on disk; a stylesheet or JSON file, any answer at all.
                served[path] = ServedModule(digest="", embeds_source=not path.endswith(_UNMAPPED_SUFFIXES))
            elif answer.is_module:
                disk = _read_text(self.workspace / path)
                served[path] = ServedModule(digest=answer.digest, embeds_source=answer.source == disk)
        return served

    async def ensure_running(
        self, changed_paths: set[str] | None = None, *, served_before: dict[str, ServedModule] | None = None
    ) -> ExecutionResult:
        """Install if dependencies changed, start or reuse the server, and wait for it to answer.

        A kept vite server must first serve every changed module as it is on disk (checked against
        ``served_before`` from ``served_modules``); one that still serves an old module after a
        short cap is restarted.
        """
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await self._ensure_running(changed_paths, served_before or {})

    async def _ensure_running(
        self, changed_paths: set[str] | None, served_before: dict[str, ServedModule]
    ) -> ExecutionResult:
        ws = self.workspace
        if (ws / "package.json").is_file():
            kind: Kind = "npm"
        elif (ws / "index.html").is_file():
            kind = "static"
        else:
            await self.stop()
            return ExecutionResult(
                ok=False,
                stage="start",
                error="The project has no package.json or index.html at its root, so there is nothing to run.",
            )

        install = InstallResult()
        package: dict[str, Any] = {}
        if kind == "npm":
            try:
                package = read_package_json(ws)
            except ValueError as exc:
                await self.stop()
                return ExecutionResult(ok=False, stage="install", kind=kind, error=str(exc))
            install = await self._install_if_needed(package)
            if install.error:
                return ExecutionResult(
                    ok=False,
                    stage="install",
                    kind=kind,
                    error=install.error,
                    install_ran=install.ran,
                    install_s=install.seconds,
                    log_tail=install.log_tail,
                )
            if start_command(package, 0) is None:
                if not (ws / "index.html").is_file():
                    await self.stop()
                    return ExecutionResult(
                        ok=False,
                        stage="start",
                        kind=kind,
                        install_ran=install.ran,
                        install_cached=install.cached,
                        install_s=install.seconds,
                        error='package.json has no "dev", "start" or "serve" script and there is no index.html to serve.',
                    )
                kind = "static"  # dependencies only (e.g. for a CDN-less static page): serve the files

        base = dict(kind=kind, install_ran=install.ran, install_cached=install.cached, install_s=install.seconds)
        config = config_fingerprint(ws) if kind == "npm" else None
        stale_restart = False
        if await self._can_reuse(kind, config, changed_paths, install.ran):
            assert self._server is not None and self._url is not None
            changed = set(served_before) if changed_paths is None else changed_paths
            started = time.monotonic()
            stale = await self._await_fresh(self._url, changed, served_before) if self._vite else []
            fresh_s = round(time.monotonic() - started, 3)
            if not stale:
                return ExecutionResult(
                    ok=True, stage="ok", url=self._url, server_pid=self._server.pid, fresh_s=fresh_s, **base
                )
            stale_restart = True  # a restarted vite reads every module from disk

        await self.stop()
        started = time.monotonic()
        result = await self._start(kind, package, config)
        start_s = round(time.monotonic() - started, 3)
        return ExecutionResult(**base, **result, start_s=start_s, server_restarted=True, stale_restart=stale_restart)

    async def _await_fresh(self, url: str, changed: set[str], served_before: dict[str, ServedModule]) -> list[str]:
        """Poll until the server serves every changed module as it is on disk; the ones it never did.

        Polling, not a fixed wait: the usual case returns after one or two requests.
        """
        pending = {p for p in changed & served_before.keys() if (self.workspace / p).is_file()}
        started = time.monotonic()
        nudged = False
        async with httpx.AsyncClient(verify=False, trust_env=False) as client:
            while pending:
                paths = sorted(pending)
                answers = await asyncio.gather(*(_fetch_module(client, url, p) for p in paths))
                for path, answer in zip(paths, answers):
                    if answer is not None and self._serves_disk(path, answer, served_before[path]):
                        pending.discard(path)
                elapsed = time.monotonic() - started
                if not pending or elapsed >= _FRESH_CAP_S:
                    break
                if not nudged and elapsed >= _FRESH_NUDGE_S:
                    nudged = True
                    for path in pending:
                        with contextlib.suppress(OSError):
                            os.utime(self.workspace / path)
                await asyncio.sleep(_FRESH_POLL_S)
        return sorted(pending)

    def _serves_disk(self, rel_path: str, answer: _ModuleAnswer, before: ServedModule) -> bool:
        """Whether ``answer`` was compiled from the file as it is on disk now (as far as can be told)."""
        if not answer.is_module:
            return True  # a failed compile is retried from disk on every request: nothing is cached
        if answer.source is not None and answer.source == _read_text(self.workspace / rel_path):
            return True  # exact: the module's source map carries the text it was compiled from
        if before.embeds_source:
            return False  # this module says what it was compiled from, and that is not the file
        return answer.digest != before.digest  # no exact check (e.g. CSS): a new answer means a recompile

    # -- install -------------------------------------------------------------------------------
    async def ensure_dependencies(self) -> InstallResult:
        """Install (or restore from the cache) node_modules if package.json's dependencies changed."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            try:
                package = read_package_json(self.workspace)
            except (OSError, ValueError) as exc:
                return InstallResult(error=str(exc))
            return await self._install_if_needed(package)

    async def _install_if_needed(self, package: dict[str, Any]) -> InstallResult:
        ws = self.workspace
        try:
            key = dependency_key(ws)
        except ValueError as exc:
            return InstallResult(error=str(exc))
        node_modules_ok = (ws / "node_modules").is_dir() or not _has_dependencies(package)
        if key in _read_marker(ws) and node_modules_ok:
            return InstallResult()
        # Never reinstall under a running dev server, and never leave a stale marker if we fail.
        await self.stop()
        (ws / DEPS_MARKER).unlink(missing_ok=True)
        started = time.monotonic()
        if self.cache is not None and await asyncio.to_thread(self.cache.restore, key, ws):
            self._write_marker([key, dependency_key(ws)])
            return InstallResult(ran=True, cached=True, seconds=round(time.monotonic() - started, 3))

        result = await self._npm_install([])
        # Peer-dependency conflicts are the usual cause; retried in upstream WebGen-Bench's order.
        for retry in INSTALL_RETRIES:
            if result.ok or result.timed_out:
                break
            result = await self._npm_install([retry])
        seconds = round(time.monotonic() - started, 3)
        if not result.ok:
            if result.timed_out:
                headline = f"`npm install` did not finish within {self.install_timeout_s:g} s and was stopped."
            else:
                headline = (
                    f"`npm install` failed (exit code {result.exit_code}), also when retried with "
                    f"{' and then '.join(INSTALL_RETRIES)}. Check the package names and versions in package.json."
                )
            return InstallResult(
                ran=True,
                error=_explain(headline, result.output_tail),
                log_tail=_last_lines(result.output_tail),
                seconds=seconds,
            )
        keys = [key, dependency_key(ws)]  # npm may have written a lockfile: both keys describe this tree
        self._write_marker(keys)
        if self.cache is not None:
            await asyncio.to_thread(self.cache.store, keys, ws)
        return InstallResult(ran=True, seconds=seconds, log_tail=_last_lines(result.output_tail))

    async def _npm_install(self, extra: list[str]) -> CommandResult:
        return await run_command(
            [*NPM_INSTALL, *extra],
            cwd=self.workspace,
            timeout_s=self.install_timeout_s,
            log_path=self._log_path("install"),
            registry=self.registry,
            tail_lines=200,
        )

    def _write_marker(self, keys: list[str]) -> None:
        (self.workspace / DEPS_MARKER).write_text(json.dumps(sorted(set(keys))))

    # -- start ---------------------------------------------------------------------------------
    async def _can_reuse(self, kind: Kind, config: str | None, changed: set[str] | None, installed: bool) -> bool:
        server = self._server
        if server is None or not server.alive or self._url is None or kind != self._kind or installed:
            return False
        if kind == "npm":
            if config != self._config or any(is_config_path(p) for p in changed or ()):
                return False
        return await _answers(self._url, timeout_s=5.0) is True

    async def _start(self, kind: Kind, package: dict[str, Any], config: str | None) -> dict[str, Any]:
        port = free_port()
        if kind == "static":
            argv = [
                sys.executable,
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                str(port),
                "--directory",
                str(self.workspace),
            ]
            extra: dict[str, str] = {}
        else:
            command = start_command(package, port, self.workspace)
            assert command is not None
            argv, extra = command
        log_path = self._log_path("server")
        try:
            server = ManagedProcess.start(
                argv, cwd=self.workspace, log_path=log_path, env=scrubbed_env(extra), registry=self.registry
            )
        except OSError as exc:
            return {"ok": False, "stage": "start", "error": f"Could not start `{' '.join(argv)}`: {exc}"}
        self._server, self._kind, self._config = server, kind, config
        self._vite = kind == "npm" and runs_vite(package)
        self._compiled = set()
        script = _start_script(package)
        shown = f"npm run {script[0]}" if kind == "npm" and script else "the static file server"
        url, stage, error = await self._wait_http(server, port, shown)
        tail = server.log_tail(40)
        if url is None:
            await self.stop()
            return {"ok": False, "stage": stage, "error": error, "log_tail": tail}
        self._url = url
        return {"ok": True, "stage": "ok", "url": url, "server_pid": server.pid, "log_tail": tail}

    async def _wait_http(self, server: ManagedProcess, port: int, shown: str) -> tuple[str | None, Stage, str | None]:
        """Poll every ~100 ms until some candidate URL answers 200-399, the server dies, or the deadline."""
        deadline = time.monotonic() + self.start_timeout_s
        own = f"http://127.0.0.1:{port}/"
        bad: tuple[str, int] | None = None
        bad_since: float | None = None
        async with httpx.AsyncClient(verify=False, follow_redirects=False, trust_env=False) as client:
            while True:
                log = read_tail(server.log_path, lines=200)
                for url in [own, *(u for u in _printed_urls(log) if f":{port}/" not in u)]:
                    remaining = deadline - time.monotonic()
                    status = await _answers(url, timeout_s=max(0.5, min(10.0, remaining)), client=client)
                    if status is True:
                        return url, "ok", None
                    if isinstance(status, int):
                        bad = (url, status)
                        bad_since = bad_since or time.monotonic()
                if not server.alive:
                    code = server.returncode
                    log = read_tail(server.log_path, lines=400)
                    return (
                        None,
                        "start",
                        _explain(f"`{shown}` exited with code {code} before the site answered HTTP.", log),
                    )
                now = time.monotonic()
                if bad is not None and bad_since is not None and now - bad_since >= _BAD_STATUS_GRACE_S:
                    return (
                        None,
                        "http",
                        _explain(
                            f"The server runs but {bad[0]} answers HTTP {bad[1]} instead of a page "
                            "(is index.html missing, or is the entry path wrong?).",
                            read_tail(server.log_path, lines=400),
                        ),
                    )
                if now >= deadline:
                    headline = (
                        f"The server runs but {bad[0]} answered HTTP {bad[1]} until the {self.start_timeout_s:g} s deadline."
                        if bad
                        else f"`{shown}` did not answer HTTP on port {port} within {self.start_timeout_s:g} s "
                        "(it must listen on the PORT it is given, e.g. vite --port)."
                    )
                    return None, "http" if bad else "start", _explain(headline, read_tail(server.log_path, lines=400))
                await asyncio.sleep(min(_POLL_S, max(0.0, deadline - now)))

    async def stop(self) -> None:
        """Kill the server's whole process group (safe to call when nothing runs)."""
        server, self._server, self._url = self._server, None, None
        if server is not None:
            await server.stop()


async def _answers(url: str, *, timeout_s: float, client: httpx.AsyncClient | None = None) -> bool | int | None:
    """True for HTTP 200-399, the status for other answers, None when nothing answered."""
    timeout = httpx.Timeout(timeout_s, connect=min(1.0, timeout_s))
    try:
        if client is None:
            async with httpx.AsyncClient(verify=False, follow_redirects=False, trust_env=False) as own:
                response = await own.get(url, timeout=timeout)
        else:
            response = await client.get(url, timeout=timeout)
    except httpx.HTTPError:
        return None
    return True if 200 <= response.status_code < 400 else response.status_code


class _ModuleAnswer(BaseModel):
    is_module: bool = Field(description="HTTP 200 with JavaScript: a module vite compiled (and caches).")
    digest: str = Field(description="sha256 of status and body.")
    source: str | None = Field(default=None, description="The text it was compiled from, per its inline source map.")


async def _fetch_module(client: httpx.AsyncClient, base_url: str, rel_path: str) -> _ModuleAnswer | None:
    """What the vite server at ``base_url`` answers for a source file; None when it did not answer."""
    module_path = vite_module_path(rel_path)
    if module_path is None:
        return None
    try:
        response = await client.get(base_url.rstrip("/") + module_path, timeout=httpx.Timeout(5.0, connect=1.0))
    except httpx.HTTPError:
        return None
    digest = hashlib.sha256(str(response.status_code).encode() + b"\0" + response.content).hexdigest()
    is_module = response.status_code == 200 and "javascript" in response.headers.get("content-type", "")
    source = _embedded_source(response.text, rel_path) if is_module else None
    return _ModuleAnswer(is_module=is_module, digest=digest, source=source)


def _embedded_source(body: str, rel_path: str) -> str | None:
    """The source text a vite module's inline source map carries for ``rel_path``, if it does."""
    match = _INLINE_MAP.search(body[-200_000:])
    if match is None:
        return None
    try:
        source_map = json.loads(base64.b64decode(match.group(1)))
        sources, contents = source_map.get("sources") or [], source_map.get("sourcesContent") or []
    except (ValueError, AttributeError):
        return None
    name = rel_path.rsplit("/", 1)[-1]
    for source, content in zip(sources, contents):
        if isinstance(source, str) and source.rsplit("/", 1)[-1] == name and isinstance(content, str):
            return content.removeprefix("\ufeff")
    return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError):
        return None


async def run_shell(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    registry: ProcessRegistry | None = None,
    log_path: Path | None = None,
) -> CommandResult:
    """Run a model-written shell action in the workspace with the scrubbed environment.

    ``bash -c`` rather than ``bash -lc``: a login shell reads /etc/profile and ~/.profile, which
    could export again the secrets the scrubbed environment removed (and reset PATH).
    """
    return await run_command(
        ["bash", "-c", command], cwd=cwd, timeout_s=timeout_s, env=scrubbed_env(), log_path=log_path, registry=registry
    )
