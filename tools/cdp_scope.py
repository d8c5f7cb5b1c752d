"""A DevTools endpoint confined to one fresh browser context of a running Chromium.

browser-use drives a browser over the DevTools protocol (CDP) and treats every page it can see as
its own: it adopts, focuses and closes tabs (a tab of another origin is closed by its security
watchdog). On a Chromium shared by concurrent runs, a GUI agent would therefore test another run's
page, or close the executor's capture tab. ``scoped_cdp_endpoint`` hands such a client a websocket
URL through which the browser seems to hold only the client's own browser context: targets of
other contexts are filtered out of every answer and event, new tabs are created inside the
context, and browser-wide commands that take a context (cookies, permissions, downloads) are
pointed at it. ``Browser.close`` is refused, so a client can never end the shared browser.

Hand-written because no library offers it (Playwright keeps its contexts to itself); it works at
the protocol level, so it depends on no client's internals. The context is created with
``disposeOnDetach``: Chromium removes it, with its pages, when the client disconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect, unix_connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from webgen_agent.tools.devtools_pipe import split_unix_url
from webgen_agent.tools.origin import context_proxy
from webgen_agent.tools.page_proxy import PagePolicy, PageProxy, site_of

logger = logging.getLogger(__name__)

# Root commands that act on the default context unless told otherwise; they take this parameter.
_CONTEXT_PARAM_COMMANDS = frozenset(
    {
        "Target.createTarget",
        "Storage.getCookies",
        "Storage.setCookies",
        "Storage.clearCookies",
        "Browser.grantPermissions",
        "Browser.resetPermissions",
        "Browser.setPermission",
        "Browser.setDownloadBehavior",
    }
)
_REFUSED_COMMANDS = frozenset({"Browser.close", "Browser.crash", "Target.disposeBrowserContext"})
_TARGET_EVENTS = frozenset(
    {
        "Target.targetCreated",
        "Target.targetInfoChanged",
        "Target.targetDestroyed",
        "Target.targetCrashed",
        "Target.attachedToTarget",
        "Target.detachedFromTarget",
    }
)


async def browser_websocket_url(cdp_url: str) -> str:
    """ws://... (or ws+unix:...) of the browser target, from an http://host:port DevTools address."""
    if cdp_url.startswith("ws"):
        return cdp_url
    async with httpx.AsyncClient(timeout=10.0, trust_env=False) as client:
        answer = await client.get(cdp_url.rstrip("/") + "/json/version")
        answer.raise_for_status()
        return str(answer.json()["webSocketDebuggerUrl"])


@dataclass
class _Scope:
    """What one client may see: its context, its targets and the sessions attached to them."""

    context_id: str
    targets: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)
    foreign_sessions: set[str] = field(default_factory=set)
    target_list_requests: set[int] = field(default_factory=set)

    def owns(self, info: dict[str, Any]) -> bool:
        # The browser's own UI (e.g. the omnibox popup Chromium opens in each new context) is never
        # a client's to drive.
        mine = info.get("browserContextId") == self.context_id and info.get("type") != "browser_ui"
        if mine:
            self.targets.add(info.get("targetId", ""))
        return mine


