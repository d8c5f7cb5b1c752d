"""Live objects a run uses (blob store, shared Chromium, dev servers, process registry).

They cannot travel in state or in the JSON context, so a host binds them for the duration of its
runs with ``use_resources``; nodes read them with ``get_resources()``. LangGraph copies the
caller's contextvars into node tasks, so concurrent runs in one process may each bind their own.
When nothing is bound (the LangGraph dev server / Studio), one set per process is created from the
environment on first use and closed by the server's shutdown (``close_default_resources``, from
the lifespan in ``graph/studio.py``), else at interpreter exit; a watchdog process kills what is
left if the process dies without either (kill -9).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from pathlib import Path

from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.context import AgentContext, Settings, find_chromium
from webgen_agent.nodes.local_dirs import deps_cache_for, registry_for
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.gui_agent import GuiSession, open_gui_session
from webgen_agent.tools.site import SiteRunner

logger = logging.getLogger(__name__)


class Resources:
    """One blob store, one Chromium, one SiteRunner per workspace, one process registry."""

    def __init__(
        self,
        db_path: str | Path | Database,
        *,
        chromium: str = "",
        deps_cache_dir: Path | None = None,
        browser: SharedBrowser | None = None,
    ) -> None:
        """``browser``: a started Chromium its owner keeps (the test suite shares one); else one is
        launched on first use and closed by ``close``."""
        self.database = Database.of(db_path)
        self.store = BlobStore(self.database)
        self.chromium = chromium
        self.registry = registry_for(self.database)
        self.registry.register_atexit()
        # Installs are shared by dependency manifest across runs and workspaces (WEBGEN_DEPS_CACHE).
        self.deps_cache_dir = deps_cache_dir or deps_cache_for(self.database)
        self._browser: SharedBrowser | None = browser
        self._owns_browser = browser is None
        self._browser_lock = asyncio.Lock()
        self._warming: asyncio.Task[SharedBrowser] | None = None
        self._sites: dict[Path, SiteRunner] = {}
        # GUI-agent sessions opened ahead (while the screenshot is graded), by run: (step, task of
        # the session and the browser's launch count it was opened on).
        self._gui_sessions: dict[str, tuple[int, asyncio.Task[tuple[int, GuiSession]]]] = {}
        self._dropping: set[asyncio.Task[None]] = set()  # sessions nobody took, closing in the background

    @staticmethod
    def reap_orphans(db_path: str | Path | Database) -> list[int]:
        """Kill servers and browsers left running by agent processes that died (kill -9, reboot)."""
        return registry_for(db_path).reap()

    async def browser(self, context: AgentContext) -> SharedBrowser:
        """The shared Chromium, started: relaunched if it died, or once another run's relaunch is done."""
        async with self._browser_lock:
            if self._browser is None:
                chromium = await asyncio.to_thread(find_chromium, context.chromium or self.chromium)
                self._browser = SharedBrowser(chromium, registry=self.registry)
        return await self._browser.start()

    def warm_browser(self, context: AgentContext) -> None:
        """Launch Chromium in the background (while the first coder call runs), not at the first
        capture, and open the first capture's page there (a context and its renderer, 0.1-0.2 s).

        A launch failure is reported by the ``browser()`` call that needs it, not here.
        """
        if self._warming is None or self._warming.done():
            self._warming = asyncio.create_task(self._warm(context))
            self._warming.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def _warm(self, context: AgentContext) -> SharedBrowser:
        browser = await self.browser(context)
        browser.open_spare((context.viewport_width, context.viewport_height))
        return browser

    def prepare_gui_session(self, run_id: str, step: int, url: str, context: AgentContext) -> None:
        """Open the GUI agent's browser session for ``step``'s page in the background.

        Started beside the screenshot grading, so that a GUI test of that step starts at its first
        agent step; replaces (and closes) one opened for an earlier step of the run.
        """
        self.drop_gui_session(run_id)

        async def open_session() -> tuple[int, GuiSession]:
            browser = await self.browser(context)
            launches, cdp_url = browser.launches, browser.ws_url  # no await since start(): never mid-relaunch
            return launches, await open_gui_session(
                url=url,
                cdp_url=cdp_url,
                viewport=(context.viewport_width, context.viewport_height),
                offline=context.offline_pages,
                settle_s=context.rules.profile.gui_settle_after_load_s,  # as the agent's first step settles
                webvoyager_start=context.rules.profile.gui_webvoyager_start,
            )

        task = asyncio.create_task(open_session())
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._gui_sessions[run_id] = (step, task)

    async def take_gui_session(self, run_id: str, step: int) -> GuiSession | None:
        """The session opened for ``step`` of the run, if there is one and it opened on the Chromium
        running now (not one that died since); the caller closes it."""
        held = self._gui_sessions.get(run_id)
        if held is None or held[0] != step:
            self.drop_gui_session(run_id)
            return None
        del self._gui_sessions[run_id]
        opened = await _opened(held[1])
        if opened is None or self._browser is None or not self._browser.died_since(opened[0]):
            return opened[1] if opened is not None else None
        await opened[1].close()  # opened on a Chromium that died since: the GUI test opens its own
        return None

    def drop_gui_session(self, run_id: str) -> None:
        """Close the run's session opened ahead, if any, in the background: a node that drops one
        (a grade too low for a GUI test, a replayed verdict) goes on at once instead of waiting for
        a session still opening to open and close (0.3-0.5 s with a model that answers in 1 s)."""
        held = self._gui_sessions.pop(run_id, None)
        if held is not None:
            closing = asyncio.create_task(_close_when_opened(held[1]))
            self._dropping.add(closing)
            closing.add_done_callback(self._dropping.discard)

    def site(self, workspace: Path, context: AgentContext) -> SiteRunner:
        key = workspace.resolve()
        runner = self._sites.get(key)
        rules = context.rules.profile
        if runner is None:
            runner = SiteRunner(
                key,
                registry=self.registry,
                install_timeout_s=context.install_timeout_s,
                start_timeout_s=context.start_timeout_s,
                log_dir=key.parent / "logs",
                deps_cache_dir=self.deps_cache_dir,
                sandbox=context.sandbox,
                install_retries=rules.install_retries,
                quiet_install=rules.quiet_install,
                static_sites=rules.static_sites,
                fresh_each_step=rules.fresh_run_each_step,
                serve_failures=rules.grade_every_capture,
            )
            self._sites[key] = runner
        return runner

    async def stop_site(self, workspace: Path) -> None:
        runner = self._sites.pop(await asyncio.to_thread(workspace.resolve), None)
        if runner is not None:
            await runner.stop()

    async def close(self) -> None:
        """Stop every server and the browser this process started."""
        for run_id in list(self._gui_sessions):
            self.drop_gui_session(run_id)
        if self._dropping:  # before the browser closes under them
            await asyncio.wait(set(self._dropping))
        for workspace in list(self._sites):
            await self.stop_site(workspace)
        if self._warming is not None:
            await asyncio.wait({self._warming})  # a launch in flight would leave a browser behind
        if self._browser is not None and self._owns_browser:
            await self._browser.close()
        self._browser = None
        await asyncio.to_thread(self.registry.kill_all)
        await asyncio.to_thread(self.store.close)


