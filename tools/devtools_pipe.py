"""Chromium's DevTools over a pipe, shared by several clients through a unix socket only the agent opens.

A DevTools port on TCP is reachable by anything on the host's loopback: generated code found it
through /proc/net/tcp and drove the browser (read files, planted downloads, ran script in other
runs' pages). Chromium started with ``--remote-debugging-pipe`` listens nowhere: it reads commands
from fd 3 and writes answers and events to fd 4, NUL-separated. ``DevToolsPipe`` owns those two
ends and serves WebSocket clients (Playwright, ``cdp_scope``'s relays) on a unix socket in a folder
of mode 0700, so only the agent's own user can connect.

One pipe is one DevTools connection, so each client gets a browser session of its own
(``Target.attachToBrowserTarget``) and sees only that session and the sessions attached through it;
command ids are renumbered so clients never collide. Downloads are denied in every context: a
client's ``setDownloadBehavior`` is rewritten to ``deny``, and every new context is told so.

Hand-written because no library multiplexes a DevTools pipe (Playwright keeps the pipe of a
browser it launches to itself and offers no raw flat-session access to other clients).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, unix_serve
from websockets.exceptions import ConnectionClosed

logger = logging.getLogger(__name__)

SOCKET_NAME = "devtools.sock"
_PATH = "/devtools/browser"
_DOWNLOAD_COMMANDS = frozenset({"Browser.setDownloadBehavior", "Page.setDownloadBehavior"})


def unix_url(socket_path: Path) -> str:
    """The ``ws+unix:`` address of a socket, as Playwright's driver (the ``ws`` package) reads it."""
    return f"ws+unix:{socket_path}:{_PATH}"


def split_unix_url(url: str) -> tuple[str, str] | None:
    """``(socket path, request path)`` of a ``ws+unix:`` address; None for any other address."""
    if not url.startswith("ws+unix:"):
        return None
    socket_path, _, path = url.removeprefix("ws+unix:").partition(":")
    return socket_path, path or "/"


@dataclass
class _Client:
    """One connected client: its own browser session and the sessions it attached."""

    connection: ServerConnection
    browser_session: str
    sessions: set[str] = field(default_factory=set)