class _Relay:
    """One client connection relayed to its own connection to the browser."""

    # Ids of the relay's own commands: negative, so they never collide with a client's.
    _own_ids = itertools.count(-1, -1)

    def __init__(self, client: ServerConnection, browser: ClientConnection, scope: _Scope) -> None:
        self.client = client
        self.browser = browser
        self.scope = scope
        self._sending: set[asyncio.Task[None]] = set()  # the event loop keeps only weak references

    async def run(self) -> None:
        up = asyncio.create_task(self._client_to_browser())
        down = asyncio.create_task(self._browser_to_client())
        try:
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (up, down):
                task.cancel()
            await asyncio.gather(up, down, return_exceptions=True)

    async def _client_to_browser(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for raw in self.client:
                message = json.loads(raw)
                method = message.get("method", "")
                if "sessionId" not in message:
                    if method in _REFUSED_COMMANDS:
                        await self.client.send(
                            json.dumps(
                                {
                                    "id": message.get("id"),
                                    "error": {
                                        "code": -32000,
                                        "message": f"{method} is not allowed on a shared browser",
                                    },
                                }
                            )
                        )
                        continue
                    params = message.setdefault("params", {})
                    if method in _CONTEXT_PARAM_COMMANDS:
                        params.setdefault("browserContextId", self.scope.context_id)
                    elif method == "Target.getTargets":
                        self.scope.target_list_requests.add(message.get("id"))
                await self.browser.send(json.dumps(message))

    async def _browser_to_client(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for raw in self.browser:
                message = json.loads(raw)
                if "sessionId" not in message and message.get("id") in self.scope.target_list_requests:
                    await self.client.send(json.dumps(self._narrowed(message)))
                elif self._keep(message):
                    await self.client.send(raw)

    def _narrowed(self, answer: dict[str, Any]) -> dict[str, Any]:
        """An answer to ``Target.getTargets`` trimmed to the scope's targets."""
        self.scope.target_list_requests.discard(answer["id"])
        infos = (answer.get("result") or {}).get("targetInfos")
        if infos is not None:
            answer["result"]["targetInfos"] = [info for info in infos if self.scope.owns(info)]
        return answer

    def _keep(self, message: dict[str, Any]) -> bool:
        """Whether the browser's message goes to the client as it is."""
        scope = self.scope
        session = message.get("sessionId")
        if session is not None:
            return session not in scope.foreign_sessions
        if "id" in message:
            request_id = message["id"]
            return not (isinstance(request_id, int) and request_id < 0)  # not an answer to the relay's own
        method = message.get("method")
        if method not in _TARGET_EVENTS:
            return True
        params = message.get("params") or {}
        info = params.get("targetInfo")
        if method == "Target.attachedToTarget":
            session_id = params.get("sessionId", "")
            if info is not None and scope.owns(info):
                scope.sessions.add(session_id)
                return True
            # Another context's page, auto-attached to this connection: let it go at once.
            scope.foreign_sessions.add(session_id)
            if params.get("waitingForDebugger"):
                self._send_own("Runtime.runIfWaitingForDebugger", session_id=session_id)
            self._send_own("Target.detachFromTarget", {"sessionId": session_id})
            return False
        if method == "Target.detachedFromTarget":
            session_id = params.get("sessionId", "")
            scope.foreign_sessions.discard(session_id)
            if session_id in scope.sessions:
                scope.sessions.discard(session_id)
                return True
            return False
        if info is not None:
            return scope.owns(info)
        return params.get("targetId") in scope.targets

    def _send_own(self, method: str, params: dict[str, Any] | None = None, *, session_id: str | None = None) -> None:
        message: dict[str, Any] = {"id": next(self._own_ids), "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        task = asyncio.get_running_loop().create_task(self._send_quietly(self.browser, message))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    @staticmethod
    async def _send_quietly(connection: ServerConnection | ClientConnection, message: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionClosed):
            await connection.send(json.dumps(message))


async def _command(browser: ClientConnection, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send one command on a connection nothing else reads yet; its result."""
    request_id = next(_Relay._own_ids)
    await browser.send(json.dumps({"id": request_id, "method": method, "params": params}))
    while True:
        message = json.loads(await browser.recv())
        if message.get("id") == request_id:
            if "error" in message:
                raise RuntimeError(f"{method} failed: {message['error']}")
            return message.get("result") or {}


@dataclass
class ScopedEndpoint:
    """The address a client connects to, and a way to cut it off."""

    url: str
    server: Server = field(repr=False)

    async def disconnect(self) -> None:
        """Close the endpoint and every relayed connection (Chromium then disposes the context).

        A client waiting on the browser (a page that never loads) gets a closed connection at once.
        """
        self.server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 5)


def connect_browser(url: str, timeout_s: float) -> Any:
    """A connection to the browser at ``url``: a ws:// address, or the agent's own ws+unix: socket."""
    # No size limit: screenshots travel as one message of several MB. No compression: Chromium
    # offers none, and deflating those screenshots for a local client costs more than it saves.
    options: dict[str, Any] = {"max_size": None, "ping_interval": None, "compression": None, "open_timeout": timeout_s}
    unix = split_unix_url(url)
    if unix is not None:
        socket_path, path = unix
        return unix_connect(socket_path, f"ws://localhost{path}", **options)
    return connect(url, **options)


@contextlib.asynccontextmanager
async def scoped_cdp_endpoint(
    cdp_url: str, *, confine_to: str | None = None, offline: bool = False, connect_timeout_s: float = 10.0
) -> AsyncIterator[ScopedEndpoint]:
    """An endpoint (ws://127.0.0.1) through which the browser at ``cdp_url`` shows only a fresh context.

    Each client that connects gets its own new context, removed when it disconnects; the endpoint
    closes when the block ends (dropping any client still connected). With ``confine_to`` (a site
    URL) the context follows the page network policy (``tools/page_proxy.py``): that site's host and
    port, public internet addresses unless ``offline``, never a local or private one. Clients
    that send an Origin header (web pages) are refused: only programs may connect.
    """
    browser_url = await browser_websocket_url(cdp_url)
    async with contextlib.AsyncExitStack() as stack:
        proxy = None
        if confine_to:
            policy = PagePolicy(site=site_of(confine_to), offline=offline)
            proxy = await stack.enter_async_context(PageProxy(policy=policy))
        async with _scoped_endpoint(browser_url, confine_to, proxy, connect_timeout_s) as endpoint:
            yield endpoint


@contextlib.asynccontextmanager
async def _scoped_endpoint(
    browser_url: str, confine_to: str | None, proxy: PageProxy | None, connect_timeout_s: float
) -> AsyncIterator[ScopedEndpoint]:
    async def handle(client: ServerConnection) -> None:
        async with connect_browser(browser_url, connect_timeout_s) as browser:
            confined = context_proxy(confine_to, proxy.socks_url) if confine_to and proxy else {}
            params = {"disposeOnDetach": True, **confined}
            created = await asyncio.wait_for(
                _command(browser, "Target.createBrowserContext", params), connect_timeout_s
            )
            await _Relay(client, browser, _Scope(context_id=created["browserContextId"])).run()

    # The path is a secret: a local process that finds the port cannot use it without the path.
    path = f"/devtools/browser/{secrets.token_urlsafe(24)}"

    def only_our_path(connection: ServerConnection, request: Request) -> Response | None:
        return None if request.path == path else connection.respond(HTTPStatus.NOT_FOUND, "Not found\n")

    server: Server = await serve(
        handle,
        "127.0.0.1",
        0,
        max_size=None,
        ping_interval=None,
        compression=None,
        origins=[None],
        process_request=only_our_path,
    )
    port = next(iter(server.sockets)).getsockname()[1]
    endpoint = ScopedEndpoint(url=f"ws://127.0.0.1:{port}{path}", server=server)
    try:
        yield endpoint
    finally:
        await endpoint.disconnect()
