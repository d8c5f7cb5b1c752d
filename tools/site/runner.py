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
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from webgen_agent.core.profiles.rules import NO_PACKAGE_JSON
from webgen_agent.tools.limits import WorkspaceGuard
from webgen_agent.tools.npm_cache import AGENT_NPM_CACHE, private_npm_cache
from webgen_agent.tools.process import (
    CommandResult,
    ManagedProcess,
    ProcessRegistry,
    scrubbed_env,
    size_guard,
)
from webgen_agent.tools.sandbox import Confinement, SandboxSettings, own_copies, size_problem, workspace_confinement
from webgen_agent.tools.site.depcache import DepsCache
from webgen_agent.tools.site.deps import (
    INSTALL_RETRIES,
    InstallResult,
    dependency_key,
    install_dependencies,
    is_installed,
)
from webgen_agent.tools.site.freshness import ServedModule, await_fresh, served_modules
from webgen_agent.tools.site.http_wait import Stage, answers, own_url, wait_http
from webgen_agent.tools.site.memory import memory_death
from webgen_agent.tools.site.project import (
    config_fingerprint,
    free_port,
    is_config_path,
    read_package_json,
    runs_vite,
    start_command,
    start_script,
)
from webgen_agent.tools.site.reinstall import install_again
from webgen_agent.tools.site.shell import run_shell

Kind = Literal["npm", "static"]