class DevToolsPipe:
    """Serves the DevTools pipe of one Chromium to any number of local WebSocket clients."""

    def __init__(self, commands_fd: int, answers_fd: int) -> None:
        self._commands_fd = commands_fd  # we write commands here (Chromium's fd 3)
        self._answers_fd = answers_fd  # and read answers and events here (Chromium's fd 4)
        self._folder: Path | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[_Client | None, Any, asyncio.Future[dict[str, Any]] | None]] = {}
        self._owners: dict[str, _Client] = {}  # session id -> the client it belongs to
        self._writer: asyncio.WriteTransport | None = None
        self._read_transport: asyncio.ReadTransport | None = None
        self._reader: asyncio.Task[None] | None = None
        self._server: Server | None = None
        self._closed = asyncio.Event()

    @property
    def socket_path(self) -> Path:
        if self._folder is None:
            raise RuntimeError("DevToolsPipe is not started")
        return self._folder / SOCKET_NAME

    @property
    def url(self) -> str:
        return unix_url(self.socket_path)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def start(self) -> DevToolsPipe:
        # mkdtemp makes the folder mode 0700: only the agent's user can reach the socket in it.
        self._folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="webgen-devtools-"))
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**31 - 1, loop=loop)  # screenshots come as one message of MBs
        self._read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(self._answers_fd, "rb", buffering=0)
        )
        self._writer, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(self._commands_fd, "wb", buffering=0)
        )
        self._reader = asyncio.create_task(self._read(reader))
        # Contexts made before any client asks, the default one included, never download.
        await self.command("Browser.setDownloadBehavior", {"behavior": "deny"})
        self._server = await unix_serve(
            self._serve, str(self.socket_path), max_size=None, ping_interval=None, compression=None
        )
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        for transport in (self._writer, self._read_transport):
            if transport is not None:
                transport.close()
        self._finish()
        if self._folder is not None:
            await asyncio.to_thread(shutil.rmtree, self._folder, True)

    async def command(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
        timeout_s: float = 10.0,
    ) -> dict[str, Any]:
        """Send one command of the agent's own; its result (RuntimeError on a DevTools error)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        request_id = next(self._ids)
        self._pending[request_id] = (None, None, future)
        message: dict[str, Any] = {"id": request_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        self._send(message)
        answer = await asyncio.wait_for(future, timeout_s)
        if "error" in answer:
            raise RuntimeError(f"{method} failed: {answer['error']}")
        return answer.get("result") or {}

    def _send(self, message: dict[str, Any]) -> None:
        if self._writer is None or self._writer.is_closing():
            raise ConnectionError("the browser's DevTools pipe is closed")
        self._writer.write(json.dumps(message).encode() + b"\0")

    def _finish(self) -> None:
        self._closed.set()
        for _, _, future in self._pending.values():
            if future is not None and not future.done():
                future.set_exception(ConnectionError("the browser's DevTools pipe closed"))
        self._pending.clear()

    # -- from the browser ---------------------------------------------------------------------

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                raw = await reader.readuntil(b"\0")
                await self._dispatch(json.loads(raw[:-1]))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the browser exited
        except asyncio.CancelledError:
            raise
        except Exception:  # a message we could not read: the connection is unusable from here
            logger.exception("DevTools pipe reader failed")
        finally:
            self._finish()
            # Every client's connection is closed, so that their calls in flight fail at once (clients
            # are not hashable: one each by identity).
            for client in {id(client): client for client in self._owners.values()}.values():
                with contextlib.suppress(Exception):
                    await client.connection.close()

    async def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message:
            client, client_id, future = self._pending.pop(message["id"], (None, None, None))
            if future is not None:
                if not future.done():
                    future.set_result(message)
                return
            if client is None:
                return
            message["id"] = client_id
            attached = (message.get("result") or {}).get("sessionId")
            if isinstance(attached, str):  # Target.attachToTarget / attachToBrowserTarget
                self._adopt(client, attached)
            context = (message.get("result") or {}).get("browserContextId")
            if isinstance(context, str) and "sessionId" not in message:  # Target.createBrowserContext
                await self._deny_downloads(context)
            await self._deliver(client, message)
            return
        session = message.get("sessionId")
        owner = self._owners.get(session) if isinstance(session, str) else None
        if owner is None:
            return  # the root session's events, or a session whose client has gone
        params = message.get("params") or {}
        if message.get("method") == "Target.attachedToTarget":
            self._adopt(owner, params.get("sessionId", ""))
        await self._deliver(owner, message)
        if message.get("method") == "Target.detachedFromTarget":
            gone = params.get("sessionId", "")
            owner.sessions.discard(gone)
            self._owners.pop(gone, None)

    def _adopt(self, client: _Client, session_id: str) -> None:
        client.sessions.add(session_id)
        self._owners[session_id] = client

    async def _deny_downloads(self, context_id: str) -> None:
        with contextlib.suppress(Exception):  # the context may already be gone
            await self.command("Browser.setDownloadBehavior", {"behavior": "deny", "browserContextId": context_id})

    async def _deliver(self, client: _Client, message: dict[str, Any]) -> None:
        if message.get("sessionId") == client.browser_session:
            del message["sessionId"]  # the client speaks to "the browser", not to a session
        with contextlib.suppress(ConnectionClosed):
            await client.connection.send(json.dumps(message))

    # -- from clients -------------------------------------------------------------------------

    async def _serve(self, connection: ServerConnection) -> None:
        if connection.request is None or connection.request.path != _PATH:
            await connection.close(1008, "unknown path")
            return
        try:
            attached = await self.command("Target.attachToBrowserTarget")
        except (ConnectionError, RuntimeError, TimeoutError):
            await connection.close(1011, "the browser is gone")
            return
        client = _Client(connection=connection, browser_session=attached["sessionId"])
        self._adopt(client, client.browser_session)
        try:
            async for raw in connection:
                self._forward(client, json.loads(raw))
        except (ConnectionClosed, ConnectionError, ValueError):
            pass
        finally:
            for session in client.sessions:
                self._owners.pop(session, None)
            if not self.closed:
                with contextlib.suppress(Exception):
                    # Chromium then disposes the contexts this client made with disposeOnDetach.
                    self._send(
                        {
                            "id": next(self._ids),
                            "method": "Target.detachFromTarget",
                            "params": {"sessionId": client.browser_session},
                        }
                    )

    def _forward(self, client: _Client, message: dict[str, Any]) -> None:
        session = message.get("sessionId")
        if session is None:
            message["sessionId"] = client.browser_session
        elif session not in client.sessions:
            asyncio.ensure_future(
                self._deliver(
                    client, {"id": message.get("id"), "error": {"code": -32001, "message": "Session not found"}}
                )
            )
            return
        if message.get("method") in _DOWNLOAD_COMMANDS:
            params = message.get("params") or {}
            message["params"] = {"behavior": "deny", **{k: v for k, v in params.items() if k == "browserContextId"}}
        request_id = next(self._ids)
        self._pending[request_id] = (client, message.get("id"), None)
        message["id"] = request_id
        self._send(message)
