"""Multi-page capture: the landing page and the site's other pages, for every site.

The pages are a scaffold's declared routes, or, without a scaffold, the same-origin links found on
the landing page (distinct paths, fragments and queries dropped), up to ``max_pages`` in all, the
landing page included. Each page is captured like the landing page; its record is small (path,
title, text, the screenshot's blob hash, what broke) and the list is stored as one blob.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urljoin, urlsplit

from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.context import AgentContext
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.capture import PageCapture

PAGE_TEXT_CHARS = 1500


async def page_record(path: str, capture: PageCapture, blobs: BlobStore) -> dict[str, Any]:
    return {
        "path": path,
        "url": capture.url,
        "title": capture.title,
        "visible_text": capture.visible_text[:PAGE_TEXT_CHARS],
        "screenshot": await blobs.aput(capture.png) if capture.png else None,
        "render_error": capture.render_error,
    }


def linked_paths(base_url: str, links: list[str]) -> list[str]:
    """Same-origin paths the landing page links to, in page order, without the landing page itself."""
    base = urlsplit(base_url)
    seen = {base.path or "/"}
    found: list[str] = []
    for link in links:
        parts = urlsplit(urljoin(base_url, link))
        if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
            continue
        path = parts.path or "/"
        if path not in seen:
            seen.add(path)
            found.append(path)
    return found


def other_paths(base_url: str, landing: PageCapture, routes: list[str] | None, max_pages: int) -> list[str]:
    """The pages to capture besides the landing page: declared routes, else the landing page's links."""
    candidates = [r for r in routes if r != "/"] if routes is not None else linked_paths(base_url, landing.links)
    return candidates[: max(0, max_pages - 1)]


async def capture_pages(
    browser: SharedBrowser, base_url: str, paths: list[str], context: AgentContext
) -> list[tuple[str, PageCapture]]:
    """Capture each path of the site (side by side, as the browser allows)."""
    viewport = (context.viewport_width, context.viewport_height)
    captures = await asyncio.gather(
        *(
            browser.capture(
                urljoin(base_url, path),
                viewport=viewport,
                timeout_s=context.page_timeout_s,
                offline=context.offline_pages,
            )
            for path in paths
        )
    )
    return list(zip(paths, captures, strict=True))


def pages_error(pages: list[dict[str, Any]]) -> str | None:
    """What to fix when a page other than the landing page does not render."""
    broken = [f"Page {p['path']}: {p['render_error']}" for p in pages[1:] if p.get("render_error")]
    return "\n\n".join(broken) or None
