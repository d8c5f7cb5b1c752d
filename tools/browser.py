"""One shared Chromium per agent process, and page capture for the executor and the judges.

Chromium is launched by us as a ``ManagedProcess`` (own process group, recorded in the registry so a
hard-killed agent's browser can be reaped) and Playwright attaches over CDP. The same ``cdp_url``
lets another library (browser-use) drive the very same browser instead of starting its own, each
client confined to a browser context of its own (``tools/cdp_scope.py``, through ``ws_url``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from playwright.async_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Playwright,
    Request,
    Response,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout
from pydantic import BaseModel, ConfigDict, Field

from webgen_agent.tools.origin import NAVIGATION, confine_to_origin, origin_of
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
_QUIET_S = 0.2
_MAX_TEXT = 4000
_MAX_ITEMS = 20
_MAX_MODULES = 2000
_CACHE_BUST = re.compile(r"\?(?:t|v)=[0-9a-f]+")  # vite's ?t=<timestamp> / ?v=<hash> module query

# Reads the Vite error overlay (a custom element whose message lives in its shadow DOM).
_OVERLAY_JS = """() => {
  const el = document.querySelector('vite-error-overlay');
  if (!el) return null;
  const root = el.shadowRoot;
  if (!root) return (el.textContent || '').trim() || 'Vite error overlay shown';
  const pick = (sel) => { const n = root.querySelector(sel); return n ? (n.textContent || '').trim() : ''; };
  const parts = [pick('.message'), pick('.file'), pick('.frame')].filter(Boolean);
  return parts.length ? parts.join('\\n') : ((root.textContent || '').trim() || 'Vite error overlay shown');
}"""

# Visible content: text, or a visible image/canvas/svg/video/iframe with a non-zero size.
_CONTENT_JS = """() => {
  const body = document.body;
  if (!body || body.children.length === 0 && !(body.innerText || '').trim()) return {blank: true, text: ''};
  const text = (body.innerText || '').trim();
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return false;
    const s = getComputedStyle(el);
    return s.visibility !== 'hidden' && s.display !== 'none' && parseFloat(s.opacity || '1') > 0;
  };
  const media = Array.from(document.querySelectorAll('img, canvas, svg, video, iframe, picture, object, embed'));
  return {blank: !text && !media.some(visible), text};
}"""

# Where the page links to (absolute URLs, document order), for multi-page capture.
_LINKS_JS = "() => Array.from(document.querySelectorAll('a[href]'), a => a.href).slice(0, 200)"

_SETTLE_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


class PageCapture(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")  # png survives JSON

    url: str
    status: int | None = Field(default=None, description="HTTP status of the main document.")
    title: str = ""
    png: bytes = b""
    visible_text: str = ""
    page_errors: list[str] = Field(default_factory=list, description="Uncaught exceptions in the page.")
    console_errors: list[str] = Field(default_factory=list)
    failed_requests: list[str] = Field(default_factory=list, description="Same-origin scripts/styles that failed.")
    module_paths: list[str] = Field(
        default_factory=list,
        description="Same-origin scripts/styles that loaded: URL path and query, vite's ?t= dropped.",
    )
    failed_module_paths: list[str] = Field(default_factory=list, description="Same-origin scripts/styles that failed.")
    overlay: str | None = Field(default=None, description="Text of the Vite error overlay, when shown.")
    blocked_requests: list[str] = Field(
        default_factory=list, description="Requests to other origins (other hosts, ports, file://) that were refused."
    )
    left_site: str | None = Field(
        default=None, description="Where the page tried to go when it left the site's origin."
    )
    closed: bool = Field(default=False, description="The page closed itself (window.close).")
    links: list[str] = Field(default_factory=list, description="Absolute URLs of the page's links, in document order.")
    blank: bool = False
    load_error: str | None = None
    seconds: float = 0.0

    @property
    def render_error(self) -> str | None:
        """What the coder must fix for the page to render, or None when it rendered fine.

        Console errors and failed requests alone do not count (React warnings use console.error);
        they are added as context when something else is wrong.
        """
        problems: list[str] = []
        if self.closed:
            problems.append("The page closed its own window (window.close()) while it was being captured.")
        if self.left_site:
            problems.append(
                f"The page navigated away from the site to {self.left_site[:300]}; only the site's own origin "
                "may be loaded (other hosts, ports and file:// are blocked)."
            )
        if self.load_error:
            problems.append(self.load_error)
        if self.status is not None and self.status >= 400:
            problems.append(f"The page answered HTTP {self.status}.")
        if self.overlay:
            problems.append(f"Vite shows a build error:\n{self.overlay[:2000]}")
        if self.page_errors:
            shown = "\n".join(f"- {e[:600]}" for e in self.page_errors[:3])
            problems.append(f"Uncaught errors in the page:\n{shown}")
        if self.blank and not self.overlay:
            problems.append("The page rendered nothing visible (blank page: no text, images or graphics).")
        if not problems:
            return None
        if self.failed_requests:
            problems.append("Failed requests:\n" + "\n".join(f"- {r}" for r in self.failed_requests[:5]))
        if self.blocked_requests:
            problems.append(
                "Blocked requests to other origins:\n" + "\n".join(f"- {r}" for r in self.blocked_requests[:5])
            )
        if self.console_errors:
            problems.append("Console errors:\n" + "\n".join(f"- {e[:300]}" for e in self.console_errors[:5]))
        return "\n".join(problems)


def _same_origin(url: str, origin: str) -> bool:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" == origin


def module_path(url: str) -> str:
    """``/src/App.jsx?t=123`` -> ``/src/App.jsx``: the path a dev server knows a module by (vite's
    HMR timestamp query dropped, other queries such as ``?import`` kept)."""
    parts = urlsplit(url)
    query = "&".join(q for q in parts.query.split("&") if q and not q.startswith("t="))
    return parts.path + (f"?{query}" if query else "")


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
        self._profile = Path(tempfile.mkdtemp(prefix="webgen-chromium-"))
        argv = [self.chromium_path, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", "about:blank"]
        self._process = ManagedProcess.start(
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
            shutil.rmtree(self._profile, ignore_errors=True)
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
            capture = await _capture_page(page, url, nav_timeout=nav_timeout, reserve=reserve)
            capture.blocked_requests = blocked[:_MAX_ITEMS]
            navigations = [b.removeprefix(NAVIGATION) for b in blocked if b.startswith(NAVIGATION)]
            if navigations and capture.left_site is not None:
                capture.left_site = navigations[0]
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), 5)
        capture.seconds = round(time.monotonic() - started, 3)
        self._prepare_spare(viewport)
        return capture


async def _capture_page(page: Page, url: str, *, nav_timeout: float, reserve: float) -> PageCapture:
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    result = PageCapture(url=url)
    inflight: set[Request] = set()
    last_activity = [time.monotonic()]

    def on_request(request: Request) -> None:
        inflight.add(request)
        last_activity[0] = time.monotonic()

    def on_done(request: Request) -> None:
        inflight.discard(request)
        last_activity[0] = time.monotonic()

    def on_failed(request: Request) -> None:
        on_done(request)
        if request.resource_type in ("script", "stylesheet") and _same_origin(request.url, origin):
            note_failed(request.url, request.failure or "failed")
            note_module(request.url, ok=False)

    def note_module(url: str, *, ok: bool) -> None:
        paths = result.module_paths if ok else result.failed_module_paths
        if module_path(url) not in paths and len(paths) < _MAX_MODULES:
            paths.append(module_path(url))

    def note_failed(url: str, why: str) -> None:
        # A 500 is followed by net::ERR_ABORTED for the same URL: one line per URL is enough.
        if len(result.failed_requests) < _MAX_ITEMS and not any(
            r.startswith(url + " (") for r in result.failed_requests
        ):
            result.failed_requests.append(f"{url} ({why})")

    def on_response(response: Response) -> None:
        request = response.request
        if request.is_navigation_request() and request.frame == page.main_frame:
            result.status = response.status
        elif request.resource_type in ("script", "stylesheet") and _same_origin(response.url, origin):
            note_module(response.url, ok=response.status < 400)
            if response.status >= 400:
                note_failed(response.url, f"HTTP {response.status}")

    def on_page_error(error: PlaywrightError) -> None:
        text = f"{error.name}: {error.message}" if error.name else error.message
        # The app's own frames say where to look; library internals (react-dom) are noise.
        frames = [line.strip() for line in (error.stack or "").split("\n")[1:] if line.strip().startswith("at ")]
        own = [f for f in frames if "/node_modules/" not in f] or frames[:1]
        entry = "\n".join([text, *(_CACHE_BUST.sub("", f) for f in own[:3])])
        # React rethrows a render error several times; the same error once is enough.
        if len(result.page_errors) < _MAX_ITEMS and entry not in result.page_errors:
            result.page_errors.append(entry)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" and len(result.console_errors) < _MAX_ITEMS:
            result.console_errors.append(message.text[:1000])

    page.on("request", on_request)
    page.on("requestfinished", on_done)
    page.on("requestfailed", on_failed)
    page.on("response", on_response)
    page.on("pageerror", on_page_error)
    page.on("console", on_console)

    deadline = time.monotonic() + nav_timeout
    try:
        response = await page.goto(url, wait_until="load", timeout=nav_timeout * 1000)
        if response is not None:
            result.status = response.status
        # Network quiet: nothing in flight for _QUIET_S (module graphs, lazy chunks, fonts), capped.
        while time.monotonic() < deadline:
            now = time.monotonic()
            if not inflight and now - last_activity[0] >= _QUIET_S:
                break
            await asyncio.sleep(0.05)
        # Two animation frames: React and friends commit their first render after the load event.
        with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
            await asyncio.wait_for(page.evaluate(_SETTLE_JS), max(0.2, min(2.0, deadline - time.monotonic())))
    except PlaywrightError as exc:
        if isinstance(exc, PlaywrightTimeout):
            result.load_error = f"The page did not finish loading in {nav_timeout:g} s (a request or script hangs)."
        else:
            result.load_error = f"The page could not be loaded: {str(exc).splitlines()[0][:500]}"

    if page.is_closed():
        result.closed = True
        return result
    if origin_of(page.url) != origin:
        result.left_site = page.url
    # What can be read now, each bounded so a hung page cannot hold the capture past the budget.
    step_timeout = max(1.0, reserve)
    with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
        result.overlay = await asyncio.wait_for(page.evaluate(_OVERLAY_JS), step_timeout)
    with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
        content = await asyncio.wait_for(page.evaluate(_CONTENT_JS), step_timeout)
        result.visible_text = str(content.get("text") or "")[:_MAX_TEXT]
        result.blank = bool(content.get("blank"))
    with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
        links = await asyncio.wait_for(page.evaluate(_LINKS_JS), step_timeout)
        result.links = [str(link) for link in links if isinstance(link, str)]
    with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
        result.title = (await asyncio.wait_for(page.title(), step_timeout))[:300]
    with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
        result.png = await page.screenshot(
            type="png", full_page=False, animations="disabled", timeout=step_timeout * 1000
        )
    return result