async def _opened(task: asyncio.Task[tuple[int, GuiSession]]) -> tuple[int, GuiSession] | None:
    """The session the task opened, or None when it failed (the GUI test then opens its own)."""
    await asyncio.wait({task})
    if task.cancelled() or task.exception() is not None:
        return None
    return task.result()


async def _close_when_opened(task: asyncio.Task[tuple[int, GuiSession]]) -> None:
    if (opened := await _opened(task)) is not None:
        try:
            await opened[1].close()
        except Exception as exc:  # nobody waits for it: a failed close is logged, never raised
            logger.debug("closing a GUI session nobody took: %s", exc)


_bound: ContextVar[Resources | None] = ContextVar("webgen_resources", default=None)
_process_default: Resources | None = None
_default_lock = threading.Lock()


@contextlib.asynccontextmanager
async def use_resources(resources: Resources) -> AsyncIterator[Resources]:
    """Bind ``resources`` for the runs started inside the block, and close them at its end."""
    token = _bound.set(resources)
    try:
        yield resources
    finally:
        _bound.reset(token)
        await resources.close()


@contextlib.contextmanager
def bind_resources(resources: Resources) -> Iterator[Resources]:
    """Bind ``resources`` for the runs started inside the block and leave them open (their owner,
    e.g. a Ray actor serving many runs, closes them)."""
    token = _bound.set(resources)
    try:
        yield resources
    finally:
        _bound.reset(token)


def bound_resources() -> Resources | None:
    """The resources a caller bound with ``use_resources`` in this context, if any."""
    return _bound.get()


def get_resources() -> Resources:
    """The bound resources, else the process's default set (created from the environment on first use)."""
    global _process_default
    bound = _bound.get()
    if bound is not None:
        return bound
    with _default_lock:
        if _process_default is None:
            settings = Settings()
            _process_default = Resources(settings.db, chromium=settings.chromium)
        return _process_default


async def resources_ready() -> Resources:
    """``get_resources()`` from async code: creating the default set opens a database, so off the loop."""
    ready = _bound.get() or _process_default
    return ready if ready is not None else await asyncio.to_thread(get_resources)


async def close_default_resources() -> None:
    """Close the process's default set, if one was created (the LangGraph server's shutdown calls this)."""
    global _process_default
    with _default_lock:
        resources, _process_default = _process_default, None
    if resources is not None:
        await resources.close()
