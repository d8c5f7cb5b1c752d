"""One shared Chromium per agent process, and page capture for the executor and the judges.

Chromium is launched by us as a ``ManagedProcess`` (own process group, recorded in the registry so a
hard-killed agent's browser can be reaped) and Playwright attaches over CDP. The same ``cdp_url``
lets another library (browser-use) drive the very same browser instead of starting its own, each
client confined to a browser context of its own (``tools/cdp_scope.py``, through ``ws_url``).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from types import TracebackType

from playwright.async_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from webgen_agent.tools.capture import MAX_ITEMS, PageCapture, capture_page
from webgen_agent.tools.origin import NAVIGATION, confine_to_origin
from webgen_agent.tools.process import ManagedProcess, ProcessRegistry

CHROMIUM_FLAGS = (
    "--headless=new",
    "--remote-debugging-port=0",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # Pages of concurrent runs sit in windows of their own, all but one in the background: without
    # these, Chromium throttles their timers and frames and a screenshot waits for a frame.
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    # Chromium 15x opens the address bar's popup as two hidden WebUI pages per window, i.e. per
    # browser context here: a renderer (~60 MB) for nothing in a headless browser.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup",
)


# Network counts as settled after this long without a request in flight. Requests a page makes
# after load (effects fetching data, lazy chunks) start within a frame or two of the first render;
# a request in flight holds the capture however long it takes (up to the capture's cap).
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
        self._cdp_url: str | None = None
        self._ws_url: str | None = None
        self._lock: asyncio.Lock | None = None
        self._capture_slots: asyncio.Semaphore | None = None
        self._spare: asyncio.Task[tuple[BrowserContext, Page]] | None = None

    @property
    def cdp_url(self) -> str:
        """http://127.0.0.1:PORT of the DevTools endpoint (start() first)."""
        if self._cdp_url is None:
            raise RuntimeError("SharedBrowser is not started")
        return self._cdp_url

    @property
    def ws_url(self) -> str:
        """ws://127.0.0.1:PORT/devtools/browser/ID: the browser target itself (start() first)."""
        if self._ws_url is None:
            raise RuntimeError("SharedBrowser is not started")
        return self._ws_url

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
        )

    async def start(self) -> SharedBrowser:
        """Launch (or relaunch, if it died) Chromium and attach Playwright; idempotent."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.healthy:
                await self._shutdown()
                await self._launch()
        return self

    async def _launch(self) -> None:
        self._profile = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="webgen-chromium-"))
        argv = [self.chromium_path, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", "about:blank"]
        self._process = await ManagedProcess.astart(
            argv, cwd=self._profile, log_path=self._profile / "chromium.log", registry=self.registry
        )
        port_file = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.launch_timeout_s
        port = None
        while port is None:
            with contextlib.suppress(OSError, ValueError, IndexError):
                # Two lines: the port, then the browser target's websocket path.
                port_line, path = port_file.read_text().splitlines()[:2]
                port = int(port_line)
            if port is None:
                if not self._process.alive or time.monotonic() > deadline:
                    tail = self._process.log_tail(20)
                    await self._shutdown()
                    raise RuntimeError(f"Chromium did not start ({self.chromium_path}):\n{tail}")
                await asyncio.sleep(0.05)
        self._cdp_url = f"http://127.0.0.1:{port}"
        self._ws_url = f"ws://127.0.0.1:{port}{path}"
        try:
            self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.connect_over_cdp(
                self._cdp_url, timeout=self.launch_timeout_s * 1000
            )
        except BaseException:
            await self._shutdown()
            raise

    async def _shutdown(self) -> None:
        await self._drop_spare()
        browser, self._browser = self._browser, None
        playwright, self._playwright = self._playwright, None
        process, self._process = self._process, None
        self._cdp_url = self._ws_url = None
        if browser is not None:
            with contextlib.suppress(Exception):  # may already be disconnected
                await asyncio.wait_for(browser.close(), 5)
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()
        if process is not None:
            await process.stop(grace_s=2.0)
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
        self, url: str, *, viewport: tuple[int, int] = (1280, 800), timeout_s: float = 20.0
    ) -> PageCapture:
        """Load ``url`` in a fresh context and report how it rendered; never raises for page problems.

        Captures of concurrent runs share the browser (each in its own context).
        """
        if self._capture_slots is None:
            self._capture_slots = asyncio.Semaphore(self.max_captures)
        async with self._capture_slots:
            return await self._capture(url, viewport=viewport, timeout_s=timeout_s)

    async def _open_page(self, viewport: tuple[int, int]) -> tuple[BrowserContext, Page]:
        # No downloads: a page that starts one gets it cancelled, nothing reaches the disk.
        context = await self.browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]}, accept_downloads=False
        )
        try:
            return context, await context.new_page()
        except BaseException:
            with contextlib.suppress(Exception):
                await context.close()
            raise

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
        try:
            return await self._open_page(viewport)
        except PlaywrightError:  # the browser died since the health check: relaunch once
            await self.close()
            await self.start()
            return await self._open_page(viewport)

    def _prepare_spare(self, viewport: tuple[int, int]) -> None:
        if self._spare is None and self.healthy:
            self._spare = asyncio.create_task(self._open_page(viewport))

    async def _drop_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is None:
            return
        # Let it finish rather than cancel it: a context cancelled half-made could leave a tab behind.
        await asyncio.wait({spare})
        if spare.cancelled() or spare.exception() is not None:
            return
        context, _ = spare.result()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(context.close(), 5)

    async def _capture(self, url: str, *, viewport: tuple[int, int], timeout_s: float) -> PageCapture:
        await self.start()
        started = time.monotonic()
        # Keep part of the budget for the screenshot and text of a page that never finished loading.
        reserve = min(5.0, timeout_s * 0.25)
        nav_timeout = max(1.0, timeout_s - reserve)
        context, page = await self._fresh_page(viewport)
        try:
            blocked = await confine_to_origin(context, page, url)
            capture = await capture_page(page, url, nav_timeout=nav_timeout, reserve=reserve)
            capture.blocked_requests = blocked[:MAX_ITEMS]
            navigations = [b.removeprefix(NAVIGATION) for b in blocked if b.startswith(NAVIGATION)]
            if navigations and capture.left_site is not None:
                capture.left_site = navigations[0]
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), 5)
        capture.seconds = round(time.monotonic() - started, 3)
        self._prepare_spare(viewport)
        return capture
