"""One shared Chromium per agent process, and page capture for the executor and the judges.

Chromium is launched by us as a ``ManagedProcess`` (own process group, recorded in the registry so a
hard-killed agent's browser can be reaped). It opens no DevTools port: it speaks DevTools over a
pipe that ``tools/devtools_pipe.py`` serves on a unix socket only the agent's user can open, and
Playwright attaches there. The same ``ws_url`` lets another library (browser-use) drive the very
same browser instead of starting its own, each client confined to a browser context of its own
(``tools/cdp_scope.py``).

Pages are the one way untrusted content reaches the browser, so Chromium runs confined
(``tools/browser_command.py``): in a bubblewrap sandbox of its own that shows the system's programs and its
profile folder only, as an unprivileged user when the agent is root, with Chromium's own sandbox
on. Where bubblewrap cannot run it starts unconfined and ``SharedBrowser.confinement`` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from playwright.async_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from webgen_agent.tools.browser_command import browser_command, browser_user
from webgen_agent.tools.capture import MAX_ITEMS, PageCapture, browser_answers, capture_page
from webgen_agent.tools.devtools_pipe import DevToolsPipe
from webgen_agent.tools.origin import NAVIGATION, NO_LOOPBACK_BYPASS, confine_to_origin
from webgen_agent.tools.page_proxy import PagePolicy, PageProxy, site_of
from webgen_agent.tools.process import ManagedProcess, ProcessRegistry

logger = logging.getLogger(__name__)

_BASH = shutil.which("bash") or "/bin/bash"

T = TypeVar("T")


class BrowserGone(PlaywrightError):
    """Chromium went away under a call (it died, or another caller is relaunching it): a death."""


class SharedBrowser:
    """One headless Chromium per process that captures and GUI agents share; restarts if it died.

    Every capture gets a fresh browser context. The next one is opened in the background when a
    capture ends (a context's first page costs a renderer start, 0.2-0.6 s), so a step's capture
    does not wait for it. GUI agents attach to ``ws_url`` through ``scoped_cdp_endpoint``, each
    confined to a context of its own, and run beside captures and each other.
    """

    def __init__(
        self,
        chromium_path: str,
        *,
        registry: ProcessRegistry | None = None,
        launch_timeout_s: float = 30.0,
        max_captures: int = 2,
    ) -> None:
        self.chromium_path = chromium_path
        # Each capture in flight holds a renderer (~100 MB); more at once than cores only queue for CPU.
        self.max_captures = max_captures
        self.registry = registry
        self.launch_timeout_s = launch_timeout_s
        self._process: ManagedProcess | None = None
        self._profile: Path | None = None
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._pipe: DevToolsPipe | None = None
        self.confinement = ""  # one line: how Chromium is confined (set at launch)
        self._lock: asyncio.Lock | None = None
        self._capture_slots: asyncio.Semaphore | None = None
        self._spare: asyncio.Task[tuple[BrowserContext, Page]] | None = None
        self._page_proxies: dict[BrowserContext, PageProxy] = {}  # each capture context's own
        self.launches = 0  # Chromium processes started so far: a change means the browser died meanwhile

    @property
    def ws_url(self) -> str:
        """ws+unix:SOCKET:/devtools/browser: the browser over its DevTools pipe (start() first).

        Only the agent's user can open the socket. ``cdp_scope.scoped_cdp_endpoint`` turns it into
        a loopback address for clients that speak TCP only, confined to a context of their own.
        """
        if self._pipe is None:
            raise RuntimeError("SharedBrowser is not started")
        return self._pipe.url

    @property
    def browser(self) -> Browser:
        if self._browser is None:
            raise RuntimeError("SharedBrowser is not started")
        return self._browser

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def healthy(self) -> bool:
        return (
            self._process is not None
            and self._process.alive
            and self._browser is not None
            and self._browser.is_connected()
            and self._pipe is not None
            and not self._pipe.closed
        )

    async def start(self) -> SharedBrowser:
        """Launch (or relaunch, if it died) Chromium and attach Playwright; idempotent. One relaunch, under
        a lock: callers that found it dead wait for it. Read ``ws_url`` after it with no await between."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.healthy:
                await self._shutdown()
                await self._launch()
        return self

    def died_since(self, launches: int) -> bool:
        """Whether the Chromium that was running at ``launches`` died (or was replaced) since."""
        return launches != self.launches or not self.healthy

    async def died(self, launches: int) -> bool:
        """``died_since``, given a moment for a death just met (a failed call) to be noticed; none when
        the browser answers a DevTools round trip (alive: a page that did not render waits no 0.5 s)."""
        alive = not self.died_since(launches) and self._browser is not None and await browser_answers(self._browser)
        for _ in range(0 if alive else 10):
            if self.died_since(launches):
                return True
            await asyncio.sleep(0.05)
        return self.died_since(launches) if alive else False

    async def once_more_if_died(
        self,
        operation: Callable[[], Awaitable[T]],
        *,
        what: str,
        failed: Callable[[T], bool] = lambda _: False,
        errors: tuple[type[BaseException], ...] = (PlaywrightError,),
    ) -> T:
        """``operation`` on the running Chromium; when Chromium died under it (crashed, killed, out of
        memory), relaunched and ``operation`` run once more: a dead browser is not the page's fault.

        It died under ``operation`` when ``operation`` raised one of ``errors`` (others propagate) or
        returned a result that ``failed`` calls a failure, and ``died`` finds that the Chromium it ran
        on died or was replaced since. The second run's outcome is final; ``what`` names it in the log."""
        for last in (False, True):
            await self.start()
            launches = self.launches
            try:
                result = await operation()
            except errors:
                if last or not await self.died(launches):
                    raise
            else:
                if last or not (failed(result) and await self.died(launches)):
                    return result
            logger.warning("Chromium died while %s: relaunched, once more", what)
        raise AssertionError("unreachable")

    async def _launch(self) -> None:
        self.launches += 1
        self._profile = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="webgen-chromium-"))
        argv, confinement = await asyncio.to_thread(browser_command, self.chromium_path, self._profile)
        if confinement != self.confinement and confinement.startswith("UNCONFINED"):
            logger.warning("Chromium: %s", confinement)
        self.confinement = confinement
        user = browser_user()
        if user is not None:
            await asyncio.to_thread(os.chown, self._profile, user, user)
        # Chromium reads commands on fd 3 and writes on fd 4: a shell puts our pipe ends there (bash:
        # dash redirects one-digit descriptors only, and ours may have two digits).
        commands_read, commands_write = os.pipe()
        answers_read, answers_write = os.pipe()
        remap = [_BASH, "-c", f'exec "$@" 3<&{commands_read} 4>&{answers_write}', "chromium-pipe"]
        try:
            self._process = await ManagedProcess.astart(
                [*remap, *argv],
                cwd=self._profile,
                log_path=self._profile / "chromium.log",
                registry=self.registry,
                pass_fds=(commands_read, answers_write),
                user=user,
            )
        except BaseException:
            for fd in (commands_write, answers_read):
                os.close(fd)
            raise
        finally:
            os.close(commands_read)
            os.close(answers_write)
        self._pipe = DevToolsPipe(commands_write, answers_read)
        try:
            await asyncio.wait_for(self._pipe.start(), self.launch_timeout_s)
        except (ConnectionError, RuntimeError, TimeoutError) as error:
            tail = self._process.log_tail(20)
            await self._shutdown()
            raise RuntimeError(f"Chromium did not start ({self.chromium_path}: {error}):\n{tail}") from None
        except BaseException:
            await self._shutdown()
            raise
        try:
            self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.connect_over_cdp(
                self._pipe.url, timeout=self.launch_timeout_s * 1000
            )
        except BaseException:
            await self._shutdown()
            raise

    async def _shutdown(self) -> None:
        await self._drop_spare()
        browser, self._browser = self._browser, None
        playwright, self._playwright = self._playwright, None
        process, self._process = self._process, None
        pipe, self._pipe = self._pipe, None
        if browser is not None:
            with contextlib.suppress(Exception):  # may already be disconnected
                await asyncio.wait_for(browser.close(), 5)
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()
        if process is not None:
            await process.stop(grace_s=2.0)
        if pipe is not None:
            await pipe.close()
        proxies, self._page_proxies = self._page_proxies, {}
        for proxy in proxies.values():  # contexts of a dead browser send no close event
            await proxy.close()
        if self._profile is not None:
            await asyncio.to_thread(shutil.rmtree, self._profile, ignore_errors=True)
            self._profile = None

    async def close(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await self._shutdown()

    async def __aenter__(self) -> SharedBrowser:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def capture(
        self,
        url: str,
        *,
        viewport: tuple[int, int] = (1280, 800),
        timeout_s: float = 20.0,
        offline: bool = False,
        wait_s: float | None = None,
    ) -> PageCapture:
        """Load ``url`` in a fresh context and report how it rendered; never raises for page problems.

        Captures of concurrent runs share the browser (each in its own context). The page reaches
        its own origin and public internet addresses, never a local or private one
        (``tools/page_proxy.py``); ``offline``: its own origin only. ``wait_s``: a fixed wait after
        the load event, animations running (``capture_page``).
        """
        if self._capture_slots is None:
            self._capture_slots = asyncio.Semaphore(self.max_captures)
        async with self._capture_slots:
            return await self._capture(url, viewport=viewport, timeout_s=timeout_s, offline=offline, wait_s=wait_s)

    async def _open_page(self, viewport: tuple[int, int]) -> tuple[BrowserContext, Page]:
        # Every request through a page proxy of the context's own (loopback too); its policy is set
        # when the context is used (a spare is opened before its site is known), refusing all until then.
        proxy = await PageProxy(policy=PagePolicy(offline=True)).start()
        try:
            if self._browser is None:  # another caller is relaunching it since this one's start()
                raise BrowserGone("Chromium is being relaunched")
            # No downloads: a page that starts one gets it cancelled, nothing reaches the disk.
            context = await self._browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]},
                accept_downloads=False,
                proxy={"server": proxy.socks_url, "bypass": NO_LOOPBACK_BYPASS},
            )
        except BaseException:
            await proxy.close()
            raise
        self._page_proxies[context] = proxy
        context.on("close", lambda closed: asyncio.ensure_future(self._drop_proxy(closed)))
        try:
            return context, await context.new_page()
        except BaseException:
            with contextlib.suppress(Exception):
                await context.close()
            raise

    def _proxy_of(self, context: BrowserContext) -> PageProxy:
        proxy = self._page_proxies.get(context)
        if proxy is None:  # dropped with the browser it belonged to: that one died meanwhile
            raise BrowserGone("Chromium died: its page's context is gone")
        return proxy

    async def _drop_proxy(self, context: BrowserContext) -> None:
        proxy = self._page_proxies.pop(context, None)
        if proxy is not None:
            await proxy.close()

    async def _fresh_page(self, viewport: tuple[int, int]) -> tuple[BrowserContext, Page]:
        """A never-used page in a new context: the spare opened after the last capture, or a new one."""
        spare, self._spare = self._spare, None
        if spare is not None:
            await asyncio.wait({spare})
            if not spare.cancelled() and spare.exception() is None:  # else the browser went away meanwhile
                context, page = spare.result()
                if page.viewport_size != {"width": viewport[0], "height": viewport[1]}:
                    await page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
                return context, page
        return await self._open_page(viewport)  # failing on a dead browser: the caller retries

    def open_spare(self, viewport: tuple[int, int]) -> None:
        """Open the next capture's page in the background (a capture's end, a run's first model call)."""
        if self._spare is None and self.healthy:
            self._spare = asyncio.create_task(self._open_page(viewport))

    async def _drop_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is None:
            return
        # Let it finish rather than cancel it: a context cancelled half-made could leave a tab behind.
        # Bounded: a page asked of a browser that died meanwhile may never answer (then it is cancelled).
        await asyncio.wait({spare}, timeout=10)
        if not spare.done():
            spare.cancel()
            return
        if spare.cancelled() or spare.exception() is not None:
            return
        context, _ = spare.result()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(context.close(), 5)

    @contextlib.asynccontextmanager
    async def confined_page(
        self, url: str, *, viewport: tuple[int, int] = (1280, 800), offline: bool = False
    ) -> AsyncIterator[Page]:
        """A fresh page (a new context) under a capture's network policy for ``url``'s site, not yet
        loaded; closed with its context on exit. For replaying recorded tests (``tools/replay``), which
        open it and use it under ``once_more_if_died``."""
        if self._capture_slots is None:
            self._capture_slots = asyncio.Semaphore(self.max_captures)
        async with self._capture_slots:
            context, page = await self._confined(url, viewport, offline)
            try:
                yield page
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(context.close(), 5)
                self.open_spare(viewport)

    async def _confined(self, url: str, viewport: tuple[int, int], offline: bool) -> tuple[BrowserContext, Page]:
        """A fresh page under ``url``'s policy. Not made again if Chromium dies meanwhile: a caller runs
        its whole use of the page, the opening included, under ``once_more_if_died``."""
        await self.start()
        context, page = await self._fresh_page(viewport)
        try:
            self._proxy_of(context).policy = PagePolicy(site=site_of(url), offline=offline)
            await confine_to_origin(context, page, url, offline=offline)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), 5)
            raise
        return context, page

    async def _capture(
        self, url: str, *, viewport: tuple[int, int], timeout_s: float, offline: bool, wait_s: float | None
    ) -> PageCapture:
        """One capture; made once more when Chromium died during it (``once_more_if_died``)."""
        return await self.once_more_if_died(
            lambda: self._capture_once(url, viewport=viewport, timeout_s=timeout_s, offline=offline, wait_s=wait_s),
            failed=lambda capture: bool(capture.load_error or capture.blank or not capture.png),
            what=f"capturing {url}",
        )

    async def _capture_once(
        self, url: str, *, viewport: tuple[int, int], timeout_s: float, offline: bool, wait_s: float | None
    ) -> PageCapture:
        started = time.monotonic()
        # Keep part of the budget for the screenshot and text of a page that never finished loading.
        reserve = min(5.0, timeout_s * 0.25)
        nav_timeout = max(1.0, timeout_s - reserve)
        context, page = await self._fresh_page(viewport)
        try:
            proxy = self._proxy_of(context)
            proxy.policy = PagePolicy(site=site_of(url), offline=offline)
            blocked = await confine_to_origin(context, page, url, offline=offline)
            capture = await capture_page(page, url, nav_timeout=nav_timeout, reserve=reserve, wait_s=wait_s)
            capture.blocked_requests = (blocked + [f"connection to {r}" for r in proxy.refused])[:MAX_ITEMS]
            # A refused navigation away from the site is the page leaving it, whether or not Chromium
            # had replaced the page by an error page when it was read (that depends on the machine's speed).
            navigations = [b.removeprefix(NAVIGATION) for b in blocked if b.startswith(NAVIGATION)]
            if navigations:
                capture.left_site = navigations[0]
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), 5)
        capture.seconds = round(time.monotonic() - started, 3)
        self.open_spare(viewport)
        return capture
