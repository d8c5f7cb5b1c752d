"""Keeping browser contexts on the site under test: one network policy, no file://, no downloads, no popups.

Every context that loads a generated page sends its requests through a ``PageProxy`` of its own
(``tools/page_proxy.py``): the site's own host and port, public internet addresses (unless the run
keeps pages offline) and never a loopback, private or link-local address, whatever the request
(fetch, image, script, WebSocket, a navigation). Captures (Playwright contexts, ``SharedBrowser``)
also route requests to other origins through ``confine_to_origin``, which keeps the page itself
on the site, refuses other schemes (``file://``) and, offline, everything else; the site's own
requests are never intercepted. A GUI agent's context (made by ``cdp_scope`` over raw CDP) gets
the proxy as ``Target.createBrowserContext`` parameters (``context_proxy``), with the site
bypassing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import BrowserContext, Page, Route
from playwright.async_api import Error as PlaywrightError

from webgen_agent.tools.page_proxy import site_of

_MAX_BLOCKED = 20
_WEB_SCHEMES = ("http", "https")


NAVIGATION = "navigation to "


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def confine_to_origin(context: BrowserContext, page: Page, url: str, *, offline: bool = False) -> list[str]:
    """Keep a capture's page on ``url``'s origin; returns the (growing) list of refused URLs.

    The route's pattern matches only other origins, so the site's own requests are not intercepted
    at all. Of those: the page navigating away, other schemes (``file://``) and, ``offline``,
    everything are aborted; a web request goes on to the context's proxy, which decides by the
    address it resolves to. Popups are closed as they open; dialogs are dismissed by Playwright
    (no handler is registered).
    """
    origin = origin_of(url)
    blocked: list[str] = []

    async def refuse_or_pass(route: Route) -> None:
        request = route.request
        navigation = request.is_navigation_request() and request.frame == page.main_frame
        if not (offline or navigation or urlsplit(request.url).scheme not in _WEB_SCHEMES):
            with contextlib.suppress(PlaywrightError):
                await route.continue_()
            return
        if len(blocked) < _MAX_BLOCKED:
            blocked.append(f"{NAVIGATION if navigation else ''}{request.url[:300]}")
        with contextlib.suppress(PlaywrightError):
            await route.abort("blockedbyclient")

    def close_popup(popup: Page) -> None:
        if popup != page:
            asyncio.ensure_future(_close_quietly(popup))

    await context.route(re.compile(f"^(?!{re.escape(origin)}/)"), refuse_or_pass)
    context.on("page", close_popup)
    return blocked


async def _close_quietly(page: Page) -> None:
    with contextlib.suppress(PlaywrightError):
        await page.close()


# Chromium's implicit bypass of loopback is removed, so that other local ports go to the proxy too.
NO_LOOPBACK_BYPASS = "<-loopback>"


def context_proxy(url: str, proxy_url: str) -> dict[str, Any]:
    """``Target.createBrowserContext`` parameters sending a context's requests through ``proxy_url``.

    ``proxy_url`` is a ``PageProxy`` holding the page network policy for ``url``'s site; the site's
    own host and port bypass it (the site is reached directly); ``<-loopback>`` removes Chromium's
    implicit bypass for loopback, so other local ports (other runs' servers, the agent's own
    services) reach the proxy and are refused. file:// is not proxied: Chromium does not let an
    http page load it, and browser-use's allowed_domains refuses navigating there.
    """
    host, port = site_of(url)
    return {"proxyServer": proxy_url, "proxyBypassList": f"{NO_LOOPBACK_BYPASS};{host}:{port}"}
