"""Reading one loaded page into a ``PageCapture``: screenshot, text, errors, failed requests, modules.

The shared browser (``tools/browser.py``) opens the page; this module waits for it to settle and
records what a judge and the coder need to know about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from urllib.parse import urlsplit

from playwright.async_api import (
    Browser,
    ConsoleMessage,
    Page,
    Request,
    Response,
)
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout
from pydantic import BaseModel, ConfigDict, Field

from webgen_agent.tools.origin import origin_of

# Network quiet after the first frames: no request in flight, none started or ended, this long.
_QUIET_S = 0.1
_MAX_TEXT = 4000
MAX_ITEMS = 20
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

# Visible content: the text a person can see, and whether anything at all is visible. Text a person
# cannot see is left out, so that words hidden in the page (prompt injection aimed at the models that
# read this text) never reach them: text under display:none or visibility:hidden (innerText's own
# rule), under opacity ~0 (on any ancestor), in a font or box under 2 px, clipped away by an
# ancestor's overflow (hidden or clip, not a scroll box), clip or clip-path, placed off the page, or
# in the colour of a plain background.
# innerText keeps the layout's line breaks; to keep them, the hidden text nodes are blanked for the
# one synchronous read and restored before the script returns (no frame is painted in between).
_CONTENT_JS = """() => {
  const body = document.body;
  if (!body || body.children.length === 0 && !(body.innerText || '').trim()) return {blank: true, text: ''};
  const MIN_PX = 2;
  const styles = new Map();
  const style = (el) => { if (!styles.has(el)) styles.set(el, getComputedStyle(el)); return styles.get(el); };
  const rgba = (css) => {
    const m = /rgba?\\(([^)]*)\\)/.exec(css || '');
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(parseFloat);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const backdrop = (el) => {  // the plain colour behind el, or null when an image or gradient may be
    for (let e = el; e; e = e.parentElement) {
      const s = style(e);
      if (s.backgroundImage && s.backgroundImage !== 'none') return null;
      const c = rgba(s.backgroundColor);
      if (c && c.a >= 0.99) return c;
      if (c && c.a > 0) return null;
    }
    return {r: 255, g: 255, b: 255, a: 1};
  };
  const faded = (el) => {
    let opacity = 1;
    for (let e = el; e; e = e.parentElement) opacity *= parseFloat(style(e).opacity || '1');
    return opacity < 0.05;
  };
  const clippedAway = (el, rect) => {
    for (let e = el; e && e !== document.documentElement; e = e.parentElement) {
      const s = style(e);
      if (/inset\\(\\s*50%/.test(s.clipPath) || s.clip === 'rect(0px, 0px, 0px, 0px)') return true;
      // Only overflow that cannot be scrolled into view (a scroll box's other rows can be).
      const clipsX = s.overflowX === 'hidden' || s.overflowX === 'clip';
      const clipsY = s.overflowY === 'hidden' || s.overflowY === 'clip';
      if (clipsX || clipsY) {
        const box = e.getBoundingClientRect();
        const w = clipsX ? Math.min(rect.right, box.right) - Math.max(rect.left, box.left) : rect.width;
        const h = clipsY ? Math.min(rect.bottom, box.bottom) - Math.max(rect.top, box.top) : rect.height;
        if (w < MIN_PX || h < MIN_PX) return true;
      }
    }
    return false;
  };
  const hidden = (node) => {
    const el = node.parentElement;
    if (!el) return true;
    const s = style(el);
    // innerText already leaves these out; blanking a <style> would change the page's layout.
    if (s.display === 'none' || /^(STYLE|SCRIPT|NOSCRIPT|TEMPLATE)$/i.test(el.tagName)) return false;
    if (parseFloat(s.fontSize) < MIN_PX || faded(el)) return true;
    const range = document.createRange();
    range.selectNodeContents(node);
    const rect = range.getBoundingClientRect();
    if (rect.width < MIN_PX || rect.height < MIN_PX) return true;
    if (rect.right + scrollX <= 0 || rect.bottom + scrollY <= 0) return true;  // off the page
    if (clippedAway(el, rect)) return true;
    const ink = rgba(s.color), paper = backdrop(el);
    if (ink && ink.a < 0.05) return true;
    if (ink && paper && Math.abs(ink.r - paper.r) + Math.abs(ink.g - paper.g) + Math.abs(ink.b - paper.b) < 12) return true;
    return false;
  };
  const walker = document.createTreeWalker(body, NodeFilter.SHOW_TEXT);
  const blanked = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.data.trim() && hidden(node)) blanked.push([node, node.data]);
  }
  let text;
  try {
    for (const [node] of blanked) node.data = '';
    text = (body.innerText || '').trim();
  } finally {
    for (const [node, data] of blanked) node.data = data;
  }
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return false;
    const s = getComputedStyle(el);
    return s.visibility !== 'hidden' && s.display !== 'none' && parseFloat(s.opacity || '1') > 0;
  };
  const media = Array.from(document.querySelectorAll('img, canvas, svg, video, iframe, picture, object, embed'));
  return {blank: !text && !media.some(visible), text, hidden: blanked.length};
}"""

# Where the page links to (absolute URLs, document order), for multi-page capture.
_LINKS_JS = "() => Array.from(document.querySelectorAll('a[href]'), a => a.href).slice(0, 200)"

_SETTLE_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"

# The page's overlay, text, links and title in one evaluation; a part that throws is left empty.
_READ_JS = f"""() => {{
  const part = (read, empty) => {{ try {{ return read(); }} catch (e) {{ return empty; }} }};
  return {{
    overlay: part({_OVERLAY_JS}, null),
    content: part({_CONTENT_JS}, null),
    links: part({_LINKS_JS}, []),
    title: part(() => document.title, ''),
  }};
}}"""


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
    hidden_texts: int = Field(default=0, description="Pieces of text a person cannot see (left out of visible_text).")
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


class _PageWatch:
    """What a page does while it loads and renders: requests in flight, failed same-origin modules,
    uncaught errors and console errors, written into ``result``."""

    def __init__(self, page: Page, result: PageCapture, origin: str) -> None:
        self.page, self.result, self.origin = page, result, origin
        self.inflight: set[Request] = set()
        self.last_activity = time.monotonic()
        page.on("request", self.on_request)
        page.on("requestfinished", self.on_done)
        page.on("requestfailed", self.on_failed)
        page.on("response", self.on_response)
        page.on("pageerror", self.on_page_error)
        page.on("console", self.on_console)

    def quiet_for(self, seconds: float) -> bool:
        """Nothing in flight, and nothing started or ended, for ``seconds``."""
        return not self.inflight and time.monotonic() - self.last_activity >= seconds

    def on_request(self, request: Request) -> None:
        self.inflight.add(request)
        self.last_activity = time.monotonic()

    def on_done(self, request: Request) -> None:
        self.inflight.discard(request)
        self.last_activity = time.monotonic()

    def on_failed(self, request: Request) -> None:
        self.on_done(request)
        if request.resource_type in ("script", "stylesheet") and _same_origin(request.url, self.origin):
            self.note_failed(request.url, request.failure or "failed")
            self.note_module(request.url, ok=False)

    def note_module(self, url: str, *, ok: bool) -> None:
        paths = self.result.module_paths if ok else self.result.failed_module_paths
        if module_path(url) not in paths and len(paths) < _MAX_MODULES:
            paths.append(module_path(url))

    def note_failed(self, url: str, why: str) -> None:
        # A 500 is followed by net::ERR_ABORTED for the same URL: one line per URL is enough.
        failed = self.result.failed_requests
        if len(failed) < MAX_ITEMS and not any(r.startswith(url + " (") for r in failed):
            failed.append(f"{url} ({why})")

    def on_response(self, response: Response) -> None:
        request = response.request
        if request.is_navigation_request() and request.frame == self.page.main_frame:
            self.result.status = response.status
        elif request.resource_type in ("script", "stylesheet") and _same_origin(response.url, self.origin):
            self.note_module(response.url, ok=response.status < 400)
            if response.status >= 400:
                self.note_failed(response.url, f"HTTP {response.status}")

    def on_page_error(self, error: PlaywrightError) -> None:
        text = f"{error.name}: {error.message}" if error.name else error.message
        # The app's own frames say where to look; library internals (react-dom) are noise.
        frames = [line.strip() for line in (error.stack or "").split("\n")[1:] if line.strip().startswith("at ")]
        own = [f for f in frames if "/node_modules/" not in f] or frames[:1]
        entry = "\n".join([text, *(_CACHE_BUST.sub("", f) for f in own[:3])])
        # React rethrows a render error several times; the same error once is enough.
        if len(self.result.page_errors) < MAX_ITEMS and entry not in self.result.page_errors:
            self.result.page_errors.append(entry)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error" and len(self.result.console_errors) < MAX_ITEMS:
            self.result.console_errors.append(message.text[:1000])


async def capture_page(
    page: Page, url: str, *, nav_timeout: float, reserve: float, wait_s: float | None = None
) -> PageCapture:
    """Load ``url`` and read it. ``wait_s``: wait that long after the load event and take the
    screenshot with animations running (WebGen-Agent's Selenium capture: ``driver.get``, then a
    fixed sleep); None: wait until the network is idle and two frames were drawn, and freeze
    animations for the screenshot (the settled page, however fast or slow it loads)."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    result = PageCapture(url=url)
    watch = _PageWatch(page, result, origin)
    deadline = time.monotonic() + nav_timeout
    try:
        response = await page.goto(url, wait_until="load", timeout=nav_timeout * 1000)
        if response is not None:
            result.status = response.status
        if wait_s is not None:
            await asyncio.sleep(wait_s)
        if wait_s is None:
            await _settle(page, watch, deadline)
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
    await _read_page(page, result, step_timeout=max(1.0, reserve), still=wait_s is None)
    return result


