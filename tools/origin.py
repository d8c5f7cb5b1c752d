"""Keeping browser contexts on the site under test: its own origin, no file://, no downloads, no popups.

Captures (Playwright contexts) abort every request elsewhere with a route whose pattern matches only
other origins, so the site's own requests are never intercepted. A GUI agent's context (made by
``cdp_scope`` over raw CDP) gets a per-context proxy that refuses everything except the site's
host and port: Chromium applies it to every request of the context, navigations and subresources
alike, at no cost per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import BrowserContext, Page, Route
from playwright.async_api import Error as PlaywrightError

_MAX_BLOCKED = 20


NAVIGATION = "navigation to "


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def confine_to_origin(context: BrowserContext, page: Page, url: str) -> list[str]:
    """Keep a capture's context on ``url``'s origin; returns the (growing) list of refused URLs.

    Every request elsewhere (other hosts and ports, file://) is aborted: the pattern matches only
    those, so the site's own requests are not intercepted at all. Popups are closed as they open;
    dialogs are dismissed by Playwright (no handler is registered).
    """
    origin = origin_of(url)
    blocked: list[str] = []

    async def refuse(route: Route) -> None:
        request = route.request
        if len(blocked) < _MAX_BLOCKED:
            navigation = request.is_navigation_request() and request.frame == page.main_frame
            blocked.append(f"{NAVIGATION if navigation else ''}{request.url[:300]}")
        with contextlib.suppress(PlaywrightError):
            await route.abort("blockedbyclient")

    def close_popup(popup: Page) -> None:
        if popup != page:
            asyncio.ensure_future(_close_quietly(popup))

    await context.route(re.compile(f"^(?!{re.escape(origin)}/)"), refuse)
    context.on("page", close_popup)
    return blocked


async def _close_quietly(page: Page) -> None:
    with contextlib.suppress(PlaywrightError):
        await page.close()


_DEAD_PROXY: socket.socket | None = None


def _dead_proxy_port() -> int:
    """A loopback port bound (not listening) for the life of the process: connecting to it is refused."""
    global _DEAD_PROXY
    if _DEAD_PROXY is None:
        _DEAD_PROXY = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        _DEAD_PROXY.bind(("127.0.0.1", 0))
    return int(_DEAD_PROXY.getsockname()[1])


def context_proxy(url: str) -> dict[str, Any]:
    """``Target.createBrowserContext`` parameters confining a context to ``url``'s host and port.

    Every request goes to a proxy that refuses connections, except those to the site itself;
    ``<-loopback>`` removes Chromium's implicit bypass for loopback, so other local ports (other
    runs' servers, the DevTools endpoint) are refused too. file:// is not proxied: Chromium does
    not let an http page load it, and browser-use's allowed_domains refuses navigating there.
    """
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {
        "proxyServer": f"http://127.0.0.1:{_dead_proxy_port()}",
        "proxyBypassList": f"<-loopback>;{parts.hostname}:{port}",
    }
