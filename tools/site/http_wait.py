"""Waiting for a started site to answer HTTP: the URL it answers on, or why it never did.

The server's own port is tried first; a URL its log printed counts only when the server itself
listens there (a fake "Local:" line must not send the capture to some other service).
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal
from urllib.parse import urlsplit

import httpx
import psutil

from webgen_agent.tools.process import ManagedProcess, read_tail
from webgen_agent.tools.site.logs import explain, printed_urls

Stage = Literal["install", "start", "http", "ok"]
_BAD_STATUS_GRACE_S = 5.0  # a server answering 4xx/5xx gets this long to settle before we report it
# Polled often while a typical dev server starts (Vite answers after about 0.3 s: a 0.1 s poll
# found it 0.035 s later on average), then ten times a second until the deadline.
_FAST_POLL_S, _FAST_FOR_S = 0.02, 2.0
_POLL_S = 0.1


async def wait_http(
    server: ManagedProcess, port: int, shown: str, *, timeout_s: float
) -> tuple[str | None, Stage, str | None]:
    """Poll (every 20 ms for 2 s, then every 100 ms) until some candidate URL answers 200-399, the
    server dies, or the deadline."""
    started = time.monotonic()
    deadline = started + timeout_s
    own = own_url(server, port)
    bad: tuple[str, int] | None = None
    bad_since: float | None = None
    async with httpx.AsyncClient(verify=False, follow_redirects=False, trust_env=False) as client:
        while True:
            # A printed URL counts only when the server itself listens there: a fake "Local:"
            # line must not send the capture to some other service on this machine.
            for url in [own, *await asyncio.to_thread(_printed_and_listening, server, port)]:
                remaining = deadline - time.monotonic()
                status = await answers(url, timeout_s=max(0.5, min(10.0, remaining)), client=client)
                if status is True:
                    return url, "ok", None
                if isinstance(status, int):
                    bad = (url, status)
                    bad_since = bad_since or time.monotonic()
            if not server.alive:
                code = server.returncode
                log = await asyncio.to_thread(read_tail, server.log_path, lines=400)
                return (
                    None,
                    "start",
                    explain(f"`{shown}` exited with code {code} before the site answered HTTP.", log),
                )
            now = time.monotonic()
            stuck = bad is not None and bad_since is not None and now - bad_since >= _BAD_STATUS_GRACE_S
            if bad is not None and stuck:
                log = await asyncio.to_thread(read_tail, server.log_path, lines=400)
                return (
                    None,
                    "http",
                    explain(
                        f"The server runs but {bad[0]} answers HTTP {bad[1]} instead of a page "
                        "(is index.html missing, or is the entry path wrong?).",
                        log,
                    ),
                )
            if now >= deadline:
                headline = (
                    f"The server runs but {bad[0]} answered HTTP {bad[1]} until the {timeout_s:g} s deadline."
                    if bad
                    else f"`{shown}` did not answer HTTP on port {port} within {timeout_s:g} s "
                    "(it must listen on the PORT it is given, e.g. vite --port)."
                )
                log = await asyncio.to_thread(read_tail, server.log_path, lines=400)
                return None, "http" if bad else "start", explain(headline, log)
            poll_s = _FAST_POLL_S if now - started < _FAST_FOR_S else _POLL_S
            await asyncio.sleep(min(poll_s, max(0.0, deadline - now)))


def own_url(server: ManagedProcess, port: int) -> str:
    """The URL of the port the server was given (in its own network namespace: through the agent's forwarder)."""
    return f"http://127.0.0.1:{server.network.forward(port) if server.network else port}/"


def _printed_and_listening(server: ManagedProcess, port: int) -> list[str]:
    """URLs the server's log printed (other than its own port) that the server really listens on.

    In its own network namespace only the sandbox's processes can listen, so each printed port is
    reached through the forwarder; else the process tree's sockets are scanned (/proc). Called in a
    worker thread.
    """
    log = read_tail(server.log_path, lines=200)
    printed = [u for u in printed_urls(log) if f":{port}/" not in u]
    if server.network is not None:
        return list(dict.fromkeys(server.network.url(u) for u in printed))
    return [u for u in printed if _server_listens(server, u)]


def _server_listens(server: ManagedProcess, url: str) -> bool:
    """Whether a process of the server's tree listens on ``url``'s port."""
    port = urlsplit(url).port
    try:
        leader = psutil.Process(server.pid)
        tree = [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return False
    for proc in tree:
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in proc.net_connections("tcp")):
                return True
        except psutil.Error:
            continue
    return False


async def answers(url: str, *, timeout_s: float, client: httpx.AsyncClient | None = None) -> bool | int | None:
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