class ExecutionResult(BaseModel):
    """Outcome of ``SiteRunner.ensure_running``.

    Stages: ``install`` (package.json unreadable, npm failed or timed out, or the install took the
    workspace over the sandbox's size cap), ``start`` (nothing to run, the server exited, it never
    accepted a connection before the deadline, or the workspace is over the size cap), ``http`` (it
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
    server_log: str | None = Field(default=None, description="The log file of the server this call started.")
    install_log: str = Field(default="", description="npm install's output (capped), when npm ran.")


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
        sandbox: SandboxSettings | None = None,
        install_retries: tuple[str, ...] = INSTALL_RETRIES,
        quiet_install: bool = True,
        static_sites: bool = True,
        fresh_each_step: bool = False,
        serve_failures: bool = False,
    ) -> None:
        """``install_retries``: the flags a failed install is retried with, in order; ``quiet_install``:
        npm prints errors only (else its warnings too); ``static_sites``: serve a project with an
        index.html and no package.json (else it fails at the install stage); ``fresh_each_step``:
        every call runs `npm install` and starts the server anew, so each has its own install output
        and start log (WebGen-Agent's every step); ``serve_failures``: a server that runs but answers
        only 4xx/5xx, or not at all by the start deadline, is kept and its URL returned with the
        failure, for the page to be captured as it is."""
        self.workspace = Path(workspace).resolve()
        self.install_retries = install_retries
        self.quiet_install = quiet_install
        self.static_sites = static_sites
        self.fresh_each_step = fresh_each_step
        self.serve_failures = serve_failures
        # On unless switched off: ``None`` means the default settings.
        settings = sandbox if sandbox is not None else SandboxSettings()
        self.sandbox = settings if settings.enabled else None
        self.registry = registry
        self.install_timeout_s = install_timeout_s
        self.start_timeout_s = start_timeout_s
        self.log_dir = Path(log_dir)
        self.cache = DepsCache(deps_cache_dir) if deps_cache_dir is not None else None
        # The agent's own npm cache (never the user's ~/.npm): sandboxes get private copies of it.
        self.npm_cache = Path(deps_cache_dir) / AGENT_NPM_CACHE if deps_cache_dir is not None else None
        self._server: ManagedProcess | None = None
        self._server_guard: WorkspaceGuard | None = None
        self._kind: Kind | None = None
        self._vite = False
        self._compiled: set[str] = set()  # module URL paths vite compiled for our pages (so caches)
        self._url: str | None = None
        self._config: str | None = None
        self._serial = 0
        self._lock: asyncio.Lock | None = None
        self._memory_told: int | None = None  # the server whose memory death was already told
        self._memory_note: str | None = None  # a kept server's memory death found by a later call, untold

    @property
    def url(self) -> str | None:
        return self._url if self._server is not None and self._server.alive else None

    @property
    def server(self) -> ManagedProcess | None:
        return self._server

    def memory_death(self) -> str | None:
        """Why the site's server died of a memory limit, told once per server; None when it did not."""
        server = self._server
        if server is None or server.pid == self._memory_told:
            return None
        if (why := memory_death(server, self.sandbox)) is not None:
            self._memory_told = server.pid
        return why

    def take_memory_note(self) -> str | None:
        """Once: that a server kept from an earlier step died of a memory limit since (it was started again).

        Held until the step that tells the coder takes it, whichever call (an edit's, a GUI test's) found it.
        """
        note, self._memory_note = self._memory_note, None
        return note

    def confinement(self, purpose: Literal["install", "server", "shell"]) -> Confinement | None:
        """The sandbox for one command in this workspace; None when generated code runs unconfined."""
        if self.sandbox is None:
            return None
        # The run's folder around the workspace (logs, other state) is hidden too.
        return workspace_confinement(self.workspace, self.sandbox, purpose, hide=(self.workspace.parent, self.log_dir))

    def size_problem(self) -> str | None:
        """A message when the workspace is over the sandbox's size cap (None when unconfined)."""
        return size_problem(self.workspace, self.sandbox) if self.sandbox is not None else None

    async def shell(self, command: str, *, timeout_s: float, log_path: Path | None = None) -> CommandResult:
        """Run a model-written shell action in this workspace (sandboxed unless the sandbox is off)."""
        if self.sandbox is not None and (self.workspace / "node_modules").is_dir():
            await asyncio.to_thread(own_copies, self.workspace / "node_modules")
        confined = await asyncio.to_thread(self.confinement, "shell")
        async with private_npm_cache(confined, self.npm_cache) as sandbox:
            return await run_shell(
                command,
                cwd=self.workspace,
                timeout_s=timeout_s,
                registry=self.registry,
                log_path=log_path,
                sandbox=sandbox,
            )

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
        return await served_modules(url, self.workspace, paths, self._compiled)

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
            # A server kept from an earlier step that a memory limit killed since (during the capture
            # or a GUI test): the site's error, told with this step's result.
            lost = await asyncio.to_thread(self.memory_death)
            result = await self._ensure_running(changed_paths, served_before or {})
            if lost is not None:
                self._memory_note = f"After the last step's run: {lost} It was started again for this step."
            # After the install, the start and whatever a kept server wrote since the last step: the
            # cap holds for all of them, not only for shell actions (a walk of a typical Vite
            # project, node_modules included, takes tens of milliseconds). A start that failed
            # over the cap failed because of it (the guard kills a server past the cap); an
            # install's own error already says what stopped it.
            failed_install = not result.ok and result.stage == "install"
            if not failed_install and (too_big := await asyncio.to_thread(self.size_problem)):
                await self.stop()
                stage: Stage = "install" if result.install_ran and not result.install_cached else "start"
                return result.model_copy(
                    update={"ok": False, "stage": stage, "url": None, "server_pid": None, "error": too_big}
                )
            return result

    async def _ensure_running(
        self, changed_paths: set[str] | None, served_before: dict[str, ServedModule]
    ) -> ExecutionResult:
        ws = self.workspace
        if (ws / "package.json").is_file():
            kind: Kind = "npm"
        elif not self.static_sites:
            await self.stop()
            return ExecutionResult(
                ok=False,
                stage="install",
                error=NO_PACKAGE_JSON,
                install_log=NO_PACKAGE_JSON,
            )
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
            if self.fresh_each_step and not install.error and (not install.ran or install.cached):
                await self.stop()  # never reinstall under a running dev server
                install = await install_again(
                    ws,
                    install,
                    timeout_s=self.install_timeout_s,
                    log_path=self._log_path("install"),
                    registry=self.registry,
                    sandbox=await asyncio.to_thread(self.confinement, "install"),
                    npm_cache=self.npm_cache,
                    quiet=self.quiet_install,
                )
            if install.error:
                return ExecutionResult(
                    ok=False,
                    stage="install",
                    kind=kind,
                    error=install.error,
                    install_ran=install.ran,
                    install_s=install.seconds,
                    log_tail=install.log_tail,
                    install_log=install.output or install.log_tail,
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
                        install_log=install.output or install.log_tail,
                        error='package.json has no "dev", "start" or "serve" script and there is no index.html to serve.',
                    )
                kind = "static"  # dependencies only (e.g. for a CDN-less static page): serve the files

        base: dict[str, Any] = dict(
            kind=kind,
            install_ran=install.ran,
            install_cached=install.cached,
            install_s=install.seconds,
            install_log=install.output or install.log_tail,
        )
        config = config_fingerprint(ws) if kind == "npm" else None
        stale_restart = False
        if await self._can_reuse(kind, config, changed_paths, install.ran):
            assert self._server is not None and self._url is not None
            changed = set(served_before) if changed_paths is None else changed_paths
            started = time.monotonic()
            stale = await await_fresh(self._url, ws, changed, served_before) if self._vite else []
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
        try:
            key = await asyncio.to_thread(dependency_key, self.workspace)  # reads files, asks node its version
        except ValueError as exc:
            return InstallResult(error=str(exc))
        if await asyncio.to_thread(is_installed, self.workspace, key, package):
            return InstallResult()
        await self.stop()  # never reinstall under a running dev server
        confined = await asyncio.to_thread(self.confinement, "install")
        return await install_dependencies(
            self.workspace,
            key,
            cache=self.cache,
            timeout_s=self.install_timeout_s,
            registry=self.registry,
            log_path=lambda: self._log_path("install"),
            sandbox=confined,
            scripts_log_path=lambda: self._log_path("scripts"),
            npm_cache=self.npm_cache,
            retries=self.install_retries,
            quiet=self.quiet_install,
        )

    # -- start ---------------------------------------------------------------------------------
    async def _can_reuse(self, kind: Kind, config: str | None, changed: set[str] | None, installed: bool) -> bool:
        server = self._server
        if server is None or not server.alive or self._url is None or kind != self._kind or installed:
            return False
        if self.fresh_each_step:
            return False
        if kind == "npm":
            if config != self._config or any(is_config_path(p) for p in changed or ()):
                return False
        return await answers(self._url, timeout_s=5.0) is True

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
        confined = await asyncio.to_thread(self.confinement, "server")
        try:
            server = await ManagedProcess.astart(
                argv,
                cwd=self.workspace,
                log_path=log_path,
                env=scrubbed_env(extra),
                registry=self.registry,
                sandbox=confined,
            )
        except OSError as exc:
            return {"ok": False, "stage": "start", "error": f"Could not start `{' '.join(argv)}`: {exc}"}
        # Killed while it runs if it fills the workspace; the size check after the step says why.
        self._server_guard = size_guard(confined, server.pgid)
        self._server, self._kind, self._config = server, kind, config
        self._vite = kind == "npm" and runs_vite(package)
        self._compiled = set()
        script = start_script(package)
        shown = f"npm run {script[0]}" if kind == "npm" and script else "the static file server"
        url, stage, error = await wait_http(server, port, shown, timeout_s=self.start_timeout_s)
        logs = {"log_tail": server.log_tail(40), "server_log": str(log_path)}  # every outcome reports both
        if url is None and self.serve_failures and server.alive:
            # Served as it is: what answers there (an error page, or nothing) is captured and graded.
            self._url = own_url(server, port)
            return {"ok": False, "stage": stage, "error": error, "url": self._url, "server_pid": server.pid, **logs}
        if url is None and (died := await asyncio.to_thread(self.memory_death)) is not None:
            error = f"{died}\n{error}"
        if url is None:
            await self.stop()
            return {"ok": False, "stage": stage, "error": error, **logs}
        self._url = url
        return {"ok": True, "stage": "ok", "url": url, "server_pid": server.pid, **logs}

    async def stop(self) -> None:
        """Kill the server's whole process group (safe to call when nothing runs)."""
        server, self._server, self._url = self._server, None, None
        guard, self._server_guard = self._server_guard, None
        if guard is not None:
            await asyncio.to_thread(guard.stop)
        if server is not None:
            await server.stop()