async def _settle(page: Page, watch: _PageWatch, deadline: float) -> None:
    """Wait for the page to settle after its load event, at most until ``deadline``: two animation
    frames (React and friends commit their first render, and start the effects that fetch data,
    after the load event), then network quiet (nothing in flight for ``_QUIET_S``: lazy chunks,
    fonts, that data), then two more frames when requests came after the first two (their answers
    drawn)."""

    async def frames() -> None:
        with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
            await asyncio.wait_for(page.evaluate(_SETTLE_JS), max(0.2, min(2.0, deadline - time.monotonic())))

    await frames()
    drawn_at = time.monotonic()
    while time.monotonic() < deadline:
        if watch.quiet_for(_QUIET_S):
            break
        await asyncio.sleep(0.02)
    if watch.last_activity > drawn_at:
        await frames()


async def _read_page(page: Page, result: PageCapture, *, step_timeout: float, still: bool) -> None:
    """What can be read of the loaded page, each bounded so a hung page cannot hold the capture past
    its budget. ``still``: the screenshot with animations frozen."""
    # One evaluation for the overlay, the text, the links and the title: each is a round trip
    # through Playwright's driver and the DevTools relay.
    with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
        read = await asyncio.wait_for(page.evaluate(_READ_JS), step_timeout)
        result.overlay = read.get("overlay")
        content = read.get("content") or {}
        result.visible_text = str(content.get("text") or "")[:_MAX_TEXT]
        result.blank = bool(content.get("blank"))
        result.hidden_texts = int(content.get("hidden") or 0)
        result.links = [str(link) for link in read.get("links") or [] if isinstance(link, str)]
        result.title = str(read.get("title") or "")[:300]
    with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
        result.png = await page.screenshot(
            type="png",
            full_page=False,
            animations="disabled" if still else "allow",
            timeout=step_timeout * 1000,
        )


async def browser_answers(browser: Browser, timeout_s: float = 1.0) -> bool:
    """Whether ``browser`` answers a DevTools command (``Browser.getVersion``) within ``timeout_s``:
    a page that failed to load in a browser that answers failed on its own."""
    try:
        session = await asyncio.wait_for(browser.new_browser_cdp_session(), timeout_s)
        try:
            await asyncio.wait_for(session.send("Browser.getVersion"), timeout_s)
        finally:
            with contextlib.suppress(TimeoutError, PlaywrightError):
                await asyncio.wait_for(session.detach(), timeout_s)
    except (TimeoutError, PlaywrightError):
        return False
    return True
